// SPDX-License-Identifier: Apache-2.0

/// What the synchronous start of a request's handler did (``HTTPStartingHandler``).
public enum HTTPHandlerStart: Sendable {
    /// The response was sent: the request cycle ends now, and no task is created for it.
    case answered
    /// The rest of the handler runs as a task (it may wait: for a backend, for a slow client). A client disconnect
    /// or the processing deadline cancels that task.
    case continueAsync(@Sendable () async -> Void)
}

/// A request handler in two parts: a synchronous start, called on the thread that parsed the request (the event
/// loop's, for bodies up to 64 KiB), which answers at once what it can answer without waiting, and an optional
/// asynchronous rest.
///
/// Why: a request answered in its start costs no task (creation, executor bookkeeping, destruction), which was a
/// tenth of the daemon's CPU for a small answer (docs/PERFORMANCE.md). The start must not block or wait: it runs on
/// the loop thread that serves every other connection of its loop; anything that may wait goes into the rest.
public typealias HTTPStartingHandler = @Sendable (HTTPRequest, HTTPResponseWriter) -> HTTPHandlerStart
