// SPDX-License-Identifier: Apache-2.0

/// An incremental parser of a `text/event-stream` body (the WHATWG server-sent events format).
///
/// Bytes go in as they arrive from the network, in pieces of any size; complete events come out. An event is the
/// `event:` name (or "message") and its `data:` lines joined with "\n". Comments (`:` lines), `id:` and `retry:`
/// are ignored. Lines end with LF, CRLF or CR.
///
/// Three caps guard against a runaway upstream (one that streams forever, or never ends a line or an event):
/// a line of more than `maximumLineBytes`, an event whose data exceeds `maximumEventBytes`, and a body of more than
/// `maximumTotalBytes` (`MaxStreamBytes`) each set `overflow`; from then on `feed` takes nothing more, and the
/// caller ends the transfer. Memory stays bounded by the caps whatever the upstream sends.
struct SSEParser: Sendable {
    /// One event.
    struct Event: Sendable, Hashable {
        var name: String
        var data: String
    }

    /// Which cap a stream exceeded.
    enum Overflow: Sendable, Hashable, CustomStringConvertible {
        /// One line longer than `maximumLineBytes`.
        case line(limit: Int)
        /// One event whose `data:` lines add up to more than `maximumEventBytes`.
        case event(limit: Int)
        /// More than `maximumTotalBytes` in the whole body (`MaxStreamBytes`).
        case total(limit: Int)

        var description: String {
            switch self {
            case .line(let limit): "the upstream sent a line longer than \(limit) bytes"
            case .event(let limit): "the upstream sent an event larger than \(limit) bytes"
            case .total(let limit): "the upstream sent more than \(limit) bytes in one stream (MaxStreamBytes)"
            }
        }
    }

    /// The most bytes one line may hold before the stream is treated as broken.
    static let maximumLineBytes = 16 << 20
    /// The most bytes of data one event may hold before the stream is treated as broken.
    static let maximumEventBytes = 16 << 20
    /// `MaxStreamBytes`'s default: far above any answer within a model's output budget (even the Responses
    /// protocol, which repeats the whole output in its closing events, sends a few hundred bytes per token).
    static let defaultMaximumTotalBytes = 64 << 20

    /// The most bytes the whole body may hold.
    let maximumTotalBytes: Int
    private var line: [UInt8] = []
    private var name = ""
    private var data: [String] = []
    private var eventBytes = 0
    private var hasData = false
    private var lastWasCR = false
    private var received = 0
    /// Set once a cap was exceeded; `feed` then returns nothing.
    private(set) var overflow: Overflow?

    init(maximumTotalBytes: Int = Self.defaultMaximumTotalBytes) {
        self.maximumTotalBytes = maximumTotalBytes
    }

    /// Feeds bytes; returns the events they completed (none once `overflow` is set).
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Event] {
        guard overflow == nil else { return [] }
        received += bytes.count
        guard received <= maximumTotalBytes else {
            overflow = .total(limit: maximumTotalBytes)
            return []
        }
        var events: [Event] = []
        for byte in bytes {
            if lastWasCR {
                lastWasCR = false
                if byte == 0x0A { continue }
            }
            if byte == 0x0A || byte == 0x0D {
                lastWasCR = byte == 0x0D
                if let event = endLine() { events.append(event) }
                if overflow != nil { return events }
            } else {
                guard line.count < Self.maximumLineBytes else {
                    overflow = .line(limit: Self.maximumLineBytes)
                    return events
                }
                line.append(byte)
            }
        }
        return events
    }

    /// Processes a complete line; returns an event when the line was blank and data was pending.
    private mutating func endLine() -> Event? {
        defer { line.removeAll(keepingCapacity: line.count <= 65536) }
        if line.isEmpty {
            defer {
                name = ""
                data = []
                eventBytes = 0
                hasData = false
            }
            guard hasData else { return nil }
            return Event(name: name.isEmpty ? "message" : name, data: data.joined(separator: "\n"))
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = Substring(text)
            value = ""
        }
        switch field {
        case "event": name = String(value)
        case "data":
            eventBytes += value.utf8.count + 1
            guard eventBytes <= Self.maximumEventBytes else {
                overflow = .event(limit: Self.maximumEventBytes)
                data = []
                return nil
            }
            data.append(String(value))
            hasData = true
        default: break
        }
        return nil
    }
}
