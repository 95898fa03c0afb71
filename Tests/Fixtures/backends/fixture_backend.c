/* SPDX-License-Identifier: Apache-2.0
 * fixture_backend.c: a minimal AFM backend in plain C99 + pthreads, for the host's dlopen tests.
 *
 * It proves a backend needs nothing but afm_backend.h, and it misbehaves on purpose where tests need it to.
 * Build (see README.md for the variants):
 *
 *   cc -std=c99 -shared -fPIC -fvisibility=hidden -I<include dir> fixture_backend.c -o X.so -lpthread
 *
 * Models: c-echo, c-no-terminal, c-after-terminal, c-slow, c-error, and for runner hosting the process killers
 * c-segfault, c-abort, c-exit, c-hang and the throughput model c-flood; the lifetime probes c-inline,
 * c-cancel-inline, c-refuse-after-terminal and c-slow-generate (README.md gives their exact event sequences).
 * Every vtable call checks the host's lifetime rules: a call after destroy, or a destroy while a call on the
 * instance is still running, aborts the process with a message on stderr.
 * The request JSON is read by a tiny hand-written scanner that is FIXTURE-GRADE: it understands exactly the
 * fields it needs ("model", "system", "input[].type/role/content[].type/text"), skips everything else, decodes
 * string escapes (\uXXXX included), and rejects what it cannot read. It is not a general JSON parser.
 */
#define _POSIX_C_SOURCE 200809L

#include "afm_backend.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------------- */
/* Build-time variants                                                                                   */
/* ---------------------------------------------------------------------------------------------------- */

#ifndef FIXTURE_ABI_MAJOR
#define FIXTURE_ABI_MAJOR AFM_ABI_MAJOR /* -DFIXTURE_ABI_MAJOR=2: claim another major and refuse */
#endif
#ifndef FIXTURE_ABI_MINOR
#define FIXTURE_ABI_MINOR AFM_ABI_MINOR /* -DFIXTURE_ABI_MINOR=0: an ABI 1.0 backend */
#endif
#ifdef FIXTURE_CLAIMS_STRUCTURED_OUTPUT /* describe says "structured_output": true (a 1.0 backend cannot mean it) */
#define FIXTURE_STRUCTURED_OUTPUT "true"
#else
#define FIXTURE_STRUCTURED_OUTPUT "false"
#endif
#ifdef FIXTURE_HUGE_CONTEXT /* describe says "context_tokens": 2^63-1 and states no budgets (the host must refuse it) */
#define FIXTURE_MODEL_NUMBERS "\"context_tokens\":9223372036854775807,"
#else
#define FIXTURE_MODEL_NUMBERS "\"context_tokens\":4096,\"max_input_tokens\":3072,\"max_output_tokens\":1024,"
#endif
#ifndef FIXTURE_VERSION
#define FIXTURE_VERSION "1.0.0" /* -DFIXTURE_VERSION=\"2.0.0\": another build of the same backend */
#endif
#ifdef FIXTURE_SHORT_VTABLE
#define FIXTURE_VTABLE_SIZE 24u /* -DFIXTURE_SHORT_VTABLE: a table that ends before create/describe/... */
#else
#define FIXTURE_VTABLE_SIZE ((uint32_t)sizeof(afm_backend_vtable))
#endif
#ifdef FIXTURE_NO_ENTRY
#define FIXTURE_ENTRY afm_backend_negotiate_typo /* -DFIXTURE_NO_ENTRY: the entry symbol is missing */
#else
#define FIXTURE_ENTRY afm_backend_negotiate
#endif

#define FIXTURE_ID "c-fixture"
#define FIXTURE_SLOW_INTERVAL_MS 20
#define FIXTURE_SLOW_MAX_DELTAS 200
#define FIXTURE_MAX_DEPTH 64

/* ---------------------------------------------------------------------------------------------------- */
/* Small helpers                                                                                         */
/* ---------------------------------------------------------------------------------------------------- */

/** A growable byte buffer. */
typedef struct buffer {
    char *data;
    size_t len;
    size_t cap;
} buffer;

