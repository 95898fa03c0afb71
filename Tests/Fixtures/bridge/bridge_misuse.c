/* SPDX-License-Identifier: Apache-2.0
 * bridge_misuse.c: what a host gets from libafm-bridge.so when it uses a handle wrongly (BridgeLibraryTests
 * compiles it with pkg-config afm-bridge and reads its report). Nothing here may crash or hang the process.
 *
 *   bridge_misuse stale    close twice, send after close, a pointer that was never a handle, a close racing
 *                          another close and sends from another thread: every status is printed, and how many
 *                          of those sends were answered
 *   bridge_misuse cross MS two handles whose callbacks close each other, the second MS ms after the first (0: at
 *                          the same moment; 200: while the first close already stops the second handle's delivery
 *                          thread): one close is refused (AFM_BRIDGE_ERR_WRONG_THREAD), the other ends its
 *                          handle, nothing deadlocks
 *
 * Prints one line of key=value pairs. An alarm ends the process (SIGALRM) if anything hangs for 30 s.
 */
#define _POSIX_C_SOURCE 200809L

#include <afm_bridge.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";

struct host {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int answered;
};

static void on_message(void *user_data, const char *json, uint64_t size) {
    struct host *host = user_data;
    (void)json;
    (void)size;
    pthread_mutex_lock(&host->lock);
    host->answered++;
    pthread_cond_broadcast(&host->changed);
    pthread_mutex_unlock(&host->lock);
}

static void host_init(struct host *host) {
    memset(host, 0, sizeof *host);
    pthread_mutex_init(&host->lock, NULL);
    pthread_cond_init(&host->changed, NULL);
}

static void wait_answered(struct host *host, int count) {
    pthread_mutex_lock(&host->lock);
    while (host->answered < count) pthread_cond_wait(&host->changed, &host->lock);
    pthread_mutex_unlock(&host->lock);
}

static afm_bridge *open_or_die(afm_bridge_callback callback, void *user_data) {
    afm_bridge *bridge = NULL;
    char error[256] = "";
    if (afm_bridge_open(NULL, callback, user_data, &bridge, error, sizeof error) != AFM_BRIDGE_OK) {
        fprintf(stderr, "afm_bridge_open failed: %s\n", error);
        exit(1);
    }
    return bridge;
}

/* ---- stale: closed handles and pointers that were never handles ---- */

struct racer {
    afm_bridge *bridge;
    afm_bridge_status status;
    int sends_ok, sends_closed, sends_other;
};

static void *close_racer(void *argument) {
    struct racer *racer = argument;
    racer->status = afm_bridge_close(racer->bridge);
    return NULL;
}

static void *send_racer(void *argument) {
    struct racer *racer = argument;
    /* Sends until the handle is closed under it (then a few more, which must all be refused). */
    for (int after_close = 0; after_close < 100;) {
        afm_bridge_status status = afm_bridge_send(racer->bridge, ping, strlen(ping));
        if (status == AFM_BRIDGE_OK) __atomic_fetch_add(&racer->sends_ok, 1, __ATOMIC_RELAXED);
        else if (status == AFM_BRIDGE_ERR_CLOSED) racer->sends_closed++, after_close++;
        else racer->sends_other++, after_close++;
    }
    return NULL;
}

static int stale(void) {
    struct host host;
    host_init(&host);
    afm_bridge *bridge = open_or_die(on_message, &host);
    afm_bridge_send(bridge, ping, strlen(ping));
    wait_answered(&host, 1);
    afm_bridge_status first_close = afm_bridge_close(bridge);
    /* The handle is closed: each of these must be refused, not read memory that was freed. */
    afm_bridge_status second_close = afm_bridge_close(bridge);
    afm_bridge_status send_after_close = afm_bridge_send(bridge, ping, strlen(ping));
    int not_a_handle = 42;
    afm_bridge_status send_to_garbage = afm_bridge_send((afm_bridge *)&not_a_handle, ping, strlen(ping));
    afm_bridge_status close_garbage = afm_bridge_close((afm_bridge *)&not_a_handle);

    /* A new handle works, and the old one stays closed (handles are never reused). */
    struct host second;
    host_init(&second);
    afm_bridge *fresh = open_or_die(on_message, &second);
    afm_bridge_status fresh_send = afm_bridge_send(fresh, ping, strlen(ping));
    wait_answered(&second, 1);
    afm_bridge_status stale_after_reopen = afm_bridge_send(bridge, ping, strlen(ping));
    afm_bridge_status fresh_close = afm_bridge_close(fresh);

    /* Two threads close one handle at once while a third sends to it: one close wins, the other is told the
     * handle is closed, and every send is either handled or refused. */
    struct host third;
    host_init(&third);
    afm_bridge *raced = open_or_die(on_message, &third);
    struct racer closers[2] = {{.bridge = raced}, {.bridge = raced}}, sender = {.bridge = raced};
    pthread_t threads[3];
    pthread_create(&threads[2], NULL, send_racer, &sender);
    while (__atomic_load_n(&sender.sends_ok, __ATOMIC_RELAXED) < 50)
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 100000}, NULL);
    pthread_create(&threads[0], NULL, close_racer, &closers[0]);
    pthread_create(&threads[1], NULL, close_racer, &closers[1]);
    for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);
    int race_ok = (closers[0].status == AFM_BRIDGE_OK) + (closers[1].status == AFM_BRIDGE_OK);
    int race_closed = (closers[0].status == AFM_BRIDGE_ERR_CLOSED) + (closers[1].status == AFM_BRIDGE_ERR_CLOSED);
    /* Every send that returned AFM_BRIDGE_OK was answered before the close returned. */
    pthread_mutex_lock(&third.lock);
    int raced_answered = third.answered;
    pthread_mutex_unlock(&third.lock);

    printf("first_close=%d second_close=%d send_after_close=%d send_to_garbage=%d close_garbage=%d fresh_send=%d "
           "stale_after_reopen=%d fresh_close=%d race_ok=%d race_closed=%d sends_ok=%d sends_closed=%d "
           "sends_other=%d raced_answered=%d\n",
           first_close, second_close, send_after_close, send_to_garbage, close_garbage, fresh_send,
           stale_after_reopen, fresh_close, race_ok, race_closed, sender.sends_ok, sender.sends_closed,
           sender.sends_other, raced_answered);
    return 0;
}

