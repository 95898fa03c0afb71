// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// Reads a whole (small) file as bytes, reporting failures with the call and `errno`.
///
/// Foundation's `String(contentsOfFile:)` and `FileManager.contents(atPath:)` either hide the cause (nil) or word it
/// through `localizedDescription`, which can drop it; configuration and prompt files need "`open`: No such file or
/// directory (errno 2)". Standard input is read with ``read(descriptor:)``.
public enum FileContents {
    /// The bytes of the file at `path` (following symlinks; a FIFO or `/dev/stdin` is read to its end).
    ///
    /// - Throws: `SystemCallError` for `open` (`ENOENT`, `EACCES`, …) or `read` (`EISDIR` for a directory).
    /// The corresponding C functions are `open`, `read` and `close`.
    public static func read(path: String) throws(SystemCallError) -> [UInt8] {
        let raw = try blockingSystemCall("open") { open(path, O_RDONLY | O_CLOEXEC) }
        let descriptor = FileDescriptor(rawValue: raw)
        defer { descriptor.close() }
        return try read(descriptor: descriptor)
    }

    /// Every byte from `descriptor` until end of file (a blocking descriptor; `EAGAIN` is an error).
    public static func read(descriptor: FileDescriptor) throws(SystemCallError) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let attempt: Result<IOResult<Int>, SystemCallError> = buffer.withUnsafeMutableBytes { chunk in
                do throws(SystemCallError) {
                    return .success(try descriptor.read(into: chunk))
                } catch {
                    return .failure(error)
                }
            }
            switch try attempt.get() {
            case .processed(0): return bytes
            case .processed(let count): bytes += buffer[0..<count]
            case .wouldBlock: throw SystemCallError(call: "read", errno: .wouldBlock)
            }
        }
    }
}
