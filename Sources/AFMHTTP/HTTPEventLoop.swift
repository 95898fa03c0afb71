// SPDX-License-Identifier: Apache-2.0

import AFMSystem
import Synchronization

/// One epoll thread: accepts (loop 0), reads and parses requests, starts handler tasks, flushes output on
/// `EPOLLOUT`, and enforces timeouts with a ~100 ms sweep.
///
/// The thread-safe face of the loop is this class (command queue + `eventfd` wakeup); the work happens in
/// an ``HTTPEventLoopRunner`` that lives only on the loop's thread, so the per-connection input state
/// (parser, buffers, timers) needs no locking at all.
final class HTTPEventLoop: Sendable {
    /// Messages from other threads, handled on the loop thread.
    enum Command: Sendable {
        /// Register an accepted connection with this loop.
        case adopt(HTTPConnection)
        /// Register an accepted connection over `maxConnections` only to answer it 503 and close it.
        case refuse(HTTPConnection)
        /// The connection's handler finished and the loop has work (held input, or a close to finish).
        case wake(UInt64)
        /// Graceful shutdown began: close idle keep-alive connections.
        case drain
        /// Stop watching the listener and close this process's descriptor of it, without `shutdown` (an adopted
        /// socket is shared with systemd, which keeps queueing connections for the next start).
        case closeListener
        /// Tear down every connection, close the listener and end the thread.
        case stop
    }

    let index: Int
    let epoll: Epoll
    let wakeup: EventFD
    private let commands = Mutex<[Command]>([])

    /// epoll user data for the two non-connection descriptors (connection ids count up from 1).
    static let listenerToken = UInt64.max
    static let wakeupToken = UInt64.max - 1

    init(index: Int) throws(SystemCallError) {
        self.index = index
        epoll = try Epoll()
        wakeup = try EventFD()
        try epoll.add(wakeup.descriptor, events: [.readable], userData: Self.wakeupToken)
    }

    /// Queues a command and wakes the loop (one `eventfd` write per batch).
    func post(_ command: Command) {
        let first = commands.withLock { queue -> Bool in
            queue.append(command)
            return queue.count == 1
        }
        if first { wakeup.signal() }
    }

    /// Takes every queued command (loop thread only).
    func takeCommands() -> [Command] {
        commands.withLock { queue in
            let taken = queue
            queue = []
            return taken
        }
    }

    /// Starts the loop's thread. `listener` is accepted on by this loop (only loop 0 gets one).
    func start(core: HTTPServerCore, listener: FileDescriptor?) throws(SystemCallError) {
        if let listener {
            try epoll.add(listener, events: [.readable], userData: Self.listenerToken)
        }
        let thread = try IOThread.spawn(name: "afm-http-\(index)") { [self] in
            let runner = HTTPEventLoopRunner(loop: self, core: core, listener: listener)
            runner.run()
        }
        thread.detach()
    }
}
