/* SPDX-License-Identifier: Apache-2.0
 * afm_backend.h: the one contract between the AFM host (afmd, afm-backend-runner) and a model backend.
 *
 * ABI 1.1. This header compiles as C99 and as C++17. It is the whole interface: a backend links no host
 * symbols, sees no sockets and no HTTP, and exports exactly one function, afm_backend_negotiate().
 *
 * Versioning rules (see docs/backend-abi.md for the rationale and the JSON documents):
 *   - AFM_ABI_MAJOR changes only for incompatible changes. Host and backend majors must be equal.
 *   - AFM_ABI_MINOR changes for append-only additions: new fields at the end of a struct, new slots at the
 *     end of a table, new event types, new error codes. Nothing is ever reordered, removed or retyped.
 *   - Every struct starts with `uint32_t struct_size`. A reader checks that a field lies inside struct_size
 *     before reading it. A struct the callee fills in a caller-allocated buffer (afm_backend_info,
 *     afm_error) carries the caller's size: the callee writes at most min(caller's struct_size, its own
 *     sizeof) bytes and never writes struct_size itself, which stays as the caller set it (what the callee
 *     knew to fill is told by its version: afm_backend_info.abi_minor). Structs a side allocates itself
 *     carry its own sizeof().
 *   - Only fixed-width integers, pointers and the structs below cross the boundary: no C enums, no bool,
 *     no size_t. Enumerations are `#define`d int32_t constants.
 *   - Documents that can grow (backend config, generation request, describe) are UTF-8 JSON with a version
 *     field, documented in docs/backend-abi.md.
 *
 * Memory: nothing allocated on one side is freed on the other. Every pointer passed in a call is borrowed
 * for the duration of that call only; the receiver copies what it keeps.
 *
 * Thread tags used below:
 *   [control-thread]  called by the host from one thread per backend instance, never concurrently with
 *                     another [control-thread] call on the same instance.
 *   [thread-safe]     may be called from any host thread, concurrently with any call but destroy().
 *   [any-thread]      the backend may call it from any thread it owns.
 *
 * Errors and panics never cross the boundary: C++ exceptions, Rust panics and Swift traps must be caught
 * (or avoided) inside the backend and turned into AFM_ERR_INTERNAL.
 */
#ifndef AFM_BACKEND_H
#define AFM_BACKEND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------- */
/* Versions                                                                                              */
/* ---------------------------------------------------------------------------------------------------- */

#define AFM_ABI_MAJOR 1
/* 1.1: structured output. The generation request document carries `output_format` (the normalized JSON Schema
 * of the answer, or "any JSON object"), and a model's describe capabilities may say "structured_output": true.
 * No struct changed. The host believes that capability only from a backend that reports minor >= 1. */
#define AFM_ABI_MINOR 1

/** The name of the only symbol a backend exports. */
#define AFM_BACKEND_ENTRY_SYMBOL "afm_backend_negotiate"

#if defined(_WIN32)
#define AFM_EXPORT __declspec(dllexport)
#else
#define AFM_EXPORT __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------------------------- */
/* Status and error codes (int32_t). Stable: values are never reused. Shared by host and backends; the   */
/* host maps them to HTTP statuses, admin-socket errors and CLI exit codes from one table.               */
/* ---------------------------------------------------------------------------------------------------- */

typedef int32_t afm_status;

