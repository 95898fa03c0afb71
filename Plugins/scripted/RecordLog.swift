// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The JSONL file the scripted backend appends a record to for everything the host does to it.
///
/// Each record is one line, `{"event":…,"request_id":…,"time_unix_ns":…,…}`, appended with a single `write(2)` on
/// an `O_APPEND` descriptor while holding the log's lock, so lines never interleave and their order in the file is
/// the order of their timestamps. Tests read the file to assert exactly what the host sent and when.
///
/// - Important: The lock is held across the `write(2)` on purpose (unlike the usual "no I/O under a lock" rule):
///   taking the timestamp and writing under one lock is what keeps the file ordered by time.
final class RecordLog: Sendable {
    /// A field of a record: its key and its value, already JSON-encoded.
    typealias Field = (key: String, json: String)

    /// The open descriptor, or -1 when there is no record file or it was closed.
    private let descriptor: Mutex<Int32>
    /// Whether a record file was opened: fixed at creation, so the request path checks it without the lock.
    private let hasFile: Bool

    /// A log that records nothing.
    init() {
        descriptor = Mutex(-1)
        hasFile = false
    }

    /// Opens (creating if needed) the record file for appending.
    ///
    /// - Throws: `AFM_ERR_INVALID_REQUEST` naming the path and the system error when it cannot be opened.
    init(path: String) throws(BackendError) {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw .invalidRequest("RecordFile \(path): cannot open for appending (\(String(cString: strerror(errno))))")
        }
        descriptor = Mutex(fd)
        hasFile = true
    }

    /// False when there is no record file (callers skip building expensive fields), or once it was closed.
    var isEnabled: Bool { hasFile && descriptor.withLock { $0 >= 0 } }

    /// Appends one record: `event`, then `request_id` if given, then `time_unix_ns`, then `fields`.
    func append(_ event: String, requestID: UInt64? = nil, _ fields: @autoclosure () -> [Field] = []) {
        // Most instances record nothing (benchmarks, `make run`): skip building the line and its fields.
        guard isEnabled else { return }
        let fields = fields()
        // Everything but the timestamp is built outside the lock.
        var head = "{\"event\":" + JSON.quote(event)
        if let requestID { head += ",\"request_id\":\(requestID)" }
        var tail = ""
        for field in fields { tail += "," + JSON.quote(field.key) + ":" + field.json }
        tail += "}\n"
        descriptor.withLock { fd in
            guard fd >= 0 else { return }
            var line = head + ",\"time_unix_ns\":\(Self.nowUnixNanoseconds())" + tail
            line.withUTF8 { bytes in
                var offset = 0
                // One write(2) for the whole line; the loop only runs again after EINTR or a short write.
                while offset < bytes.count, let base = bytes.baseAddress {
                    let written = write(fd, base + offset, bytes.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += written
                }
            }
        }
    }

    /// Closes the file; later appends are dropped.
    func close() {
        descriptor.withLock { fd in
            if fd >= 0 { _ = Self.systemClose(fd) }
            fd = -1
        }
    }

    deinit {
        close()
    }

    /// `close(2)`, which the method `close()` shadows inside this type.
    private static let systemClose: @Sendable (Int32) -> Int32 = { Glibc.close($0) }

    /// Nanoseconds since the Unix epoch from `CLOCK_REALTIME`.
    static func nowUnixNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}
