/* SPDX-License-Identifier: Apache-2.0
 * bridge_lifecycle.c: opens and closes libafm-bridge.so handles many times and reports what the process holds
 * (BridgeLibraryTests compiles it with pkg-config afm-bridge and reads its report).
 *
 *   bridge_lifecycle cycles N                  N × (open, ping answered, close), after a warm-up of 100
 *   bridge_lifecycle active N URL MODEL        N × (open, a run streaming text, close while it runs)
 *
 * Prints one line: key=value pairs (rss_kib_before/after, fds_before/after, threads_before/after, and for
 * `active` the slowest close in ms and how many callbacks came after a close returned, which must be 0).
 */
#define _POSIX_C_SOURCE 200809L

#include <afm_bridge.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct host {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int answered;   /* responses received */
    int streaming;  /* a text event arrived */
    int closed;     /* afm_bridge_close returned */
    int late;       /* callbacks after that */
};

static void on_message(void *user_data, const char *json, uint64_t size) {
    struct host *host = user_data;
    (void)size;
    pthread_mutex_lock(&host->lock);
    if (host->closed) host->late++;
    if (strncmp(json, "{\"jsonrpc\":\"2.0\",\"id\":", 22) == 0) host->answered++;
    if (strstr(json, "\"event\":{\"type\":\"text\"") != NULL) host->streaming = 1;
    pthread_cond_broadcast(&host->changed);
    pthread_mutex_unlock(&host->lock);
}

static long rss_kib(void) {
    FILE *file = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (file == NULL) return -1;
    if (fscanf(file, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(file);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int count_fds(void) {
    DIR *dir = opendir("/proc/self/fd");
    int count = 0;
    if (dir == NULL) return -1;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;)
        if (entry->d_name[0] != '.') count++;
    closedir(dir);
    return count - 1; /* the directory's own descriptor */
}

static int count_threads(void) {
    FILE *file = fopen("/proc/self/status", "r");
    char line[256];
    int threads = -1;
    if (file == NULL) return -1;
    while (fgets(line, sizeof line, file) != NULL)
        if (sscanf(line, "Threads: %d", &threads) == 1) break;
    fclose(file);
    return threads;
}

static void wait_for(struct host *host, int *flag, int value) {
    pthread_mutex_lock(&host->lock);
    while (*flag < value) pthread_cond_wait(&host->changed, &host->lock);
    pthread_mutex_unlock(&host->lock);
}

static void send_text(afm_bridge *bridge, const char *json) {
    if (afm_bridge_send(bridge, json, strlen(json)) != AFM_BRIDGE_OK) {
        fprintf(stderr, "afm_bridge_send failed\n");
        exit(1);
    }
}

/* One handle: open, ping (or a streaming run), close. Returns the close's duration in ms. */
static double cycle(const char *config, int active, int *late) {
    struct host host;
    memset(&host, 0, sizeof host);
    pthread_mutex_init(&host.lock, NULL);
    pthread_cond_init(&host.changed, NULL);
    afm_bridge *bridge = NULL;
    char error[256];
    if (afm_bridge_open(config, on_message, &host, &bridge, error, sizeof error) != AFM_BRIDGE_OK) {
        fprintf(stderr, "afm_bridge_open failed: %s\n", error);
        exit(1);
    }
    if (active) {
        send_text(bridge, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"agent.create\",\"params\":{}}");
        wait_for(&host, &host.answered, 1);
        send_text(bridge, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"agent.run\",\"params\":{\"agent_id\":\"agent-1\","
                          "\"prompt\":\"Count from one to two hundred in words.\",\"policy\":{\"max_output_tokens\":400}}}");
        wait_for(&host, &host.streaming, 1);
    } else {
        send_text(bridge, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
        wait_for(&host, &host.answered, 1);
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    if (afm_bridge_close(bridge) != AFM_BRIDGE_OK) {
        fprintf(stderr, "afm_bridge_close failed\n");
        exit(1);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    pthread_mutex_lock(&host.lock);
    host.closed = 1;
    pthread_mutex_unlock(&host.lock);
    /* A callback after close returned would have to come now, from a thread close did not end. */
    if (active) nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 20000000}, NULL);
    pthread_mutex_lock(&host.lock);
    *late += host.late;
    pthread_mutex_unlock(&host.lock);
    pthread_cond_destroy(&host.changed);
    pthread_mutex_destroy(&host.lock);
    return (double)(end.tv_sec - start.tv_sec) * 1000.0 + (double)(end.tv_nsec - start.tv_nsec) / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bridge_lifecycle cycles N | active N URL MODEL\n");
        return 64;
    }
    int active = strcmp(argv[1], "active") == 0;
    int n = atoi(argv[2]);
    char config[1024] = "";
    if (active) {
        if (argc < 5) return 64;
        snprintf(config, sizeof config, "{\"url\":\"%s\",\"model\":\"%s\"}", argv[3], argv[4]);
    }
    int late = 0;
    double slowest = 0;
    /* Warm-up: the Swift runtime's thread pool and caches reach their working size. */
    for (int i = 0; i < (active ? 2 : 100); i++) cycle(config, active, &late);
    long rss_before = rss_kib();
    int fds_before = count_fds(), threads_before = count_threads();
    for (int i = 0; i < n; i++) {
        double ms = cycle(config, active, &late);
        if (ms > slowest) slowest = ms;
    }
    printf("cycles=%d rss_kib_before=%ld rss_kib_after=%ld fds_before=%d fds_after=%d threads_before=%d threads_after=%d "
           "slowest_close_ms=%.1f late_callbacks=%d\n",
           n, rss_before, rss_kib(), fds_before, count_fds(), threads_before, count_threads(), slowest, late);
    return 0;
}