#define AFM_OK                          0
#define AFM_ERR_INVALID_REQUEST         1  /* the request or config is malformed for this backend        */
#define AFM_ERR_MODEL_UNAVAILABLE       2  /* model not loaded, not configured, or failed to load        */
#define AFM_ERR_CONTEXT_LENGTH_EXCEEDED 3  /* input does not fit the model's input budget                */
#define AFM_ERR_RATE_LIMITED            4  /* too many requests right now; retry later                   */
#define AFM_ERR_QUOTA_EXCEEDED          5  /* a daily or account quota is used up                        */
#define AFM_ERR_GUARDRAIL_VIOLATION     6  /* a safety filter stopped the request                        */
#define AFM_ERR_REFUSAL                 7  /* the model refused                                          */
#define AFM_ERR_UNSUPPORTED_CAPABILITY  8  /* the request needs a capability the backend lacks          */
#define AFM_ERR_TOOL_FAILED             9  /* tool-call generation or parsing failed                     */
#define AFM_ERR_CANCELLED              10  /* the request was cancelled                                  */
#define AFM_ERR_BUSY                   11  /* the backend cannot take another request now                */
#define AFM_ERR_TIMEOUT                12  /* a deadline passed                                          */
#define AFM_ERR_INTERNAL               13  /* a bug or an unexpected failure inside the backend          */
#define AFM_ERR_INCOMPATIBLE           14  /* ABI negotiation failed (version or struct size)            */

/** A caller-allocated error report. The callee writes `code` and a NUL-terminated UTF-8 `message`
 *  (truncated to fit). The caller sets struct_size before the call. */
typedef struct afm_error {
    uint32_t struct_size;
    int32_t code;            /* one of AFM_ERR_* */
    char message[512];       /* NUL-terminated UTF-8, human-readable, no secrets */
} afm_error;

/** A borrowed UTF-8 string or byte span: not NUL-terminated, valid for the duration of the call that
 *  passes it. `data` may be NULL only when `size` is 0. */
typedef struct afm_str {
    const char *data;
    uint64_t size;
} afm_str;

/* ---------------------------------------------------------------------------------------------------- */
/* Host API: what the host offers the backend. Host-owned, immutable, valid until the process exits.     */
/* ---------------------------------------------------------------------------------------------------- */

#define AFM_LOG_DEBUG   0
#define AFM_LOG_INFO    1
#define AFM_LOG_WARNING 2
#define AFM_LOG_ERROR   3

typedef struct afm_host_api {
    uint32_t struct_size;
    uint32_t abi_major;         /* the host's AFM_ABI_MAJOR */
    uint32_t abi_minor;         /* the highest minor the host understands */
    uint32_t reserved0;
    void *host_ctx;             /* opaque; pass back to the functions below */

    /** Writes one log line (no trailing newline needed) to the host's log, tagged with the backend id.
     *  [thread-safe] The host copies `message` before returning. */
    void (*log)(void *host_ctx, int32_t level, afm_str message);

    /** Returns a host extension table for `id` (e.g. "afm.host.metrics/1"), or NULL when the host has none.
     *  [thread-safe] The returned table is host-owned and lives until the process exits. */
    const void *(*get_extension)(void *host_ctx, const char *id);
} afm_host_api;

/* ---------------------------------------------------------------------------------------------------- */
/* Events: what a generation streams back to the host.                                                   */
/* ---------------------------------------------------------------------------------------------------- */

typedef int32_t afm_event_type;

#define AFM_EVENT_TEXT_DELTA          1  /* text: the next piece of visible output (UTF-8)              */
#define AFM_EVENT_TOOL_CALL_BEGIN     2  /* index: call index; name: function name; text: call id or "" */
#define AFM_EVENT_TOOL_CALL_ARGUMENTS 3  /* index: call index; text: next piece of the JSON arguments   */
#define AFM_EVENT_TOOL_CALL_END       4  /* index: call index                                            */
#define AFM_EVENT_REASONING_TEXT      5  /* text: reasoning text the model made visible (optional)      */
#define AFM_EVENT_REASONING_STATE     6  /* text: opaque reasoning bytes the host seals for the client  */
#define AFM_EVENT_USAGE               7  /* the *_tokens fields: cumulative counts so far               */
#define AFM_EVENT_DONE              100  /* terminal: code is an AFM_FINISH_* reason                    */
#define AFM_EVENT_ERROR             101  /* terminal: code is an AFM_ERR_*; text is the message         */

typedef int32_t afm_finish_reason;

