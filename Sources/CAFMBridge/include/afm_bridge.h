/* SPDX-License-Identifier: Apache-2.0
 * afm_bridge.h: AFM agents and NPCs inside any program, through one C entry point that takes and gives JSON.
 *
 * libafm-bridge.so speaks the bridge protocol (docs/bridge.md: JSON-RPC 2.0, agents with tools the host runs,
 * MCP servers, schema turns, NPCs, the world's facts) with the same dispatcher as `afm bridge` does on stdin and
 * stdout. The host sends one JSON-RPC message per afm_bridge_send() call and receives every response and
 * notification (`run.event`: streamed text, tool calls to run, the end of a run) through its callback.
 *
 *     static void on_message(void *user_data, const char *json, uint64_t size) { ... copy or parse json ... }
 *
 *     afm_bridge *bridge = NULL;
 *     if (afm_bridge_open("{\"url\":\"http://127.0.0.1:11535\"}", on_message, state, &bridge, NULL, 0) != AFM_BRIDGE_OK)
 *         ...;
 *     const char *request = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"agent.create\",\"params\":{}}";
 *     afm_bridge_send(bridge, request, strlen(request));
 *     ...
 *     afm_bridge_close(bridge);
 *
 * Interface version 1.1 (1.1 added AFM_BRIDGE_ERR_CLOSED); this header compiles as C99 and as C++17. Only fixed-width integers, pointers and
 * NUL-terminated UTF-8 strings cross it. Versioning: AFM_BRIDGE_ABI_MAJOR changes only for incompatible
 * changes; AFM_BRIDGE_ABI_MINOR for additions (new functions, new status codes). The protocol inside the JSON
 * has its own version (`initialize`).
 *
 * Memory: nothing allocated on one side is freed on the other. Every pointer the host passes is borrowed for the
 * duration of the call (the library copies what it keeps); every pointer the library passes to the callback is
 * borrowed for the duration of the callback (the host copies what it keeps).
 *
 * Threads. Each handle has one *delivery thread*, started by afm_bridge_open() and ended by afm_bridge_close().
 * The callback runs only on that thread: one message at a time, in order, never concurrently with itself, and
 * never inside afm_bridge_send() (a send queues its answer; the callback delivers it). A run's id is always
 * delivered before its first `run.event`. Tags used below:
 *   [any-thread]       may be called from any host thread, concurrently with any other call on the same handle
 *                      (a call racing afm_bridge_close() of its handle is handled, or refused with
 *                      AFM_BRIDGE_ERR_CLOSED).
 *   [not-callback]     must not be called from inside the handle's own callback (it would wait for itself).
 *
 * Errors inside the protocol (bad JSON, unknown methods, bad params, failed runs) are JSON-RPC errors and events
 * delivered through the callback, never status codes. Swift traps never cross the boundary: bad input is an error.
 */
#ifndef AFM_BRIDGE_H
#define AFM_BRIDGE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AFM_BRIDGE_ABI_MAJOR 1
#define AFM_BRIDGE_ABI_MINOR 1

/* Status codes (int32_t). Stable: values are never reused. */
typedef int32_t afm_bridge_status;