static int buffer_append(buffer *b, const char *bytes, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) return -1;
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static void buffer_free(buffer *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/** Fills a caller-allocated afm_error, within its struct_size, NUL-terminating the message. */
static afm_status fail(afm_error *error, afm_status code, const char *format, ...) {
    if (!error || error->struct_size < sizeof(uint32_t) + sizeof(int32_t)) return code;
    error->code = code;
    size_t capacity = error->struct_size >= sizeof(afm_error) ? sizeof error->message
                                                                : error->struct_size - offsetof(afm_error, message);
    if (capacity == 0) return code;
    va_list args;
    va_start(args, format);
    vsnprintf(error->message, capacity, format, args);
    va_end(args);
    return code;
}

static afm_str span(const char *data, size_t size) {
    afm_str s;
    s.data = size ? data : NULL;
    s.size = size;
    return s;
}

/* ---------------------------------------------------------------------------------------------------- */
/* The fixture-grade request scanner                                                                     */
/* ---------------------------------------------------------------------------------------------------- */

typedef struct scanner {
    const char *p;
    const char *end;
    int depth;
} scanner;

static void skip_ws(scanner *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int expect(scanner *s, char c) {
    skip_ws(s);
    if (s->p >= s->end || *s->p != c) return -1;
    s->p++;
    return 0;
}

static int peek(scanner *s, char c) {
    skip_ws(s);
    return s->p < s->end && *s->p == c;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static int append_utf8(buffer *b, unsigned cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return buffer_append(b, u, n);
}

/** Reads a JSON string into `out` (or skips it when `out` is NULL). */
static int scan_string(scanner *s, buffer *out) {
    if (expect(s, '"') != 0) return -1;
    while (s->p < s->end) {
        char c = *s->p++;
        if (c == '"') return 0;
        if ((unsigned char)c < 0x20) return -1;
        if (c != '\\') {
            if (out && buffer_append(out, &c, 1) != 0) return -1;
            continue;
        }
        if (s->p >= s->end) return -1;
        char e = *s->p++;
        char plain = 0;
        switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
            unsigned cp, low;
            if (s->end - s->p < 4 || hex4(s->p, &cp) != 0) return -1;
            s->p += 4;
            if (cp >= 0xD800 && cp < 0xDC00) { /* a high surrogate needs its low half */
                if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' || hex4(s->p + 2, &low) != 0 ||
                    low < 0xDC00 || low > 0xDFFF)
                    return -1;
                s->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                return -1;
            }
            if (out && append_utf8(out, cp) != 0) return -1;
            continue;
        }
        default: return -1;
        }
        if (out && buffer_append(out, &plain, 1) != 0) return -1;
    }
    return -1;
}

static int skip_value(scanner *s);

static int skip_container(scanner *s, char open, char close) {
    if (++s->depth > FIXTURE_MAX_DEPTH) return -1;
    if (expect(s, open) != 0) return -1;
    if (peek(s, close)) { s->p++; s->depth--; return 0; }
    for (;;) {
        if (open == '{') {
            if (scan_string(s, NULL) != 0 || expect(s, ':') != 0) return -1;
        }
        if (skip_value(s) != 0) return -1;
        if (peek(s, ',')) { s->p++; continue; }
        if (expect(s, close) != 0) return -1;
        s->depth--;
        return 0;
    }
}

/** Skips any JSON value (numbers and literals are checked only for their character set). */
static int skip_value(scanner *s) {
    skip_ws(s);
    if (s->p >= s->end) return -1;
    switch (*s->p) {
    case '"': return scan_string(s, NULL);
    case '{': return skip_container(s, '{', '}');
    case '[': return skip_container(s, '[', ']');
    default: {
        const char *start = s->p;
        while (s->p < s->end && strchr("0123456789+-.eEtruefalsn", *s->p)) s->p++;
        return s->p > start ? 0 : -1;
    }
    }
}

/** What the fixture reads from a generation request. */
typedef struct request_info {
    buffer model;
    buffer last_user_text;
    size_t input_bytes; /* UTF-8 bytes of every system string and every message text part */
    int has_model;
} request_info;

/** Reads one message's content (an array of parts, or a plain string) and appends its text to `text`. */
static int scan_content(scanner *s, buffer *text) {
    if (peek(s, '"')) return scan_string(s, text);
    if (expect(s, '[') != 0) return -1;
    if (peek(s, ']')) { s->p++; return 0; }
    for (;;) {
        buffer type = {0}, part = {0};
        int rc = expect(s, '{');
        while (rc == 0 && !peek(s, '}')) {
            buffer key = {0};
            rc = scan_string(s, &key);
            if (rc == 0) rc = expect(s, ':');
            if (rc == 0) {
                if (key.data && strcmp(key.data, "type") == 0) rc = scan_string(s, &type);
                else if (key.data && strcmp(key.data, "text") == 0) rc = scan_string(s, &part);
                else rc = skip_value(s);
            }
            buffer_free(&key);
            if (rc == 0 && peek(s, ',')) s->p++;
        }
        if (rc == 0) rc = expect(s, '}');
        if (rc == 0 && type.data && strcmp(type.data, "text") == 0 && part.len) rc = buffer_append(text, part.data, part.len);
        buffer_free(&type);
        buffer_free(&part);
        if (rc != 0) return -1;
        if (peek(s, ',')) { s->p++; continue; }
        return expect(s, ']');
    }
}

