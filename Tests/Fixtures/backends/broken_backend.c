/* SPDX-License-Identifier: Apache-2.0
 * broken_backend.c: the afm-dev example backend (share/afm-dev/example_backend.c) with one deliberate defect per
 * build, for afm-backend-check's own test (Tests/AFMBackendsTests/BackendCheckTests.swift). Each -D flag breaks
 * exactly one rule of docs/backend-abi.md, and afm-backend-check must fail exactly the check named after it:
 *
 *   BREAK_EXPORTS            exports a second function                                  -> exports
 *   BREAK_NEGOTIATION        accepts a host of any ABI major                            -> negotiation
 *   BREAK_DESCRIBE           describes a capability as "no" instead of false            -> describe
 *   BREAK_LIFECYCLE          a second create in one process fails                       -> lifecycle
 *   BREAK_EVENT_ORDER        a short answer sends DONE twice, the second 0.5 s late     -> event-order
 *   BREAK_UTF8               splits a two-byte character across two deltas             -> utf8
 *   BREAK_ERROR_CODES        refuses an unknown model with status 42                    -> error-codes
 *   BREAK_CANCEL             ignores cancel() and emit's stop; a long answer takes 2 s  -> cancel
 *   BREAK_CANCEL_BLOCKING    as BREAK_CANCEL, and cancel() waits until the generation   -> cancel
 *                            ended (so every event comes before cancel returns)
 *   BREAK_CONCURRENCY        refuses (busy) beyond 16 generations in flight             -> concurrency
 *   BREAK_DESTROY            destroy returns without joining a thread still finishing   -> destroy-in-flight
 *                            after its terminal event (which then aborts: a use after free)
 *   BREAK_DESTROY_EVENTS     destroy sends DONE/CANCELLED to every generation whose      -> destroy-in-flight
 *                            thread is still finishing (a second terminal event)
 *   BREAK_RUNNER             create needs an environment variable runners do not pass  -> runner
 *
 * Without a flag it is the example, and passes every check. Two more flags are not defects of one check:
 *
 *   NOISY_STDOUT             prints to standard output (allowed: it still passes every check)
 *   LEAVE_PROCESS            create forks a process that sleeps an hour holding the checker's pipes: every check
 *                            that creates an instance fails (and the checker still finishes)
 *   BAD_ID                   the id is "../example": negotiation fails, and the runner check refuses to make
 *                            a file name of it
 *   FLOOD_OUTPUT             create writes 512 MiB to standard output (the checker's memory must not follow it)
 *   FLOOD_LOG                create writes 1 GiB through host->log, 1 MiB a line (nor must the check's child's)
 */
#define _POSIX_C_SOURCE 200809L

#include <afm_backend.h>

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(BAD_ID)
#define EXAMPLE_ID "../example" /* a path, not an id */
#else
#define EXAMPLE_ID "example"
#endif
#define EXAMPLE_VERSION "1.0.0"
#define EXAMPLE_MODEL "example-hello"

#if defined(BREAK_UTF8)
/* "café" with its é (C3 A9) cut in two: each delta alone is invalid UTF-8, their concatenation is fine. */
static const char *const greeting[] = {"Hello", " caf\xC3", "\xA9", " backend."};
#else
static const char *const greeting[] = {"Hello", " from", " the", " example", " backend."};
#endif
#define GREETING_WORDS (sizeof greeting / sizeof greeting[0])