#define AFM_FINISH_STOP       0  /* the model ended its answer                        */
#define AFM_FINISH_LENGTH     1  /* max_output_tokens was reached                     */
#define AFM_FINISH_TOOL_CALLS 2  /* the model stopped to call tools                   */
#define AFM_FINISH_CANCELLED  3  /* cancel() or a non-zero emit() return stopped it   */

/** One event. All pointers are borrowed for the duration of emit(); the host copies what it keeps. */
typedef struct afm_event {
    uint32_t struct_size;
    afm_event_type type;
    int32_t index;              /* tool-call index (0-based), else 0 */
    int32_t code;               /* DONE: AFM_FINISH_*; ERROR: AFM_ERR_*; else 0 */
    afm_str text;               /* see the event types */
    afm_str name;               /* TOOL_CALL_BEGIN: function name; else empty */
    int64_t input_tokens;       /* USAGE only: cumulative counts; -1 = unknown. Ignored on other events. */
    int64_t output_tokens;
    int64_t reasoning_tokens;
    int64_t cached_tokens;
} afm_event;

/** The host's event sink for one generation. Host-owned. It stays readable, and emit() stays safe to call,
 *  for at least 30 seconds after the terminal event of its generation; calls after the terminal event
 *  return non-zero and their events are ignored. (A correct backend never makes them.) */
typedef struct afm_event_sink {
    uint32_t struct_size;
    uint32_t reserved0;
    void *ctx;
    /** Delivers one event. [any-thread] Calls for one generation must be serialized (never concurrent).
     *  The host copies the event before returning. emit() may block the calling thread while the
     *  client's connection is congested (this is how backpressure reaches the backend), so call it from
     *  a thread that may wait; it returns promptly once the request is cancelled.
     *  Returns 0 to continue, non-zero to stop: the client is gone or the request was cancelled. After a
     *  non-zero return the backend stops promptly and sends its terminal event (DONE with
     *  AFM_FINISH_CANCELLED). Exactly one terminal event (DONE or ERROR) ends every accepted generation;
     *  events after it are ignored by the host. */
    int32_t (*emit)(void *ctx, const afm_event *event);
} afm_event_sink;

/** A host-provided writer for documents a backend returns (describe). */
typedef struct afm_writer {
    uint32_t struct_size;
    uint32_t reserved0;
    void *ctx;
    /** Appends bytes. [control-thread] The host copies them before returning. */
    void (*write)(void *ctx, afm_str bytes);
} afm_writer;

/* ---------------------------------------------------------------------------------------------------- */
/* The backend's function table. Backend-owned, static, valid until the process exits. Append-only.      */
/* ---------------------------------------------------------------------------------------------------- */

typedef struct afm_instance afm_instance;   /* opaque, backend-owned */

typedef struct afm_backend_vtable {
    uint32_t struct_size;
    uint32_t reserved0;

    /** Creates an instance from the backend config document (docs/backend-abi.md, "Backend config").
     *  May load a model and take long; the host calls it off its request threads.
     *  [control-thread] On success stores the instance in *out and returns AFM_OK; on failure returns an
     *  AFM_ERR_* code, fills *error, and leaves *out untouched. `host` lives until the process exits. */
    afm_status (*create)(const afm_host_api *host, afm_str config_json, afm_instance **out, afm_error *error);

    /** Writes the describe document (models, capabilities, budgets, availability) to `writer`.
     *  [control-thread] Returns AFM_OK or an AFM_ERR_* code with *error filled. Cheap: no model loading. */
    afm_status (*describe)(afm_instance *instance, const afm_writer *writer, afm_error *error);

    /** Starts one generation for the request document (docs/backend-abi.md, "Generation request").
     *  [thread-safe] Must not wait for the generation: start it (on a backend thread) and return. A backend
     *  that already holds the whole answer (at most 64 events, terminal included) may instead emit it from
     *  inside generate: the host never blocks the first 64 emits of a generation (docs/backend-abi.md §5).
     *  Returns AFM_OK when accepted: exactly one terminal event will then reach `sink` (possibly before
     *  generate returns). Returns an AFM_ERR_* code with *error filled when refused: then no event is
     *  sent. `request_id` is unique per instance; `sink` stays valid until its terminal emit returns. */
    afm_status (*generate)(afm_instance *instance, uint64_t request_id, afm_str request_json,
                           const afm_event_sink *sink, afm_error *error);

    /** Asks a running generation to stop. [thread-safe] Idempotent, non-blocking, and harmless for an
     *  unknown or finished request_id. The host calls it only after generate() returned AFM_OK for that
     *  request_id. The generation ends with DONE/AFM_FINISH_CANCELLED. */
    void (*cancel)(afm_instance *instance, uint64_t request_id);

    /** Destroys the instance and frees its memory. [control-thread] Called only after every accepted
     *  generation delivered its terminal event. Must join every thread the backend started. */
    void (*destroy)(afm_instance *instance);

    /** Returns an optional feature table for `id` (e.g. "afm.tokenize/1"), or NULL when unsupported.
     *  [thread-safe] The table is backend-owned and valid until destroy(). Third-party ids use reverse
     *  DNS: "com.vendor.feature/1". */
    const void *(*get_extension)(afm_instance *instance, const char *id);
} afm_backend_vtable;

