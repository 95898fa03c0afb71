// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Splits a varlink byte stream into messages: each message is a JSON object followed by one NUL byte.
///
/// A value type fed with bytes as they arrive; no I/O, so it is tested without sockets.
public struct VarlinkFramer: Sendable {
    /// What ``next()`` found.
    public enum Frame: Sendable, Hashable {
        /// One complete message (without its NUL).
        case message([UInt8])
        /// More than ``limit`` bytes arrived without a NUL; the stream cannot be resynchronized.
        case tooLarge
    }

    /// The largest message accepted, in bytes (default 1 MiB).
    public let limit: Int
    private var buffer: [UInt8] = []
    private var scanned = 0

    /// Creates a framer.
    public init(limit: Int = 1 << 20) { self.limit = limit }

    /// Appends received bytes.
    public mutating func append(_ bytes: some Sequence<UInt8>) { buffer.append(contentsOf: bytes) }

    /// The next complete message, ``Frame/tooLarge``, or `nil` when more bytes are needed.
    public mutating func next() -> Frame? {
        if let end = buffer[scanned...].firstIndex(of: 0) {
            guard end <= limit else { return .tooLarge }
            let message = Array(buffer[..<end])
            buffer.removeSubrange(...end)
            scanned = 0
            return .message(message)
        }
        scanned = buffer.count
        return buffer.count > limit ? .tooLarge : nil
    }

    /// Bytes received that do not yet form a message.
    public var pendingByteCount: Int { buffer.count }

    /// Encodes `value` as one message (its JSON followed by NUL).
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var bytes = value.encoded()
        bytes.append(0)
        return bytes
    }
}
