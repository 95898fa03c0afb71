// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

extension FileDescriptor {
    /// Creates a connected pair of close-on-exec Unix stream sockets (blocking), for example the channel between
    /// `afmd` and a backend runner.
    ///
    /// Both ends are close-on-exec: a child receives one only through an explicit `dup2` in its spawn actions
    /// (``ChildProcess/spawn(path:arguments:environment:channel:)``). The corresponding C function is `socketpair`.
    public static func makeSocketPair() throws(SystemCallError) -> (FileDescriptor, FileDescriptor) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        _ = try fds.withUnsafeMutableBufferPointer { (buffer) throws(SystemCallError) -> Int32 in
            try blockingSystemCall("socketpair") { socketpair(AF_UNIX, type, 0, buffer.baseAddress) }
        }
        return (FileDescriptor(rawValue: fds[0]), FileDescriptor(rawValue: fds[1]))
    }

    /// Reads exactly `count` bytes into `buffer` on a blocking descriptor. Returns false at end of file before the
    /// first byte; a short stream after that is `ECONNRESET`.
    ///
    /// - Throws: `SystemCallError` for the read. The corresponding C function is `read`.
    public func readExactly(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Bool {
        var offset = 0
        while offset < buffer.count {
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[offset...])
            switch try read(into: slice) {
            case .processed(0):
                if offset == 0 { return false }
                throw SystemCallError(call: "read", errno: Errno(rawValue: ECONNRESET))
            case .processed(let count): offset += count
            case .wouldBlock: throw SystemCallError(call: "read", errno: .wouldBlock)
            }
        }
        return true
    }
}