/** What a backend answers to negotiation. The host allocates it and sets struct_size; the backend fills the
 *  fields it knows (within struct_size, which it leaves alone); strings are static. */
typedef struct afm_backend_info {
    uint32_t struct_size;
    uint32_t abi_major;                 /* the backend's AFM_ABI_MAJOR */
    uint32_t abi_minor;                 /* the backend's AFM_ABI_MINOR */
    uint32_t reserved0;
    const char *id;                     /* stable backend id, e.g. "scripted", "com.vendor.npu" */
    const char *version;                /* the backend's own version, e.g. "1.4.2" */
    const afm_backend_vtable *vtable;   /* static, valid until the process exits */
} afm_backend_info;

/* ---------------------------------------------------------------------------------------------------- */
/* Optional extensions (get_extension).                                                                   */
/* ---------------------------------------------------------------------------------------------------- */

#define AFM_EXT_TOKENIZE "afm.tokenize/1"

/** "afm.tokenize/1": counts the tokens of a generation request's input as the backend would. */
typedef struct afm_ext_tokenize {
    uint32_t struct_size;
    uint32_t reserved0;
    /** [thread-safe] Counts the input tokens of `request_json` (a generation request document) into
     *  *out_tokens. Returns AFM_OK, or an AFM_ERR_* code with *error filled. */
    afm_status (*count_input_tokens)(afm_instance *instance, afm_str request_json, int64_t *out_tokens,
                                     afm_error *error);
} afm_ext_tokenize;

/* ---------------------------------------------------------------------------------------------------- */
/* The entry point.                                                                                       */
/* ---------------------------------------------------------------------------------------------------- */

/** Negotiates the ABI. The only exported symbol of a backend.
 *  The host fills *host (its ABI version) and sets out->struct_size and error->struct_size; the backend
 *  fills *out. Returns AFM_OK, or AFM_ERR_INCOMPATIBLE with a message naming both versions when
 *  host->abi_major differs from the backend's. Must be cheap: no threads, no model loading, no I/O.
 *  [control-thread] May be called more than once per process (once per loaded copy). */
typedef afm_status (*afm_backend_negotiate_fn)(const afm_host_api *host, afm_backend_info *out, afm_error *error);

AFM_EXPORT afm_status afm_backend_negotiate(const afm_host_api *host, afm_backend_info *out, afm_error *error);

/* Sizes of the ABI 1.0 structs on LP64 platforms, for readers that check a peer's struct_size. These
 * never change: a later minor that appends fields makes sizeof() larger, not these. */
#define AFM_BACKEND_INFO_SIZE_1_0   40u
#define AFM_BACKEND_VTABLE_SIZE_1_0 56u
#define AFM_EVENT_SIZE_1_0          80u

#ifdef __cplusplus
}
#endif

#endif /* AFM_BACKEND_H */