/** Fills the host's error struct (within its struct_size) and returns `code`. */
static afm_status fail(afm_error *error, afm_status code, const char *format, ...) {
    if (!error || error->struct_size < offsetof(afm_error, message)) return code;
    error->code = code;
    size_t capacity = error->struct_size >= sizeof(afm_error) ? sizeof error->message
                                                                : error->struct_size - offsetof(afm_error, message);
    if (capacity > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(error->message, capacity, format, args);
        va_end(args);
    }
    return code;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Instances and generations                                                                             */
/* ---------------------------------------------------------------------------------------------------- */

typedef struct generation {
    struct generation *next;
    struct afm_instance *owner;
    uint64_t request_id;
    afm_event_sink sink; /* a copy: ctx and emit stay valid until the terminal event has been emitted */
    int long_answer;     /* BREAK_CANCEL, BREAK_EVENT_ORDER: max_output_tokens above 64 */
    int cancelled;       /* guarded by owner->mutex */
} generation;

struct afm_instance {
    int in_flight; /* BREAK_CONCURRENCY: generations whose thread has not ended */
    int destroyed; /* BREAK_DESTROY: destroy returned (guarded by mutex) */
    pthread_mutex_t mutex;
    pthread_cond_t idle;     /* signalled when a generation ends */
    generation *running;     /* every generation whose thread has not ended */
};

static __attribute__((unused)) int is_cancelled(generation *g) {
    pthread_mutex_lock(&g->owner->mutex);
    int cancelled = g->cancelled;
    pthread_mutex_unlock(&g->owner->mutex);
    return cancelled;
}

/** Emits one event; a non-zero return means the host wants the generation to stop. */
static int emit(generation *g, afm_event_type type, int32_t code, const char *text, int64_t output_tokens) {
    afm_event e;
    memset(&e, 0, sizeof e);
    e.struct_size = (uint32_t)sizeof e;
    e.type = type;
    e.code = code;
    e.text.data = text;
    e.text.size = text ? strlen(text) : 0;
    e.input_tokens = type == AFM_EVENT_USAGE ? 1 : -1;
    e.output_tokens = type == AFM_EVENT_USAGE ? output_tokens : -1;
    e.reasoning_tokens = type == AFM_EVENT_USAGE ? 0 : -1;
    e.cached_tokens = type == AFM_EVENT_USAGE ? 0 : -1;
    return g->sink.emit(g->sink.ctx, &e);
}

/** Where `needle` starts inside the span (which is not NUL-terminated), or NULL. */
static const char *span_find(afm_str span, const char *needle) {
    size_t length = strlen(needle);
    for (size_t i = 0; span.data && length <= span.size && i <= span.size - length; i++)
        if (memcmp(span.data + i, needle, length) == 0) return span.data + i;
    return NULL;
}

/** The number after "request_version": in the request, or -1 when there is none. */
static long request_version(afm_str request) {
    static const char key[] = "\"request_version\":";
    const char *c = span_find(request, key);
    if (!c) return -1;
    const char *end = request.data + request.size;
    for (c += sizeof key - 1; c < end && *c == ' '; c++) {
    }
    if (c == end || *c < '0' || *c > '9') return -1;
    long version = 0;
    for (; c < end && *c >= '0' && *c <= '9' && version < 1000000; c++) version = version * 10 + (*c - '0');
    return version;
}

static __attribute__((unused)) void pause_ms(long milliseconds) {
    struct timespec delay = {milliseconds / 1000, (milliseconds % 1000) * 1000000L};
    while (nanosleep(&delay, &delay) != 0) {
    }
}

static void *generation_main(void *arg) {
    generation *g = arg;
    int32_t finish = AFM_FINISH_STOP;
    int64_t words = 0;
#if defined(BREAK_CONCURRENCY)
    pause_ms(200); /* keep many generations in flight at once */
#endif
#if defined(BREAK_CANCEL) || defined(BREAK_CANCEL_BLOCKING)
    for (int i = 0; g->long_answer && i < 40; i++) {
        pause_ms(50); /* 2 s in all (within the check's 5 s), deaf to cancel() and to emit's stop */
        (void)emit(g, AFM_EVENT_TEXT_DELTA, 0, " more", 0);
        words++;
    }
#endif
    for (size_t i = 0; i < GREETING_WORDS; i++) {
#if defined(BREAK_CANCEL) || defined(BREAK_CANCEL_BLOCKING)
        (void)emit(g, AFM_EVENT_TEXT_DELTA, 0, greeting[i], 0);
#else
#if defined(BREAK_DESTROY)
        pause_ms(100); /* still running when destroy returns */
#endif
        if (is_cancelled(g) || emit(g, AFM_EVENT_TEXT_DELTA, 0, greeting[i], 0) != 0) {
            finish = AFM_FINISH_CANCELLED;
            break;
        }
#endif
        words++;
    }
    (void)emit(g, AFM_EVENT_USAGE, 0, NULL, words);
    (void)emit(g, AFM_EVENT_DONE, finish, NULL, 0); /* exactly one terminal event, then nothing more */
#if defined(BREAK_EVENT_ORDER)
    if (!g->long_answer) {
        pause_ms(500); /* later than a glance after the terminal event */
        (void)emit(g, AFM_EVENT_DONE, finish, NULL, 0);
    }
#endif
#if defined(BREAK_DESTROY) || defined(BREAK_DESTROY_EVENTS)
    pause_ms(100); /* clean-up after the terminal event: destroy, which may come now, must wait for it */
#endif

    struct afm_instance *instance = g->owner;
    pthread_mutex_lock(&instance->mutex);
#if defined(BREAK_DESTROY)
    if (instance->destroyed) {
        fputs("broken_backend: a generation thread used its instance after destroy returned\n", stderr);
        abort(); /* what a use after free may do, made certain */
    }
#endif
    instance->in_flight--;
    for (generation **link = &instance->running; *link; link = &(*link)->next)
        if (*link == g) {
            *link = g->next;
            break;
        }
    pthread_cond_broadcast(&instance->idle);
    pthread_mutex_unlock(&instance->mutex);
    free(g);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------- */
/* The function table                                                                                    */
/* ---------------------------------------------------------------------------------------------------- */

static afm_status example_create(const afm_host_api *host, afm_str config_json, afm_instance **out,
                                 afm_error *error) {
    (void)host;
    (void)config_json;
    if (!out) return fail(error, AFM_ERR_INVALID_REQUEST, "create: out is NULL");
#if defined(BREAK_LIFECYCLE)
    static int created = 0;
    if (created++ > 0) return fail(error, AFM_ERR_INTERNAL, "this build creates one instance per process");
#endif
#if defined(NOISY_STDOUT)
    printf("broken_backend: create, not flushed"); /* lost or diverted: never the checker's result */
    puts("broken_backend: create");
    fflush(stdout);
#endif
#if defined(FLOOD_LOG)
    {
        static char line[1 << 20];
        memset(line, 'l', sizeof line);
        afm_str message = {line, sizeof line};
        for (int i = 0; i < 1024; i++) host->log(host->host_ctx, AFM_LOG_INFO, message);
    }
#endif
#if defined(FLOOD_OUTPUT)
    {
        static char block[65536];
        memset(block, 'x', sizeof block);
        for (int i = 0; i < 8192; i++) {
            size_t done = 0;
            while (done < sizeof block) {
                ssize_t n = write(1, block + done, sizeof block - done);
                if (n <= 0) break;
                done += (size_t)n;
            }
        }
    }
#endif
#if defined(LEAVE_PROCESS)
    if (fork() == 0) {
        sleep(3600); /* a helper nobody ends, with the checker's standard output and error */
        _exit(0);
    }
#endif
#if defined(BREAK_RUNNER)
    if (!getenv("AFM_BROKEN_FIXTURE_TOKEN"))
        return fail(error, AFM_ERR_MODEL_UNAVAILABLE, "AFM_BROKEN_FIXTURE_TOKEN is not set");
#endif
    struct afm_instance *instance = calloc(1, sizeof *instance);
    if (!instance) return fail(error, AFM_ERR_INTERNAL, "out of memory");
    pthread_mutex_init(&instance->mutex, NULL);
    pthread_cond_init(&instance->idle, NULL);
    *out = instance;
    return AFM_OK;
}

static afm_status example_describe(afm_instance *instance, const afm_writer *writer, afm_error *error) {
    (void)instance;
    if (!writer || writer->struct_size < sizeof(afm_writer) || !writer->write)
        return fail(error, AFM_ERR_INVALID_REQUEST, "describe: bad writer");
    static const char document[] =
        "{\"describe_version\":1,\"backend\":\"" EXAMPLE_ID "\",\"version\":\"" EXAMPLE_VERSION "\","
        "\"available\":true,\"reason\":null,\"reason_code\":null,\"models\":[{\"id\":\"" EXAMPLE_MODEL "\","
        "\"context_tokens\":4096,\"max_input_tokens\":3072,\"max_output_tokens\":1024,"
#if defined(BREAK_DESCRIBE)
        "\"capabilities\":{\"streaming\":true,\"tools\":false,\"vision\":\"no\",\"reasoning\":false,"
#else
        "\"capabilities\":{\"streaming\":true,\"tools\":false,\"vision\":false,\"reasoning\":false,"
#endif
        "\"reasoning_optional\":true}}]}";
    afm_str bytes = {document, sizeof document - 1};
    writer->write(writer->ctx, bytes);
    return AFM_OK;
}

static afm_status example_generate(afm_instance *instance, uint64_t request_id, afm_str request_json,
                                   const afm_event_sink *sink, afm_error *error) {
    if (!instance) return fail(error, AFM_ERR_INVALID_REQUEST, "generate: instance is NULL");
#if defined(NOISY_STDOUT)
    printf("{\"passed\":false,\"detail\":\"printed by generate %llu\"}\n", (unsigned long long)request_id);
#endif
#if defined(BREAK_ERROR_CODES)
    if (!span_find(request_json, "\"" EXAMPLE_MODEL "\""))
        return fail(error, 42, "unknown model");
#endif
    /* A real backend parses the request document (docs/backend-abi.md §8.2) with a JSON library. This one reads
     * two things: the version (a reader refuses a version it does not know, §1) and that it asks for its model. */
    long version = request_version(request_json);
    if (version != 1)
        return fail(error, version < 0 ? AFM_ERR_INVALID_REQUEST : AFM_ERR_INCOMPATIBLE,
                    EXAMPLE_ID " reads request_version 1, not %ld", version);
    if (!span_find(request_json, "\"" EXAMPLE_MODEL "\""))
        return fail(error, AFM_ERR_MODEL_UNAVAILABLE, EXAMPLE_ID " serves only the model " EXAMPLE_MODEL);
    if (!sink || sink->struct_size < sizeof(afm_event_sink) || !sink->emit)
        return fail(error, AFM_ERR_INVALID_REQUEST, "generate: bad event sink");
    generation *g = calloc(1, sizeof *g);
    if (!g) return fail(error, AFM_ERR_INTERNAL, "out of memory");
    g->owner = instance;
    g->request_id = request_id;
    g->sink = *sink;
#if defined(BREAK_CANCEL) || defined(BREAK_CANCEL_BLOCKING) || defined(BREAK_EVENT_ORDER)
    /* The digits after the key (the span is not NUL-terminated, so no atoi). */
    const char *budget = span_find(request_json, "\"max_output_tokens\":");
    long tokens = 0;
    if (budget)
        for (const char *c = budget + strlen("\"max_output_tokens\":");
             c < request_json.data + request_json.size && *c >= '0' && *c <= '9' && tokens < 100000000; c++)
            tokens = tokens * 10 + (*c - '0');
    g->long_answer = tokens > 64;
#endif

    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    /* Registered before the thread starts, so cancel() finds it even when it arrives at once. */
    pthread_mutex_lock(&instance->mutex);
#if defined(BREAK_CONCURRENCY)
    if (instance->in_flight >= 16) {
        pthread_mutex_unlock(&instance->mutex);
        pthread_attr_destroy(&attributes);
        free(g);
        return fail(error, AFM_ERR_BUSY, "16 generations are running");
    }
#endif
    instance->in_flight++;
    g->next = instance->running;
    instance->running = g;
    int rc = pthread_create(&thread, &attributes, generation_main, g);
    if (rc != 0) {
        instance->running = g->next;
        instance->in_flight--;
    }
    pthread_mutex_unlock(&instance->mutex);
    pthread_attr_destroy(&attributes);
    if (rc != 0) {
        free(g);
        return fail(error, AFM_ERR_BUSY, "cannot start a generation thread");
    }
    return AFM_OK; /* an error returned here means no event will ever be emitted for this request */
}

static void example_cancel(afm_instance *instance, uint64_t request_id) {
    if (!instance) return;
    pthread_mutex_lock(&instance->mutex);
    for (generation *g = instance->running; g; g = g->next)
        if (g->request_id == request_id) g->cancelled = 1;
#if defined(BREAK_CANCEL_BLOCKING)
    for (;;) {
        int running = 0;
        for (generation *g = instance->running; g; g = g->next) running |= g->request_id == request_id;
        if (!running) break;
        pthread_cond_wait(&instance->idle, &instance->mutex);
    }
#endif
    pthread_mutex_unlock(&instance->mutex);
}

static void example_destroy(afm_instance *instance) {
    if (!instance) return;
#if defined(BREAK_DESTROY)
    pthread_mutex_lock(&instance->mutex);
    instance->destroyed = 1;
    pthread_mutex_unlock(&instance->mutex);
    return; /* neither cancels nor joins (and leaks the instance, which its threads still use) */
#endif
    pthread_mutex_lock(&instance->mutex);
#if defined(BREAK_DESTROY_EVENTS)
    for (generation *g = instance->running; g; g = g->next) (void)emit(g, AFM_EVENT_DONE, AFM_FINISH_CANCELLED, NULL, 0);
#endif
    for (generation *g = instance->running; g; g = g->next) g->cancelled = 1;
    while (instance->running) pthread_cond_wait(&instance->idle, &instance->mutex);
    pthread_mutex_unlock(&instance->mutex);
    pthread_cond_destroy(&instance->idle);
    pthread_mutex_destroy(&instance->mutex);
    free(instance);
}

static const void *example_get_extension(afm_instance *instance, const char *id) {
    (void)instance;
    (void)id;
    return NULL; /* no optional features */
}

static const afm_backend_vtable example_vtable = {
    .struct_size = (uint32_t)sizeof(afm_backend_vtable),
    .create = example_create,
    .describe = example_describe,
    .generate = example_generate,
    .cancel = example_cancel,
    .destroy = example_destroy,
    .get_extension = example_get_extension,
};

/* ---------------------------------------------------------------------------------------------------- */
/* The entry point: the only exported symbol                                                             */
/* ---------------------------------------------------------------------------------------------------- */

#if defined(BREAK_EXPORTS)
AFM_EXPORT int example_debug_generations(void) { return 0; }
#endif

AFM_EXPORT afm_status afm_backend_negotiate(const afm_host_api *host, afm_backend_info *out, afm_error *error) {
    if (!host || !out || host->struct_size < 3 * sizeof(uint32_t) || out->struct_size < AFM_BACKEND_INFO_SIZE_1_0)
        return fail(error, AFM_ERR_INCOMPATIBLE, EXAMPLE_ID ": host or out missing or too small");
    /* Only the ABI 1.0 fields, which the check above found room for; out->struct_size stays as the host set it. */
    out->abi_major = AFM_ABI_MAJOR;
    out->abi_minor = AFM_ABI_MINOR;
    out->reserved0 = 0;
    out->id = EXAMPLE_ID;
    out->version = EXAMPLE_VERSION;
    out->vtable = NULL;
#if defined(BREAK_NEGOTIATION)
    if (0)
#else
    if (host->abi_major != AFM_ABI_MAJOR)
#endif
        return fail(error, AFM_ERR_INCOMPATIBLE, EXAMPLE_ID " speaks AFM ABI %u.%u; the host offered %u.%u",
                    (unsigned)AFM_ABI_MAJOR, (unsigned)AFM_ABI_MINOR, (unsigned)host->abi_major,
                    (unsigned)host->abi_minor);
    out->vtable = &example_vtable;
    return AFM_OK;
}
