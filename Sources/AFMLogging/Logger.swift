// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// A structured logger that writes one line per event to standard error.
///
/// Every line reads `TIMESTAMP LEVEL LABEL: MESSAGE key=value …`, so operators can `grep` and `journalctl`
/// can index it. One event is always one line: control characters in the message and the values (a newline that
/// would forge a second line, an ESC that would reach the operator's terminal) are escaped by ``TerminalSafeText``
/// (`\n`, `\x1b`), so text from upstreams and clients is inert. A `Logger` is a value: copy it, add metadata, and pass it down as a parameter; there is no
/// global logger. The output sink is shared and serialized, so lines from different threads never interleave.
public struct Logger: Sendable {
    /// How important an event is. Lines below the logger's level are dropped before formatting.
    public enum Level: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
        case debug = 0
        case info = 1
        case warning = 2
        case error = 3

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

        public var description: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }

        /// Parses `debug`, `info`, `warning` or `error` (case-insensitive).
        public init?(name: String) {
            guard let level = Level.allCases.first(where: { $0.description == name.lowercased() }) else {
                return nil
            }
            self = level
        }
    }

    /// The subsystem this logger speaks for, for example `afmd.http`.
    public var label: String
    /// The lowest level that is written.
    public var level: Level
    /// Key/value pairs appended to every line, in insertion order.
    public private(set) var metadata: [(key: String, value: String)]
    private let sink: LogSink

    /// Creates a logger writing to standard error.
    public init(label: String, level: Level = .info) {
        self.init(label: label, level: level, sink: .standardError)
    }

    /// Creates a logger writing to `sink`.
    public init(label: String, level: Level = .info, sink: LogSink) {
        self.label = label
        self.level = level
        self.metadata = []
        self.sink = sink
    }

    /// Returns a copy with a different label and the same level, metadata and sink.
    public func named(_ label: String) -> Logger {
        var copy = self
        copy.label = label
        return copy
    }

    /// Returns a copy that appends `key=value` to every line.
    public func with(_ key: String, _ value: String) -> Logger {
        var copy = self
        copy.metadata.append((key, value))
        return copy
    }

    /// Whether events of `level` are written: lets a hot path skip building a line's fields when they are not.
    public func logs(_ level: Level) -> Bool { level >= self.level }

    /// Writes one event when `level` is at or above the logger's level.
    public func log(
        _ level: Level,
        _ message: @autoclosure () -> String,
        _ extra: KeyValuePairs<String, String> = [:]
    ) {
        guard level >= self.level else { return }
        var line = Self.timestamp()
        line += " \(level) \(TerminalSafeText.neutralized(label)): \(TerminalSafeText.neutralized(message()))"
        for (key, value) in metadata { line += " \(TerminalSafeText.neutralized(key))=\(Self.quoted(value))" }
        for (key, value) in extra { line += " \(TerminalSafeText.neutralized(key))=\(Self.quoted(value))" }
        line += "\n"
        sink.write(line)
    }

    public func debug(_ message: @autoclosure () -> String, _ extra: KeyValuePairs<String, String> = [:]) {
        log(.debug, message(), extra)
    }

    public func info(_ message: @autoclosure () -> String, _ extra: KeyValuePairs<String, String> = [:]) {
        log(.info, message(), extra)
    }

    public func warning(_ message: @autoclosure () -> String, _ extra: KeyValuePairs<String, String> = [:]) {
        log(.warning, message(), extra)
    }

    public func error(_ message: @autoclosure () -> String, _ extra: KeyValuePairs<String, String> = [:]) {
        log(.error, message(), extra)
    }

    // Values with spaces, quotes or control characters are quoted so a line stays one line and splits
    // unambiguously; inside the quotes, `"` and `\` are escaped and control characters neutralized.
    private static func quoted(_ value: String) -> String {
        let needsQuotes =
            // Scalars, not Characters: " \u{301}" is one Character that is not " ", yet a parser splits at its space.
            value.isEmpty || value.unicodeScalars.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" })
            || TerminalSafeText.needsEscaping(value)
        guard needsQuotes else { return value }
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where TerminalSafeText.isControl(scalar): out += TerminalSafeText.neutralized(String(scalar))
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = time_t(now.tv_sec)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = Int(now.tv_nsec) / 1_000_000
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis
        )
    }
}

/// Where log lines go. Writes are serialized so concurrent lines never interleave.
public final class LogSink: Sendable {
    private let lock = Mutex<Void>(())
    private let fileDescriptor: Int32
    private let capture: CapturedLines?

    /// Standard error, the daemon's log stream.
    public static let standardError = LogSink(fileDescriptor: 2)

    /// A sink that writes to the given open file descriptor (not closed by the sink).
    public init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
        self.capture = nil
    }

    /// A sink that keeps lines in memory, for tests.
    public init(capturing: Void) {
        self.fileDescriptor = -1
        self.capture = CapturedLines()
    }

    /// The lines captured so far (only for a capturing sink).
    public var capturedLines: [String] { capture?.lines.withLock { $0 } ?? [] }

    func write(_ line: String) {
        if let capture {
            capture.lines.withLock { $0.append(line) }
            return
        }
        var bytes = Array(line.utf8)
        // Why the lock: one write(2) per line is atomic for pipes only up to PIPE_BUF; the lock keeps longer
        // lines whole too. No other work happens under it.
        lock.withLock { _ in
            bytes.withUnsafeMutableBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = Foundation.write(fileDescriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += written
                }
            }
        }
    }
}

private final class CapturedLines: Sendable {
    let lines = Mutex<[String]>([])
}
