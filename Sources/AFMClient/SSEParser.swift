// SPDX-License-Identifier: Apache-2.0

/// Splits a Server-Sent Events byte stream into (event, data) messages (WHATWG EventSource rules, minus retry/id).
public struct SSEParser: Sendable {
    /// One dispatched message.
    public struct Message: Sendable, Hashable {
        public var event: String
        public var data: String

        public init(event: String, data: String) {
            self.event = event
            self.data = data
        }
    }

    private var line: [UInt8] = []
    private var event = ""
    private var data: [String] = []
    private var hasData = false
    private var lastWasCR = false

    public init() {}

    /// Feeds bytes and returns the messages they completed.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [Message] {
        var messages: [Message] = []
        for byte in bytes {
            if byte == 0x0A, lastWasCR {
                lastWasCR = false
                continue
            }
            lastWasCR = byte == 0x0D
            if byte == 0x0A || byte == 0x0D {
                if let message = endLine() { messages.append(message) }
            } else {
                line.append(byte)
            }
        }
        return messages
    }

    private mutating func endLine() -> Message? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer {
                event = ""
                data = []
                hasData = false
            }
            guard hasData else { return nil }
            return Message(event: event.isEmpty ? "message" : event, data: data.joined(separator: "\n"))
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        var field = text
        var value = ""
        if let colon = text.firstIndex(of: ":") {
            field = String(text[..<colon])
            value = String(text[text.index(after: colon)...])
            if value.hasPrefix(" ") { value.removeFirst() }
        }
        switch field {
        case "event": event = value
        case "data":
            data.append(value)
            hasData = true
        default: break
        }
        return nil
    }
}
