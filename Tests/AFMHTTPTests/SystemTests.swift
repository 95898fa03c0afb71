// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Synchronization
import Testing

@Suite struct SystemTests {
    @Test func systemCallErrorNamesCallAndErrno() {
        let error = SystemCallError(call: "epoll_ctl", errno: .badFileDescriptor)
        #expect("\(error)" == "`epoll_ctl`: Bad file descriptor (errno 9)")
        #expect(Errno.addressInUse.description == "Address already in use")
    }

    @Test func parsesAddresses() throws {
        #expect(SocketAddress(host: "127.0.0.1", port: 80)?.description == "127.0.0.1:80")
        #expect(SocketAddress(host: "localhost", port: 1)?.description == "127.0.0.1:1")
        #expect(SocketAddress(host: "::1", port: 8080)?.description == "[::1]:8080")
        #expect(SocketAddress(host: "[fe80::1]", port: 0)?.host == "fe80::1")
        #expect(SocketAddress(host: "example.com", port: 80) == nil)
        #expect(SocketAddress(host: "127.0.0.1", port: 70000) == nil)
    }

    @Test func listenerAcceptAndNonBlockingIO() throws {
        let listener = try FileDescriptor.makeTCPListener(address: #require(SocketAddress(host: "127.0.0.1", port: 0)))
        defer { listener.close() }
        #expect(try listener.isCloseOnExec())
        let port = try listener.localAddress().port
        #expect(port > 0)
        #expect(try listener.accept() == .wouldBlock)

        let client = try FileDescriptor.connectTCP(to: #require(SocketAddress(host: "127.0.0.1", port: port)))
        defer { client.close() }
        #expect(try listener.poll(readable: true, writable: false, timeoutMilliseconds: 5000).readable)
        guard case .processed(let accepted) = try listener.accept() else {
            Issue.record("no connection to accept")
            return
        }
        defer { accepted.descriptor.close() }
        #expect(try accepted.descriptor.isCloseOnExec())
        #expect(accepted.peer?.port == (try client.localAddress().port))
        try accepted.descriptor.setNoDelay(true)
        #expect(try accepted.descriptor.isNoDelay())

        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(try buffer.withUnsafeMutableBytes { try accepted.descriptor.read(into: $0) } == .wouldBlock)
        let parts: [[UInt8]] = [Array("ab".utf8), Array("cd".utf8)]
        let written = try parts[0].withUnsafeBytes { first in
            try parts[1].withUnsafeBytes { second in try client.writev([first, second]) }
        }
        #expect(written == .processed(4))
        #expect(try accepted.descriptor.poll(readable: true, writable: false, timeoutMilliseconds: 5000).readable)
        #expect(try buffer.withUnsafeMutableBytes { try accepted.descriptor.read(into: $0) } == .processed(4))
        #expect(Array(buffer[0..<4]) == Array("abcd".utf8))
    }

    @Test func epollReportsReadinessWithUserData() throws {
        let epoll = try Epoll()
        #expect(try epoll.descriptor.isCloseOnExec())
        let event = try EventFD()
        try epoll.add(event.descriptor, events: [.readable, .edgeTriggered], userData: 0xDEAD_BEEF_0000_0001)
        var buffer = EpollEventBuffer(capacity: 4)
        #expect(try epoll.wait(into: &buffer, timeoutMilliseconds: 0) == 0)
        event.signal()
        event.signal()
        #expect(try epoll.wait(into: &buffer, timeoutMilliseconds: 5000) == 1)
        #expect(buffer.userData(at: 0) == 0xDEAD_BEEF_0000_0001)
        #expect(buffer.events(at: 0).contains(.readable))
        event.drain()
        #expect(try epoll.wait(into: &buffer, timeoutMilliseconds: 0) == 0)
        try epoll.remove(event.descriptor)
        event.signal()
        #expect(try epoll.wait(into: &buffer, timeoutMilliseconds: 0) == 0)
    }

    @Test func ioThreadRunsAndJoins() throws {
        let box = ThreadBox()
        let thread = try IOThread.spawn(name: "afm-test") { box.set() }
        thread.join()
        #expect(box.isSet)
        #expect(!thread.isCurrent)
    }
}

private final class ThreadBox: Sendable {
    private let flag = Mutex(false)
    func set() { flag.withLock { $0 = true } }
    var isSet: Bool { flag.withLock { $0 } }
}