/** Reads one input item; a user message's text becomes the last user text. */
static int scan_item(scanner *s, request_info *info) {
    buffer type = {0}, role = {0}, text = {0};
    int rc = expect(s, '{');
    while (rc == 0 && !peek(s, '}')) {
        buffer key = {0};
        rc = scan_string(s, &key);
        if (rc == 0) rc = expect(s, ':');
        if (rc == 0) {
            if (key.data && strcmp(key.data, "type") == 0) rc = scan_string(s, &type);
            else if (key.data && strcmp(key.data, "role") == 0) rc = scan_string(s, &role);
            else if (key.data && strcmp(key.data, "content") == 0) rc = scan_content(s, &text);
            else rc = skip_value(s);
        }
        buffer_free(&key);
        if (rc == 0 && peek(s, ',')) s->p++;
    }
    if (rc == 0) rc = expect(s, '}');
    if (rc == 0 && type.data && strcmp(type.data, "message") == 0) {
        info->input_bytes += text.len;
        if (role.data && strcmp(role.data, "user") == 0) {
            info->last_user_text.len = 0;
            rc = buffer_append(&info->last_user_text, text.data ? text.data : "", text.len);
        }
    }
    buffer_free(&type);
    buffer_free(&role);
    buffer_free(&text);
    return rc;
}