#define AFM_BRIDGE_OK                   0
#define AFM_BRIDGE_ERR_INVALID_ARGUMENT 1  /* a required pointer is NULL                                         */
#define AFM_BRIDGE_ERR_INVALID_CONFIG   2  /* the config JSON is malformed or has an unknown or invalid field     */
#define AFM_BRIDGE_ERR_WRONG_THREAD     3  /* afm_bridge_close() would wait for its caller: called from the      *
                                            * handle's own callback, or from a callback whose handle that close *
                                            * would wait for (callbacks closing each other's handles)           */
#define AFM_BRIDGE_ERR_RESOURCES        4  /* the delivery thread could not be started                            */
#define AFM_BRIDGE_ERR_CLOSED           5  /* the handle is closed or being closed, or was never one (1.1)       */

/** An open bridge. Opaque, library-owned: valid from a successful afm_bridge_open() until afm_bridge_close().
 *  A handle is a name, not an address (it is never dereferenced, and never reused in a process): a call with a
 *  closed handle, a handle being closed, or a pointer that never was a handle returns AFM_BRIDGE_ERR_CLOSED and
 *  touches nothing. */
typedef struct afm_bridge afm_bridge;

/** Receives one outgoing message: a JSON-RPC response or notification, UTF-8, `size` bytes, NUL-terminated
 *  (json[size] == 0), without a trailing newline. `json` is borrowed for the duration of the call: copy it to
 *  keep it. Runs on the handle's delivery thread (see Threads above); may call afm_bridge_send() on any handle,
 *  and afm_bridge_close() on other handles only (refused with AFM_BRIDGE_ERR_WRONG_THREAD where it would
 *  deadlock: see afm_bridge_close()). A callback that blocks holds back every later message of its
 *  handle (never the models: runs go on and their events queue up). */
typedef void (*afm_bridge_callback)(void *user_data, const char *json, uint64_t size);

/** Opens a bridge.
 *  config_json: NULL, "" or a JSON object, NUL-terminated UTF-8, every field optional:
 *    {"url": "http://127.0.0.1:11535",  the gateway of agents that name none
 *     "model": "on-device",            the model of agents that name none
 *     "max_agents": 1024, "max_runs": 1024, "max_message_bytes": 8388608}
 *  callback: required; user_data is passed to it unchanged (may be NULL).
 *  out: required; receives the handle on success, is left untouched on failure.
 *  error, error_size: optional (NULL, 0); on failure receives a NUL-terminated message, truncated to fit.
 *  Returns AFM_BRIDGE_OK, AFM_BRIDGE_ERR_INVALID_ARGUMENT, AFM_BRIDGE_ERR_INVALID_CONFIG or
 *  AFM_BRIDGE_ERR_RESOURCES. Owner: the caller owns the handle and must close it exactly once.
 *  [any-thread] No network connection is made until a request needs one; nothing is delivered until a message
 *  is sent. */
afm_bridge_status afm_bridge_open(const char *config_json, afm_bridge_callback callback, void *user_data,
                                  afm_bridge **out, char *error, uint64_t error_size);

/** Sends one JSON-RPC 2.0 message (a request or a notification): `size` bytes of UTF-8 at `json`, NUL not
 *  required, one trailing newline allowed. The answer (or the error: −32700 for bad JSON, −32600, −32601,
 *  −32602 naming the field, …) arrives through the callback; a notification is never answered.
 *  Returns AFM_BRIDGE_OK once the message is handled, AFM_BRIDGE_ERR_INVALID_ARGUMENT when bridge is NULL or
 *  json is NULL with a non-zero size, or AFM_BRIDGE_ERR_CLOSED when the handle is closed, being closed, or not a
 *  handle (the message is dropped). A message sent with AFM_BRIDGE_OK is answered even when a close on another
 *  thread races the send: the close delivers the answer before it returns. Never blocks on a model or on the
 *  callback.
 *  [any-thread] Borrowed: json is read during the call only. */
afm_bridge_status afm_bridge_send(afm_bridge *bridge, const char *json, uint64_t size);

/** Closes a bridge: new requests are refused, every run is cancelled (its last `run.event`, `failed` with
 *  `cancelled`, is still delivered), MCP servers are stopped, queued messages are delivered, and the delivery
 *  thread ends. Returns when all of that is done: afterwards the callback is never called again and user_data
 *  may be freed. Safe while runs are active, and while other threads send to the handle (their sends are handled
 *  or refused with AFM_BRIDGE_ERR_CLOSED). Afterwards the handle is invalid: every call with it returns
 *  AFM_BRIDGE_ERR_CLOSED (so does a second close, or one racing this close from another thread).
 *  Returns AFM_BRIDGE_OK, AFM_BRIDGE_ERR_INVALID_ARGUMENT (NULL), AFM_BRIDGE_ERR_CLOSED, or
 *  AFM_BRIDGE_ERR_WRONG_THREAD when the close would wait for the thread calling it: from this handle's own
 *  callback, or from another handle's callback while this handle's callback is (directly or through a chain of
 *  closes) closing that other handle. The handle then stays open: close it later from a host thread.
 *  [any-thread][not-callback: its own] Blocks the calling thread while runs end (a cancelled run ends within
 *  milliseconds; an MCP server gets up to 4 s to stop: stdin closed, then SIGTERM, then SIGKILL). */
afm_bridge_status afm_bridge_close(afm_bridge *bridge);

/** The library's version and protocol revision, e.g. "0.1.0 (protocol 2026-12-01)". Static, library-owned,
 *  valid until the library is unloaded. [any-thread] */
const char *afm_bridge_version(void);

#ifdef __cplusplus
}
#endif

#endif /* AFM_BRIDGE_H */