/* ---- cross: two callbacks close each other's handle at the same moment ---- */

struct peer {
    afm_bridge *self;
    afm_bridge *other;
    pthread_barrier_t *both_inside;
    long delay_ms; /* before closing the other handle */
    afm_bridge_status status; /* of closing the other handle from this one's callback */
    int done;
};

static pthread_mutex_t cross_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cross_changed = PTHREAD_COND_INITIALIZER;

static void on_cross(void *user_data, const char *json, uint64_t size) {
    struct peer *peer = user_data;
    (void)json;
    (void)size;
    pthread_mutex_lock(&cross_lock);
    int first = !peer->done;
    peer->done = 1; /* claimed: later messages (none are expected) pass by */
    pthread_mutex_unlock(&cross_lock);
    if (!first) return;
    /* Both delivery threads are inside a callback before either closes the other. */
    pthread_barrier_wait(peer->both_inside);
    if (peer->delay_ms > 0)
        nanosleep(&(struct timespec){.tv_sec = peer->delay_ms / 1000, .tv_nsec = (peer->delay_ms % 1000) * 1000000}, NULL);
    afm_bridge_status status = afm_bridge_close(peer->other);
    pthread_mutex_lock(&cross_lock);
    peer->status = status;
    peer->done = 2;
    pthread_cond_broadcast(&cross_changed);
    pthread_mutex_unlock(&cross_lock);
}

static int cross(long delay_ms) {
    pthread_barrier_t both_inside;
    pthread_barrier_init(&both_inside, NULL, 2);
    struct peer a = {.both_inside = &both_inside, .status = -1};
    struct peer b = {.both_inside = &both_inside, .status = -1, .delay_ms = delay_ms};
    a.self = open_or_die(on_cross, &a);
    b.self = open_or_die(on_cross, &b);
    a.other = b.self;
    b.other = a.self;
    afm_bridge_send(a.self, ping, strlen(ping));
    afm_bridge_send(b.self, ping, strlen(ping));
    pthread_mutex_lock(&cross_lock);
    while (a.done < 2 || b.done < 2) pthread_cond_wait(&cross_changed, &cross_lock);
    pthread_mutex_unlock(&cross_lock);
    /* The handle whose close was refused is still open: the host closes it from its own thread. */
    afm_bridge_status a_after = afm_bridge_close(a.self);
    afm_bridge_status b_after = afm_bridge_close(b.self);
    int closed_in_callback = (a.status == AFM_BRIDGE_OK) + (b.status == AFM_BRIDGE_OK);
    int refused = (a.status == AFM_BRIDGE_ERR_WRONG_THREAD) + (b.status == AFM_BRIDGE_ERR_WRONG_THREAD);
    int closed_after = (a_after == AFM_BRIDGE_OK) + (b_after == AFM_BRIDGE_OK);
    int already_closed = (a_after == AFM_BRIDGE_ERR_CLOSED) + (b_after == AFM_BRIDGE_ERR_CLOSED);
    printf("a_status=%d b_status=%d closed_in_callback=%d refused=%d closed_after=%d already_closed=%d\n", a.status,
           b.status, closed_in_callback, refused, closed_after, already_closed);
    pthread_barrier_destroy(&both_inside);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bridge_misuse stale | cross [DELAY_MS]\n");
        return 64;
    }
    /* A deadlock ends the process with SIGALRM instead of hanging the test (the test runner's threads block
     * signals, and a child inherits the mask: unblock it). */
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    sigprocmask(SIG_UNBLOCK, &alarm_only, NULL);
    alarm(30);
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(argv[1], "stale") == 0) return stale();
    if (strcmp(argv[1], "cross") == 0) return cross(argc > 2 ? atol(argv[2]) : 0);
    fprintf(stderr, "bridge_misuse: unknown mode %s\n", argv[1]);
    return 64;
}