static int scan_request(const char *json, size_t size, request_info *info) {
    scanner s = {json, json + size, 0};
    if (expect(&s, '{') != 0) return -1;
    while (!peek(&s, '}')) {
        buffer key = {0};
        int rc = scan_string(&s, &key);
        if (rc == 0) rc = expect(&s, ':');
        if (rc == 0 && key.data && strcmp(key.data, "model") == 0) {
            info->model.len = 0;
            rc = scan_string(&s, &info->model);
            if (rc == 0) rc = buffer_append(&info->model, "", 0); /* "" still gets a NUL-terminated buffer */
            info->has_model = rc == 0;
        } else if (rc == 0 && key.data && strcmp(key.data, "system") == 0 && peek(&s, '[')) {
            s.p++;
            while (rc == 0 && !peek(&s, ']')) {
                buffer text = {0};
                rc = scan_string(&s, &text);
                info->input_bytes += text.len;
                buffer_free(&text);
                if (rc == 0 && peek(&s, ',')) s.p++;
            }
            if (rc == 0) rc = expect(&s, ']');
        } else if (rc == 0 && key.data && strcmp(key.data, "input") == 0 && peek(&s, '[')) {
            s.p++;
            while (rc == 0 && !peek(&s, ']')) {
                rc = scan_item(&s, info);
                if (rc == 0 && peek(&s, ',')) s.p++;
            }
            if (rc == 0) rc = expect(&s, ']');
        } else if (rc == 0) {
            rc = skip_value(&s);
        }
        buffer_free(&key);
        if (rc != 0) return -1;
        if (peek(&s, ',')) s.p++;
    }
    s.p++;
    skip_ws(&s);
    return s.p == s.end ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Instances and generations                                                                             */
/* ---------------------------------------------------------------------------------------------------- */

enum {
    MODEL_ECHO, MODEL_NO_TERMINAL, MODEL_AFTER_TERMINAL, MODEL_SLOW, MODEL_ERROR,
    MODEL_SEGFAULT, MODEL_ABORT, MODEL_EXIT, MODEL_HANG, MODEL_FLOOD,
    MODEL_INLINE, MODEL_CANCEL_INLINE, MODEL_REFUSE_AFTER_TERMINAL, MODEL_SLOW_GENERATE, MODEL_COUNT
};

static const char *const model_ids[MODEL_COUNT] = {
    "c-echo", "c-no-terminal", "c-after-terminal", "c-slow", "c-error",
    "c-segfault", "c-abort", "c-exit", "c-hang", "c-flood",
    "c-inline", "c-cancel-inline", "c-refuse-after-terminal", "c-slow-generate",
};

#define FIXTURE_PROBE_WAIT_DEFAULT_MS 1000 /* how long c-inline / c-cancel-inline wait for a destroy (default) */

#define FIXTURE_CRASH_DELTAS 10   /* the process killers stream this many deltas first ...          */
#define FIXTURE_FLOOD_DEFAULT 100000 /* c-flood's delta count when the user text is not a number     */

typedef struct generation {
    struct generation *next;
    struct afm_instance *owner;
    uint64_t request_id;
    afm_event_sink sink; /* a copy; ctx and emit stay valid until the terminal emit returns */
    int model;
    buffer text;
    int64_t input_tokens;
    int cancelled; /* guarded by owner->mutex */
    int finished;  /* guarded by owner->mutex: the thread is done and can be joined */
    int has_thread; /* 0 for c-cancel-inline, which runs no thread (its terminal event comes from cancel) */
    pthread_t thread;
} generation;

struct afm_instance {
    pthread_mutex_t mutex;
    pthread_cond_t wake; /* CLOCK_MONOTONIC; broadcast by cancel() and destroy() */
    generation *generations; /* every started generation not yet joined */
    int calls;           /* guarded by mutex: vtable calls running on this instance */
    int destroy_started; /* guarded by mutex */
    int destroyed;       /* guarded by mutex; the struct is kept after destroy so a late call is caught */
    int describes;       /* describe calls so far (FIXTURE_MODELS_VANISH) */
};

/* ---------------------------------------------------------------------------------------------------- */
/* Lifetime checks: the host must never call into a destroyed instance, nor destroy one mid-call         */
/* ---------------------------------------------------------------------------------------------------- */

static void lifetime_violation(const char *what) {
    fprintf(stderr, FIXTURE_ID ": host lifetime violation: %s\n", what);
    fflush(stderr);
    abort();
}

static void enter_call(struct afm_instance *instance, const char *name) {
    pthread_mutex_lock(&instance->mutex);
    int dead = instance->destroyed || instance->destroy_started;
    instance->calls++;
    pthread_mutex_unlock(&instance->mutex);
    if (dead) lifetime_violation(name);
}

static void leave_call(struct afm_instance *instance) {
    pthread_mutex_lock(&instance->mutex);
    instance->calls--;
    pthread_mutex_unlock(&instance->mutex);
}

/** Waits up to `ms` for destroy() to start (it never should while a call runs); the probe models use it to hold
 *  their call open exactly when a careless host would destroy the instance. */
static void hold_call_open(struct afm_instance *instance, long ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (ms % 1000) * 1000000L;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&instance->mutex);
    while (!instance->destroy_started)
        if (pthread_cond_timedwait(&instance->wake, &instance->mutex, &deadline) != 0) break;
    pthread_mutex_unlock(&instance->mutex);
}

static long probe_wait_ms(const buffer *text) {
    long ms = text->data && text->len ? strtol(text->data, NULL, 10) : -1;
    return ms >= 0 ? ms : FIXTURE_PROBE_WAIT_DEFAULT_MS;
}

static int emit(generation *g, int32_t type, int32_t code, const char *text, size_t len) {
    afm_event e;
    memset(&e, 0, sizeof e);
    e.struct_size = (uint32_t)sizeof e;
    e.type = type;
    e.code = code;
    e.text = span(text, len);
    e.input_tokens = e.output_tokens = e.reasoning_tokens = e.cached_tokens = -1;
    return g->sink.emit(g->sink.ctx, &e);
}

static void emit_usage(generation *g, int64_t output_tokens) {
    afm_event e;
    memset(&e, 0, sizeof e);
    e.struct_size = (uint32_t)sizeof e;
    e.type = AFM_EVENT_USAGE;
    e.input_tokens = g->input_tokens;
    e.output_tokens = output_tokens;
    e.reasoning_tokens = 0;
    e.cached_tokens = 0;
    (void)g->sink.emit(g->sink.ctx, &e);
}

static int is_cancelled(generation *g) {
    pthread_mutex_lock(&g->owner->mutex);
    int cancelled = g->cancelled;
    pthread_mutex_unlock(&g->owner->mutex);
    return cancelled;
}

