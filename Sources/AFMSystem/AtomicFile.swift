// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc
import Synchronization

/// Crash-safe replacement of a small file: readers (and a reboot) see either the old or the new contents,
/// never a mixture or a truncated file.
///
/// ```
/// write  DIR/.NAME.tmp-PID-N   (O_EXCL, mode)   → fsync(temp)
/// rename temp → DIR/NAME       (atomic on one file system)
/// fsync(DIR)                   (makes the rename itself durable)
/// ```
public enum AtomicFile {
    /// Replaces the file at `path` with `bytes`.
    ///
    /// The temporary file lives in the same directory (so `rename` is atomic) and is removed when a step fails.
    /// - Throws: `SystemCallError` naming the failing call.
    /// The corresponding C functions are `open`, `write`, `fsync`, `rename` and `close`.
    public static func write(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o644) throws(SystemCallError) {
        let directory = parentDirectory(of: path)
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let temporary = directory + "/." + name + ".tmp-\(getpid())-\(counter.add())"
        let raw = try blockingSystemCall("open") {
            open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(mode))
        }
        let fd = FileDescriptor(rawValue: raw)
        do throws(SystemCallError) {
            var offset = 0
            while offset < bytes.count {
                let attempt: Result<Int, SystemCallError> = bytes.withUnsafeBytes { buffer in
                    do throws(SystemCallError) {
                        return .success(
                            try blockingSystemCall("write") {
                                // The force unwrap is safe: the buffer is non-empty (offset < count).
                                Glibc.write(raw, buffer.baseAddress! + offset, buffer.count - offset)
                            })
                    } catch {
                        return .failure(error)
                    }
                }
                offset += try attempt.get()
            }
            _ = try blockingSystemCall("fsync") { fsync(raw) }
            fd.close()
        } catch {
            fd.close()
            unlink(temporary)
            throw error
        }
        do throws(SystemCallError) {
            _ = try blockingSystemCall("rename") { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw error
        }
        try syncDirectory(directory)
    }

    /// Flushes a directory's entries to disk (after a rename or create). The corresponding C function is `fsync`.
    public static func syncDirectory(_ directory: String) throws(SystemCallError) {
        let raw = try blockingSystemCall("open") { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { Glibc.close(raw) }
        _ = try blockingSystemCall("fsync") { fsync(raw) }
    }

    /// Creates `path` and its missing parents with `mode`; an existing directory is fine.
    /// The corresponding C function is `mkdir`.
    public static func makeDirectories(_ path: String, mode: UInt32 = 0o755) throws(SystemCallError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, mode_t(mode)) != 0 && errno != EEXIST {
                throw SystemCallError(call: "mkdir", errno: .current)
            }
        }
    }

    private static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static let counter = TemporaryCounter()
}

private final class TemporaryCounter: Sendable {
    private let value = Atomic<Int>(0)
    func add() -> Int { value.add(1, ordering: .relaxed).newValue }
}
