// SPDX-License-Identifier: Apache-2.0

/// Handles one request. It runs in its own task, which the server cancels when the client disconnects, the
/// processing deadline passes, or the server stops.
public typealias HTTPHandler = @Sendable (HTTPRequest, HTTPResponseWriter) async -> Void
