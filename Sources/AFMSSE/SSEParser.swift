// SPDX-License-Identifier: Apache-2.0

/// An incremental parser of a `text/event-stream` body (the WHATWG server-sent events format), with caps.
///
/// The one SSE reader of the package: the private-cloud backend reads its upstream's streams with it, and
/// AFMClient (`afm chat`, `afm agent`, the bridge) afmd's. Both read bytes from a server they do not control.
///
/// Bytes go in as they arrive from the network, in pieces of any size; complete events come out. An event is the
/// `event:` name (or "message") and its `data:` lines joined with "\n", as bytes (never decoded here: callers hand
/// them to the JSON parser as they are). Comments (`:` lines), `id:` and `retry:` are ignored. Lines end with LF,
/// CRLF or CR.
///
/// Three caps guard against a runaway or hostile server (one that streams forever, or never ends a line or an
/// event): a line of more than `maximumLineBytes`, an event whose data exceeds `maximumEventBytes` and a body of
/// more than `maximumTotalBytes` each set `overflow`; from then on `feed` takes nothing more, and the caller ends
/// the transfer with an error. Memory stays bounded by the caps whatever the server sends: a line is kept as raw
/// bytes and checked before anything is decoded, an event's data lines go into one byte buffer, and each `data:`
/// line is charged `lineOverheadBytes` besides its value, so an endless run of empty `data:` lines reaches the event
/// cap as fast as a long one.
public struct SSEParser: Sendable {
    /// One event.
    public struct Event: Sendable, Hashable {
        /// The `event:` field, or "message" when there was none.
        public var name: String
        /// The data lines joined with LF, undecoded.
        public var data: [UInt8]

        public init(name: String, data: [UInt8]) {
            self.name = name
            self.data = data
        }
    }

    /// Which cap a stream exceeded.
    public enum Overflow: Sendable, Hashable, CustomStringConvertible {
        /// One line longer than `maximumLineBytes`.
        case line(limit: Int)
        /// One event whose `data:` lines add up to more than `maximumEventBytes`.
        case event(limit: Int)
        /// More than `maximumTotalBytes` in the whole body.
        case total(limit: Int)

        /// What the server sent, for an error message: "a line longer than 1048640 bytes".
        public var description: String {
            switch self {
            case .line(let limit): "a line longer than \(limit) bytes"
            case .event(let limit): "an event larger than \(limit) bytes"
            case .total(let limit): "more than \(limit) bytes in one stream"
            }
        }
    }

    /// The default event cap (the private cloud's `MaxEventBytes`): 1 MiB. One event of a chat-completions stream is
    /// a few hundred bytes; the largest of a Responses stream (`response.completed`, which repeats the whole output)
    /// stays well below this for any answer within a model's output budget. An event is parsed as JSON in one piece, and a parsed document can
    /// take tens of times its size in memory (`[{},{},…]`), so this cap bounds that too.
    public static let defaultMaximumEventBytes = 1 << 20
    /// What one `data:` line costs besides its value: a run of empty `data:` lines is 6 bytes a line on the wire
    /// and must reach the event cap in proportion.
    public static let lineOverheadBytes = 16
    /// The default body cap (the private cloud's `MaxStreamBytes`): far above any answer within a model's output
    /// budget (even the Responses protocol, which repeats the whole output in its closing events, sends a few hundred
    /// bytes per token).
    public static let defaultMaximumTotalBytes = 64 << 20

    /// The most bytes the whole body may hold.
    public let maximumTotalBytes: Int
    /// The most bytes of data (with `lineOverheadBytes` per line) one event may hold.
    public let maximumEventBytes: Int
    /// The most bytes one line may hold: a data line longer than the event cap could never be used.
    public var maximumLineBytes: Int { maximumEventBytes + 64 }
    private var line: [UInt8] = []
    private var name = ""
    private var data: [UInt8] = []
    private var eventBytes = 0
    private var hasData = false
    private var lastWasCR = false
    private var received = 0
    /// Set once a cap was exceeded; `feed` then returns nothing.
    public private(set) var overflow: Overflow?

    public init(
        maximumTotalBytes: Int = Self.defaultMaximumTotalBytes, maximumEventBytes: Int = Self.defaultMaximumEventBytes
    ) {
        self.maximumTotalBytes = maximumTotalBytes
        self.maximumEventBytes = maximumEventBytes
    }

    /// Feeds bytes; returns the events they completed (none once `overflow` is set).
    public mutating func feed(_ bytes: [UInt8]) -> [Event] {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Feeds bytes; returns the events they completed (none once `overflow` is set).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Event] {
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
                guard line.count < maximumLineBytes else {
                    overflow = .line(limit: maximumLineBytes)
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
                data.removeAll(keepingCapacity: data.count <= 65536)
                eventBytes = 0
                hasData = false
            }
            guard hasData else { return nil }
            return Event(name: name.isEmpty ? "message" : name, data: data)
        }
        if line.first == UInt8(ascii: ":") { return nil }
        // The field name and value, on the raw bytes: nothing is decoded before the caps were checked.
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
        var valueStart = colon < line.endIndex ? colon + 1 : colon
        if valueStart < line.endIndex, line[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
        let field = line[..<colon]
        if field.elementsEqual("data".utf8) {
            eventBytes += line.count - valueStart + Self.lineOverheadBytes
            guard eventBytes <= maximumEventBytes else {
                overflow = .event(limit: maximumEventBytes)
                data = []
                return nil
            }
            if hasData { data.append(0x0A) }
            data.append(contentsOf: line[valueStart...])
            hasData = true
        } else if field.elementsEqual("event".utf8) {
            // A name is at most a line (bounded above); decoding turns each invalid byte into 3, once.
            name = String(decoding: line[valueStart...], as: UTF8.self)
        }
        return nil
    }
}
