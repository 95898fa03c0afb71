// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// A streaming `POST /v1/responses` read on its own thread, as an `AsyncSequence` of ``StreamEvent``s.
///
/// ```
/// events(body:) ─► thread: connect, send ─► poll(socket, wake) ─► readEvents() ─► yield … terminal ─► finish
///                  iteration dropped / task cancelled ─► wake ─► close the socket (afmd cancels the generation)
/// ```
///
/// The socket is polled on a dedicated thread (``IOThread``), never on the cooperative pool. The sequence always
/// ends with exactly one terminal event (`completed`, `incomplete` or `failed`) unless the consumer stops first;
/// a connection that cannot be made is `failed(code: "connection", …)`.
public struct ResponseEvents: AsyncSequence, Sendable {
    public typealias Element = StreamEvent

    private let stream: AsyncStream<StreamEvent>

    init(client: ResponsesClient, body: [UInt8]) {
        let (stream, continuation) = AsyncStream<StreamEvent>.makeStream()
        self.stream = stream
        let wake: EventFD
        do {
            wake = try EventFD()
        } catch {
            continuation.yield(.failed(code: "connection", message: "cannot make an eventfd: \(error)"))
            continuation.finish()
            return
        }
        continuation.onTermination = { _ in wake.signal() }
        do {
            try IOThread.spawn(name: "afm-response") {
                Self.pump(client: client, body: body, wake: wake, into: continuation)
            }.detach()
        } catch {
            continuation.yield(.failed(code: "connection", message: "cannot start a thread: \(error)"))
            continuation.finish()
        }
    }

    public func makeAsyncIterator() -> AsyncStream<StreamEvent>.Iterator {
        stream.makeAsyncIterator()
    }

    /// The thread's loop: until a terminal event, or until the consumer went away (the wake descriptor).
    private static func pump(
        client: ResponsesClient, body: [UInt8], wake: EventFD, into continuation: AsyncStream<StreamEvent>.Continuation
    ) {
        defer { continuation.finish() }
        let response: ResponseStream
        do {
            response = try client.startStream(body: body)
        } catch {
            continuation.yield(.failed(code: "connection", message: "\(error)"))
            return
        }
        while !response.isFinished {
            let ready: [FileDescriptor]
            do {
                ready = try PollSet.waitReadable([response.descriptor, wake.descriptor], timeoutMilliseconds: -1)
            } catch {
                response.cancel()
                continuation.yield(.failed(code: "connection", message: "poll failed: \(error)"))
                return
            }
            if ready.contains(wake.descriptor) {
                response.cancel()
                return
            }
            for event in response.readEvents() { continuation.yield(event) }
        }
    }
}
