// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// Waits for any of several descriptors to become readable (a terminal client's keyboard and socket).
public enum PollSet {
    /// Blocks up to `timeoutMilliseconds` (-1: forever) and returns the descriptors that are readable or hung up.
    ///
    /// Blocks the calling thread; meant for clients, never for the server's event loops.
    /// The corresponding C function is `poll`.
    public static func waitReadable(_ descriptors: [FileDescriptor], timeoutMilliseconds: Int32) throws(SystemCallError)
        -> [FileDescriptor]
    {
        var entries = descriptors.map { pollfd(fd: $0.rawValue, events: Int16(POLLIN), revents: 0) }
        let count = try entries.withUnsafeMutableBufferPointer { (buffer) throws(SystemCallError) -> Int32 in
            try blockingSystemCall("poll") { Glibc.poll(buffer.baseAddress, nfds_t(buffer.count), timeoutMilliseconds) }
        }
        guard count > 0 else { return [] }
        return entries.filter { Int32($0.revents) & (POLLIN | POLLHUP | POLLERR) != 0 }
            .map { FileDescriptor(rawValue: $0.fd) }
    }
}