/** Waits up to `ms` milliseconds or until cancel(); returns non-zero when cancelled. */
static int wait_or_cancel(generation *g, int ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += (long)ms * 1000000L;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&g->owner->mutex);
    while (!g->cancelled)
        if (pthread_cond_timedwait(&g->owner->wake, &g->owner->mutex, &deadline) != 0) break;
    int cancelled = g->cancelled;
    pthread_mutex_unlock(&g->owner->mutex);
    return cancelled;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void run_echo(generation *g) {
    const char *p = g->text.data ? g->text.data : "";
    const char *end = p + g->text.len;
    int64_t deltas = 0;
    int32_t finish = AFM_FINISH_STOP;
    while (p < end) { /* one piece = leading whitespace + one word, so the pieces concatenate to the text */
        const char *start = p;
        while (p < end && is_space(*p)) p++;
        while (p < end && !is_space(*p)) p++;
        if (is_cancelled(g)) { finish = AFM_FINISH_CANCELLED; break; }
        deltas++;
        if (emit(g, AFM_EVENT_TEXT_DELTA, 0, start, (size_t)(p - start)) != 0) { finish = AFM_FINISH_CANCELLED; break; }
    }
    emit_usage(g, deltas);
    (void)emit(g, AFM_EVENT_DONE, finish, NULL, 0);
}

static void run_slow(generation *g) {
    int32_t finish = AFM_FINISH_STOP;
    for (int i = 0; i < FIXTURE_SLOW_MAX_DELTAS; i++) {
        if (i > 0 && wait_or_cancel(g, FIXTURE_SLOW_INTERVAL_MS)) { finish = AFM_FINISH_CANCELLED; break; }
        if (is_cancelled(g)) { finish = AFM_FINISH_CANCELLED; break; }
        if (emit(g, AFM_EVENT_TEXT_DELTA, 0, "tick ", 5) != 0) { finish = AFM_FINISH_CANCELLED; break; }
    }
    (void)emit(g, AFM_EVENT_DONE, finish, NULL, 0);
}

/** Streams FIXTURE_CRASH_DELTAS "tick " deltas 20 ms apart (so other streams are mid-flight), then kills the
 *  whole process the way `model` says. Returns only when cancelled first. */
static void run_crash(generation *g) {
    for (int i = 0; i < FIXTURE_CRASH_DELTAS; i++) {
        if (i > 0 && wait_or_cancel(g, FIXTURE_SLOW_INTERVAL_MS)) break;
        if (emit(g, AFM_EVENT_TEXT_DELTA, 0, "tick ", 5) != 0) break;
    }
    if (is_cancelled(g)) {
        (void)emit(g, AFM_EVENT_DONE, AFM_FINISH_CANCELLED, NULL, 0);
        return;
    }
    switch (g->model) {
    case MODEL_SEGFAULT: {
        volatile int *nowhere = NULL;
        *nowhere = 1; /* SIGSEGV */
        break;
    }
    case MODEL_ABORT: abort(); /* SIGABRT */
    case MODEL_EXIT: _exit(3);  /* exit status 3, no atexit handlers */
    default: break;
    }
}

/** One delta, then never returns and ignores cancel: only the watchdog (and, in a runner, SIGKILL) ends it. */
static void run_hang(generation *g) {
    (void)emit(g, AFM_EVENT_TEXT_DELTA, 0, "stuck", 5);
    for (;;) {
        struct timespec pause = {0, 100000000L};
        nanosleep(&pause, NULL);
    }
}

/** N one-byte deltas as fast as emit() takes them (N = the user text as a number, or FIXTURE_FLOOD_DEFAULT). */
static void run_flood(generation *g) {
    long count = g->text.data ? strtol(g->text.data, NULL, 10) : 0;
    if (count <= 0) count = FIXTURE_FLOOD_DEFAULT;
    int32_t finish = AFM_FINISH_STOP;
    int64_t deltas = 0;
    for (long i = 0; i < count; i++) {
        if (emit(g, AFM_EVENT_TEXT_DELTA, 0, "x", 1) != 0) { finish = AFM_FINISH_CANCELLED; break; }
        deltas++;
    }
    emit_usage(g, deltas);
    (void)emit(g, AFM_EVENT_DONE, finish, NULL, 0);
}

