// SPDX-License-Identifier: Apache-2.0

extension HTTPServer {
    /// Limits, timeouts and threading of an ``HTTPServer``. Every field has a production default.
    ///
    /// Memory per connection is bounded by these limits: a connection still sending its request holds at most
    /// `maxHeaderBytes` + 64 KiB of input (one read) plus about 1 KiB of bookkeeping, a body being received at most
    /// `maxBodyBytes` (reserved as bytes arrive, never on a declared length alone), pipelined input held while a
    /// handler runs at most 128 KiB, and queued output at most `outboundHighWatermark` plus the one write that
    /// crossed it (streaming writers wait). An idle keep-alive connection keeps at most a 64 KiB input buffer.
    /// So `maxConnections` connections that trickle headers cost at most `maxConnections × (maxHeaderBytes +
    /// 65 KiB)`: 129 MiB with the defaults.
    public struct Configuration: Sendable {
        /// The largest request line plus header block, in bytes. Larger → 431 and close. Default: 64 KiB.
        public var maxHeaderBytes = 64 * 1024
        /// The most header field lines in a request (and trailer field lines in a chunked body). More → 431 and
        /// close. HAProxy allows 101 by default; every browser and SDK sends fewer than 30. Default: 100.
        public var maxHeaderFields = 100
        /// The most connections open at once. A connection beyond it is accepted only to be answered 503 `busy`
        /// (with `Retry-After: 1`) and closed; while `refusalHeadroom` refused ones are still closing, the server
        /// stops accepting for 100 ms at a time and leaves new ones in the kernel's backlog, so descriptors
        /// stay bounded (at most `maxConnections + refusalHeadroom` sockets) instead of running out. Default: 1024.
        public var maxConnections = 1024
        /// Refused connections that may be closing at once over `maxConnections` (see there). Default: 64.
        public var refusalHeadroom = 64
        /// The largest request body, in bytes. A larger `Content-Length` → 413 before reading the body; a
        /// chunked body → 413 as soon as its declared chunk sizes cross the limit. Default: 16 MiB.
        public var maxBodyBytes = 16 * 1024 * 1024
        /// How long a connection may take to deliver a complete request (head and body), counted from its
        /// first byte, or from accept / the end of the previous response while nothing arrived.
        ///
        /// On expiry: 408 with an error body, then close — except for an idle keep-alive connection that has
        /// already served a request and has no partial request, which is closed silently (a 408 there could
        /// race with a request the client is just sending). Default: 30 s.
        public var requestHeaderTimeout: Duration = .seconds(30)
        /// How long a handler may run. On expiry its task is cancelled; if it had not started a response the
        /// server answers 504 (`timeout`). A handler whose streamed response had started may still write for
        /// `processingDeadlineGrace` (its protocol's final error event: ``HTTPResponseWriter/processingDeadlinePassed``
        /// tells it why it was cancelled) and end the stream; the connection then closes. Default: 300 s.
        public var processingDeadline: Duration = .seconds(300)
        /// After the processing deadline cancelled a handler whose stream had started, how long it may still write
        /// and end the stream before the connection is closed under it (a cut stream then lacks its last chunk, so
        /// the client can tell). Zero closes the connection at the deadline. Default: 2 s.
        public var processingDeadlineGrace: Duration = .seconds(2)
        /// Streaming `write` suspends while more than this many bytes are queued, and a connection's next
        /// (pipelined) request is neither parsed nor read while more than this many bytes of earlier answers are
        /// queued. Default: 256 KiB.
        public var outboundHighWatermark = 256 * 1024
        /// …and both resume once fewer than this many are queued. Default: 64 KiB.
        public var outboundLowWatermark = 64 * 1024
        /// Epoll threads. Connections are spread round-robin; one is plenty for a loopback gateway.
        /// Default: 1.
        public var ioThreadCount = 1
        /// The `Server` field value, or `nil` to send none. Default: `afmd`.
        public var serverName: String? = "afmd"
        /// A connection with queued output that makes no progress for this long is closed (a client that
        /// stopped reading). Default: 60 s.
        public var sendTimeout: Duration = .seconds(60)
        /// After the last response on a closing connection, how long to keep reading and discarding input
        /// before closing, so unread request bytes do not turn the close into a reset that destroys the
        /// response in flight. Ends earlier when the client closes. Default: 2 s.
        public var lingerTimeout: Duration = .seconds(2)

        /// Renders the body of an error the server answers itself (413, 431, 400, 408, 504) for the path of the
        /// request it answers (nil when no request head was read), or returns nil for the default
        /// ``HTTPErrorBody`` envelope. The server knows no API dialects: the daemon injects this to answer in each
        /// endpoint's envelope (Anthropic's under `/v1/messages`). A 503 for a connection over the limit is sent
        /// before any request is read and always uses the default. Default: nil.
        public var errorBody: (@Sendable (_ path: String?, _ status: Int, _ code: String, _ message: String) -> [UInt8]?)?

        /// The defaults.
        public init() {}
    }
}
