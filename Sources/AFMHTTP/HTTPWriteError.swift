// SPDX-License-Identifier: Apache-2.0

/// Errors from ``HTTPResponseWriter``.
public enum HTTPWriteError: Error, Sendable, Equatable {
    /// The client disconnected, or the server closed the connection (shutdown, deadline, send failure).
    case connectionClosed
    /// The call does not fit the response's state, for example `write` before `startStream`, or a second
    /// `respond`; or the head is invalid (a header value containing CR or LF).
    case invalidState(String)
}