static void *generation_main(void *arg) {
    generation *g = arg;
    switch (g->model) {
    case MODEL_ECHO: run_echo(g); break;
    case MODEL_NO_TERMINAL: (void)emit(g, AFM_EVENT_TEXT_DELTA, 0, "partial", 7); break; /* and no terminal */
    case MODEL_AFTER_TERMINAL:
        (void)emit(g, AFM_EVENT_TEXT_DELTA, 0, "hi", 2);
        (void)emit(g, AFM_EVENT_DONE, AFM_FINISH_STOP, NULL, 0);
        /* Contract breach on purpose: the host must ignore everything after the terminal event. */
        (void)emit(g, AFM_EVENT_TEXT_DELTA, 0, "late", 4);
        (void)emit(g, AFM_EVENT_DONE, AFM_FINISH_STOP, NULL, 0);
        break;
    case MODEL_SLOW: run_slow(g); break;
    case MODEL_ERROR: {
        static const char message[] = "fixture rate limit";
        (void)emit(g, AFM_EVENT_ERROR, AFM_ERR_RATE_LIMITED, message, sizeof message - 1);
        break;
    }
    case MODEL_SEGFAULT:
    case MODEL_ABORT:
    case MODEL_EXIT: run_crash(g); break;
    case MODEL_HANG: run_hang(g); break;
    case MODEL_FLOOD: run_flood(g); break;
    case MODEL_SLOW_GENERATE: run_slow(g); break;
    default: break;
    }
    pthread_mutex_lock(&g->owner->mutex);
    g->finished = 1;
    pthread_mutex_unlock(&g->owner->mutex);
    return NULL;
}

/** Joins and frees generations whose threads are done (all of them when `all` is set). Called with no lock. */
static void reap(struct afm_instance *instance, int all) {
    for (;;) {
        generation *victim = NULL;
        pthread_mutex_lock(&instance->mutex);
        for (generation **link = &instance->generations; *link; link = &(*link)->next) {
            if (all || (*link)->finished) {
                victim = *link;
                *link = victim->next;
                break;
            }
        }
        pthread_mutex_unlock(&instance->mutex);
        if (!victim) return;
        if (victim->has_thread) pthread_join(victim->thread, NULL);
        buffer_free(&victim->text);
        free(victim);
    }
}

/* ---------------------------------------------------------------------------------------------------- */
/* The vtable                                                                                            */
/* ---------------------------------------------------------------------------------------------------- */

static afm_status fixture_create(const afm_host_api *host, afm_str config_json, afm_instance **out, afm_error *error) {
    (void)host;
    (void)config_json; /* the fixture accepts any config document */
#ifdef FIXTURE_CREATE_FAILS
    (void)out;
    return fail(error, AFM_ERR_MODEL_UNAVAILABLE, "fixture model file missing");
#else
    if (!out) return fail(error, AFM_ERR_INVALID_REQUEST, "create: out is NULL");
    struct afm_instance *instance = calloc(1, sizeof *instance);
    if (!instance) return fail(error, AFM_ERR_INTERNAL, "out of memory");
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&instance->wake, &attributes);
    pthread_condattr_destroy(&attributes);
    pthread_mutex_init(&instance->mutex, NULL);
    *out = instance;
    return AFM_OK;
#endif
}

static afm_status fixture_describe(afm_instance *instance, const afm_writer *writer, afm_error *error) {
    if (!instance) return fail(error, AFM_ERR_INVALID_REQUEST, "describe: instance is NULL");
    if (!writer || writer->struct_size < sizeof(afm_writer) || !writer->write)
        return fail(error, AFM_ERR_INVALID_REQUEST, "describe: bad writer");
    enter_call(instance, "describe after destroy");
    int describes = ++instance->describes; /* [control-thread]: never concurrent with itself */
    leave_call(instance);
#ifdef FIXTURE_MODELS_VANISH
    int first_model = describes > 1 ? 1 : 0; /* every describe after the first omits c-echo */
#else
    int first_model = 0;
    (void)describes;
#endif
    char document[8192];
    int n = snprintf(document, sizeof document,
                     "{\"describe_version\":1,\"backend\":\"" FIXTURE_ID "\",\"version\":\"" FIXTURE_VERSION
                     "\",\"available\":true,\"reason\":null,\"reason_code\":null,\"models\":[");
    for (int m = first_model; m < MODEL_COUNT && n > 0 && (size_t)n < sizeof document; m++) {
        n += snprintf(document + n, sizeof document - (size_t)n,
                      "%s{\"id\":\"%s\"," FIXTURE_MODEL_NUMBERS
                      "\"capabilities\":{\"streaming\":true,\"tools\":false,\"vision\":false,\"reasoning\":false,"
                      "\"reasoning_optional\":true,\"structured_output\":" FIXTURE_STRUCTURED_OUTPUT "}}",
                      m > first_model ? "," : "", model_ids[m]);
    }
    if (n > 0 && (size_t)n < sizeof document) n += snprintf(document + n, sizeof document - (size_t)n, "]}");
    if (n <= 0 || (size_t)n >= sizeof document) return fail(error, AFM_ERR_INTERNAL, "describe document too long");
    writer->write(writer->ctx, span(document, (size_t)n));
    return AFM_OK;
}

