// SPDX-License-Identifier: Apache-2.0

/// An incremental parser of a `text/event-stream` body (the WHATWG server-sent events format).
///
/// Bytes go in as they arrive from the network, in pieces of any size; complete events come out. An event is the
/// `event:` name (or "message") and its `data:` lines joined with "\n". Comments (`:` lines), `id:` and `retry:`
/// are ignored. Lines end with LF, CRLF or CR.
struct SSEParser: Sendable {
    /// One event.
    struct Event: Sendable, Hashable {
        var name: String
        var data: String
    }

    /// The most bytes one line may hold before the stream is treated as broken (a guard against a runaway upstream).
    static let maximumLineBytes = 16 << 20

    private var line: [UInt8] = []
    private var name = ""
    private var data: [String] = []
    private var hasData = false
    private var lastWasCR = false
    /// Set when a line exceeded `maximumLineBytes`.
    private(set) var overflowed = false

    init() {}

    /// Feeds bytes; returns the events they completed.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Event] {
        var events: [Event] = []
        for byte in bytes {
            if lastWasCR {
                lastWasCR = false
                if byte == 0x0A { continue }
            }
            if byte == 0x0A || byte == 0x0D {
                lastWasCR = byte == 0x0D
                if let event = endLine() { events.append(event) }
            } else {
                guard line.count < Self.maximumLineBytes else {
                    overflowed = true
                    continue
                }
                line.append(byte)
            }
        }
        return events
    }

    /// Processes a complete line; returns an event when the line was blank and data was pending.
    private mutating func endLine() -> Event? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer {
                name = ""
                data = []
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
            data.append(String(value))
            hasData = true
        default: break
        }
        return nil
    }
}
