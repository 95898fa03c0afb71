// SPDX-License-Identifier: Apache-2.0

import AFMSystem
import Dispatch

/// Sends the response to one request. Handed to the handler; every method is safe to call from any task.
///
/// Use either ``respond(_:body:)`` once, or ``startStream(_:)``, any number of ``write(_:)`` and then
/// ``finishStream()``. The writer is valid until the handler returns; after that every call throws
/// `.invalidState`. When the client disconnects, the handler's task is cancelled and calls throw
/// `.connectionClosed`. When the processing deadline passes, the task is cancelled too: before a response started
/// the server answers 504 itself; after a stream started, ``processingDeadlinePassed`` is true and the stream may
/// still be ended for a short grace period.
///
/// Bytes are written to the socket directly from the calling task when it can take them (no hop to the
/// event loop); the rest is queued and flushed by the loop when the socket drains.
public final class HTTPResponseWriter: Sendable {
    let connection: HTTPConnection
    let sequence: UInt64
    let version: HTTPVersion
    let isHead: Bool

    init(connection: HTTPConnection, sequence: UInt64, version: HTTPVersion, isHead: Bool) {
        self.connection = connection
        self.sequence = sequence
        self.version = version
        self.isHead = isHead
    }

    /// Sends a complete response.
    ///
    /// The server adds `Content-Length`, `Date`, `Server` (unless configured off) and `Connection` as needed;
    /// for HEAD requests the body is not sent, and 204/304 responses carry neither body nor length.
    /// - Throws: `.connectionClosed` when the client is gone; `.invalidState` when a response was already
    ///   started or the head is invalid.
    public func respond(_ head: HTTPResponseHead, body: [UInt8]) async throws(HTTPWriteError) {
        try respondNow(head, body: body)
    }

    /// ``respond(_:body:)`` for the synchronous start of a handler (``HTTPStartingHandler``): the same checks and
    /// the same bytes, without a suspension point.
    public func respondNow(_ head: HTTPResponseHead, body: [UInt8]) throws(HTTPWriteError) {
        try connection.respond(sequence: sequence, version: version, isHead: isHead, head: head, body: body)
    }

    /// Starts a streamed response: `Transfer-Encoding: chunked` for HTTP/1.1, a close-delimited body for
    /// HTTP/1.0 (the connection then closes after the stream).
    public func startStream(_ head: HTTPResponseHead) async throws(HTTPWriteError) {
        try connection.startStream(sequence: sequence, version: version, isHead: isHead, head: head)
    }

    /// Writes one piece of a streamed body (as one chunk). Empty pieces are ignored.
    ///
    /// Suspends while the connection's unsent output is above the configured high watermark and resumes when
    /// it drains below the low watermark, so a slow reader never makes the server buffer without bound.
    /// - Throws: `.connectionClosed` when the peer is gone, the connection was closed, or the task was
    ///   cancelled while waiting; `.invalidState` without a started stream.
    public func write(_ bytes: [UInt8]) async throws(HTTPWriteError) {
        if try connection.writeStreamPiece(sequence: sequence, bytes) {
            guard await connection.waitForDrain() else { throw .connectionClosed }
        }
    }

    /// Ends a streamed body (sends the last chunk).
    public func finishStream() async throws(HTTPWriteError) {
        try connection.finishStream(sequence: sequence)
    }

    /// Continues the handler on a pool thread. Call it before anything that may block.
    ///
    /// Handlers of small requests start on the event loop's thread, which serves every connection of its loop: a
    /// handler that waits there (a synchronous call to another process, a long computation) holds all of them up.
    public func leaveEventLoop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Resumed with the permission, the handler continues on this pool thread rather than hopping again.
            DispatchQueue.global().async { InlineResumption.with(permitted: true) { continuation.resume() } }
        }
    }

    /// Whether nothing more can be sent: the client disconnected, the connection was closed, the server took
    /// over the response (processing deadline), or the handler already returned.
    public var isClosed: Bool { connection.isClosed(sequence: sequence) }

    /// Whether the server's processing deadline (``HTTPServer/Configuration/processingDeadline``) cancelled this
    /// handler after its stream had started, rather than the client leaving. The stream stays writable for
    /// ``HTTPServer/Configuration/processingDeadlineGrace``: the handler should end it with its protocol's error
    /// event and ``finishStream()`` (the connection closes afterwards).
    public var processingDeadlinePassed: Bool { connection.isProcessingDeadlinePassed(sequence: sequence) }

    /// Bytes this connection has queued in user space that the kernel has not accepted yet.
    public var bufferedByteCount: Int { connection.queuedByteCount }

    /// The largest ``bufferedByteCount`` this connection has had, for diagnostics and backpressure tests.
    public var peakBufferedByteCount: Int { connection.peakQueuedByteCount }
}