static afm_status generate_checked(afm_instance *instance, uint64_t request_id, afm_str request_json,
                                   const afm_event_sink *sink, afm_error *error);

static afm_status fixture_generate(afm_instance *instance, uint64_t request_id, afm_str request_json,
                                   const afm_event_sink *sink, afm_error *error) {
    if (!instance) return fail(error, AFM_ERR_INVALID_REQUEST, "generate: instance is NULL");
    enter_call(instance, "generate after destroy");
    afm_status status = generate_checked(instance, request_id, request_json, sink, error);
    leave_call(instance);
    return status;
}

static afm_status generate_checked(afm_instance *instance, uint64_t request_id, afm_str request_json,
                                   const afm_event_sink *sink, afm_error *error) {
    if (!sink || sink->struct_size < sizeof(afm_event_sink) || !sink->emit)
        return fail(error, AFM_ERR_INVALID_REQUEST, "generate: bad event sink");
    if (!request_json.data && request_json.size)
        return fail(error, AFM_ERR_INVALID_REQUEST, "generate: bad request span");
    reap(instance, 0);

    request_info info;
    memset(&info, 0, sizeof info);
    if (scan_request(request_json.data ? request_json.data : "", (size_t)request_json.size, &info) != 0 ||
        !info.has_model) {
        buffer_free(&info.model);
        buffer_free(&info.last_user_text);
        return fail(error, AFM_ERR_INVALID_REQUEST, "the fixture cannot read this request (malformed JSON or no model)");
    }
    int model = -1;
    for (int m = 0; m < MODEL_COUNT; m++)
        if (strcmp(info.model.data, model_ids[m]) == 0) model = m;
    if (model < 0) {
        afm_status status = fail(error, AFM_ERR_MODEL_UNAVAILABLE, "model \"%.200s\" is not served by " FIXTURE_ID,
                                 info.model.data);
        buffer_free(&info.model);
        buffer_free(&info.last_user_text);
        return status;
    }
    buffer_free(&info.model);

    generation *g = calloc(1, sizeof *g);
    if (!g) {
        buffer_free(&info.last_user_text);
        return fail(error, AFM_ERR_INTERNAL, "out of memory");
    }
    g->owner = instance;
    g->request_id = request_id;
    g->sink = *sink;
    g->model = model;
    g->text = info.last_user_text;
    g->input_tokens = (int64_t)((info.input_bytes + 3) / 4);

    switch (model) {
    case MODEL_INLINE: /* the whole answer from inside generate, then the call stays open a while */
    case MODEL_REFUSE_AFTER_TERMINAL: {
        (void)emit(g, AFM_EVENT_TEXT_DELTA, 0, "inline", 6);
        (void)emit(g, AFM_EVENT_DONE, AFM_FINISH_STOP, NULL, 0);
        long wait = probe_wait_ms(&g->text);
        buffer_free(&g->text);
        free(g);
        if (model == MODEL_REFUSE_AFTER_TERMINAL) /* contract breach on purpose: events, then a refusal */
            return fail(error, AFM_ERR_INTERNAL, "c-refuse-after-terminal refuses after its terminal event");
        hold_call_open(instance, wait);
        return AFM_OK;
    }
    case MODEL_SLOW_GENERATE: { /* a generate that takes long (the user text in ms), then c-slow on a thread */
        long ms = probe_wait_ms(&g->text);
        struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
        break;
    }
    default: break;
    }

    /* Registered before the thread starts, so cancel() finds it even if it arrives at once. */
    pthread_mutex_lock(&instance->mutex);
    g->next = instance->generations;
    instance->generations = g;
    int rc = 0;
    if (model != MODEL_CANCEL_INLINE) { /* no thread for it: its terminal event comes from cancel() */
        g->has_thread = 1;
        rc = pthread_create(&g->thread, NULL, generation_main, g);
        if (rc != 0) instance->generations = g->next;
    }
    pthread_mutex_unlock(&instance->mutex);
    if (rc != 0) {
        buffer_free(&g->text);
        free(g);
        return fail(error, AFM_ERR_BUSY, "cannot start a generation thread");
    }
    return AFM_OK;
}

static void fixture_cancel(afm_instance *instance, uint64_t request_id) {
    if (!instance) return;
    enter_call(instance, "cancel after destroy");
    generation *inline_end = NULL; /* a c-cancel-inline generation that ends inside this call */
    pthread_mutex_lock(&instance->mutex);
    for (generation *g = instance->generations; g; g = g->next) {
        if (g->request_id != request_id) continue;
        if (g->model == MODEL_CANCEL_INLINE && !g->cancelled) inline_end = g;
        g->cancelled = 1;
    }
    pthread_cond_broadcast(&instance->wake);
    pthread_mutex_unlock(&instance->mutex);
    if (inline_end) {
        /* The terminal event while the host's cancel call is still running: the sharpest form of a backend
         * thread's terminal event racing a cancel. Then the call stays open a while. */
        (void)emit(inline_end, AFM_EVENT_DONE, AFM_FINISH_CANCELLED, NULL, 0);
        hold_call_open(instance, probe_wait_ms(&inline_end->text));
        pthread_mutex_lock(&instance->mutex);
        inline_end->finished = 1; /* only now may reap() free it */
        pthread_mutex_unlock(&instance->mutex);
    }
    leave_call(instance);
}

static void fixture_destroy(afm_instance *instance) {
    if (!instance) return;
    pthread_mutex_lock(&instance->mutex);
    int overlapping = instance->calls;
    int again = instance->destroy_started;
    instance->destroy_started = 1;
    for (generation *g = instance->generations; g; g = g->next) g->cancelled = 1; /* only a misbehaving host */
    pthread_cond_broadcast(&instance->wake);
    pthread_mutex_unlock(&instance->mutex);
    if (again) lifetime_violation("destroy called twice");
    if (overlapping) lifetime_violation("destroy while a generate/cancel call was still running");
    reap(instance, 1);
    pthread_mutex_lock(&instance->mutex);
    instance->destroyed = 1;
    pthread_mutex_unlock(&instance->mutex);
    /* The struct itself is kept (a few bytes per instance, in a test fixture) so that a late call finds
     * `destroyed` set and aborts loudly instead of touching freed memory. */
}

static const void *fixture_get_extension(afm_instance *instance, const char *id) {
    (void)id;
    if (!instance) return NULL;
    enter_call(instance, "get_extension after destroy");
    leave_call(instance);
    return NULL;
}

static const afm_backend_vtable fixture_vtable = {
    FIXTURE_VTABLE_SIZE, 0,           fixture_create, fixture_describe, fixture_generate, fixture_cancel,
    fixture_destroy,     fixture_get_extension,
};

/* ---------------------------------------------------------------------------------------------------- */
/* The entry point: the only exported symbol                                                             */
/* ---------------------------------------------------------------------------------------------------- */

AFM_EXPORT afm_status FIXTURE_ENTRY(const afm_host_api *host, afm_backend_info *out, afm_error *error);

AFM_EXPORT afm_status FIXTURE_ENTRY(const afm_host_api *host, afm_backend_info *out, afm_error *error) {
    if (!host || !out || host->struct_size < 3 * sizeof(uint32_t) || out->struct_size < AFM_BACKEND_INFO_SIZE_1_0)
        return fail(error, AFM_ERR_INCOMPATIBLE, FIXTURE_ID ": host or out missing or too small");
    out->abi_major = FIXTURE_ABI_MAJOR;
    out->abi_minor = FIXTURE_ABI_MINOR;
    out->reserved0 = 0;
    out->id = FIXTURE_ID;
    out->version = FIXTURE_VERSION;
    out->vtable = NULL;
    if (host->abi_major != FIXTURE_ABI_MAJOR)
        return fail(error, AFM_ERR_INCOMPATIBLE, FIXTURE_ID " speaks AFM ABI %u.%u; host offered %u.%u",
                    (unsigned)FIXTURE_ABI_MAJOR, (unsigned)FIXTURE_ABI_MINOR, (unsigned)host->abi_major,
                    (unsigned)host->abi_minor);
    out->vtable = &fixture_vtable;
    return AFM_OK;
}
