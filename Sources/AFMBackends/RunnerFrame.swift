// SPDX-License-Identifier: Apache-2.0
import AFMCore
import CAFMBackendABI

/// One message of the runner protocol between `afmd` and `afm-backend-runner` (docs/backend-abi.md, "Runner
/// protocol").
///
/// On the wire a frame is `u32 length` (little-endian; the bytes that follow it), `u8 type`, then the payload.
/// Integers are little-endian; byte strings are `u32 length` + bytes. The first frame in each direction is
/// `hello`, carrying the protocol version; a peer that does not speak the other's version closes the channel.
enum RunnerFrame: Sendable, Equatable {
    /// The protocol version this build speaks.
    static let protocolVersion: UInt32 = 1
    /// The largest frame either side accepts (a describe document or request may be large; events are ≤ 16 MiB).
    static let maximumLength = 64 << 20

    // Host → runner.
    case hello(version: UInt32, abiMajor: UInt32, abiMinor: UInt32)
    case load(seq: UInt64, manifestPath: String, copyDirectory: String, uniqueName: String)
    case create(seq: UInt64, config: [UInt8])
    case describe(seq: UInt64)
    case generate(seq: UInt64, requestID: UInt64, request: [UInt8])
    case cancel(requestID: UInt64)
    case credit(requestID: UInt64, events: UInt32)
    case tokenize(seq: UInt64, request: [UInt8])
    case destroy(seq: UInt64)
    case shutdown

    // Runner → host.
    case helloReply(version: UInt32, pid: UInt32)
    /// The answer to a call with `seq`: `status` is `AFM_OK` or an `AFM_ERR_*` value; `value` and `payload`
    /// depend on the call.
    case reply(seq: UInt64, status: Int32, value: Int64, message: String, payload: [UInt8])
    case event(requestID: UInt64, BackendEvent)

    /// Wire type codes.
    enum Code: UInt8 {
        case hello = 0x01, load = 0x02, create = 0x03, describe = 0x04, generate = 0x05, cancel = 0x06
        case credit = 0x07, tokenize = 0x08, destroy = 0x09, shutdown = 0x0A
        case helloReply = 0x41, reply = 0x42, event = 0x43
    }

    // MARK: - Encoding

    /// Appends the frame, length prefix included, to `out`.
    func encode(into out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: [0, 0, 0, 0])
        switch self {
        case .hello(let version, let major, let minor):
            out.append(Code.hello.rawValue)
            out.appendLE(version)
            out.appendLE(major)
            out.appendLE(minor)
        case .load(let seq, let manifest, let copies, let name):
            out.append(Code.load.rawValue)
            out.appendLE(seq)
            out.appendBytes(Array(manifest.utf8))
            out.appendBytes(Array(copies.utf8))
            out.appendBytes(Array(name.utf8))
        case .create(let seq, let config):
            out.append(Code.create.rawValue)
            out.appendLE(seq)
            out.appendBytes(config)
        case .describe(let seq):
            out.append(Code.describe.rawValue)
            out.appendLE(seq)
        case .generate(let seq, let id, let request):
            out.append(Code.generate.rawValue)
            out.appendLE(seq)
            out.appendLE(id)
            out.appendBytes(request)
        case .cancel(let id):
            out.append(Code.cancel.rawValue)
            out.appendLE(id)
        case .credit(let id, let events):
            out.append(Code.credit.rawValue)
            out.appendLE(id)
            out.appendLE(events)
        case .tokenize(let seq, let request):
            out.append(Code.tokenize.rawValue)
            out.appendLE(seq)
            out.appendBytes(request)
        case .destroy(let seq):
            out.append(Code.destroy.rawValue)
            out.appendLE(seq)
        case .shutdown:
            out.append(Code.shutdown.rawValue)
        case .helloReply(let version, let pid):
            out.append(Code.helloReply.rawValue)
            out.appendLE(version)
            out.appendLE(pid)
        case .reply(let seq, let status, let value, let message, let payload):
            out.append(Code.reply.rawValue)
            out.appendLE(seq)
            out.appendLE(UInt32(bitPattern: status))
            out.appendLE(UInt64(bitPattern: value))
            out.appendBytes(Array(message.utf8))
            out.appendBytes(payload)
        case .event(let id, let event):
            out.append(Code.event.rawValue)
            out.appendLE(id)
            Self.encode(event, into: &out)
        }
        let length = UInt32(out.count - start - 4)
        withUnsafeBytes(of: length.littleEndian) { raw in
            for index in 0..<4 { out[start + index] = raw[index] }
        }
    }

    /// The frame's bytes.
    var bytes: [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    /// An event as `i32 type, i32 index, i32 code, i64 input, i64 output, i64 reasoning, i64 cached, text, name`:
    /// the fields of `afm_event`, with the ABI's type and code values.
    private static func encode(_ event: BackendEvent, into out: inout [UInt8]) {
        var type = AFM_EVENT_USAGE
        var index: Int32 = 0
        var code: Int32 = 0
        var usage = BackendUsage()
        var text: [UInt8] = []
        var name: [UInt8] = []
        switch event {
        case .textDelta(let delta):
            type = AFM_EVENT_TEXT_DELTA
            text = Array(delta.utf8)
        case .toolCallBegin(let callIndex, let callName, let callID):
            type = AFM_EVENT_TOOL_CALL_BEGIN
            index = Int32(clamping: callIndex)
            name = Array(callName.utf8)
            text = Array(callID.utf8)
        case .toolCallArguments(let callIndex, let delta):
            type = AFM_EVENT_TOOL_CALL_ARGUMENTS
            index = Int32(clamping: callIndex)
            text = Array(delta.utf8)
        case .toolCallEnd(let callIndex):
            type = AFM_EVENT_TOOL_CALL_END
            index = Int32(clamping: callIndex)
        case .reasoningText(let delta):
            type = AFM_EVENT_REASONING_TEXT
            text = Array(delta.utf8)
        case .reasoningState(let bytes):
            type = AFM_EVENT_REASONING_STATE
            text = bytes
        case .usage(let counts):
            usage = counts
        case .done(let reason):
            type = AFM_EVENT_DONE
            code = reason.abiValue
        case .failed(let failure, let message):
            type = AFM_EVENT_ERROR
            code = failure.abiValue
            text = Array(message.utf8)
        }
        out.appendLE(UInt32(bitPattern: type))
        out.appendLE(UInt32(bitPattern: index))
        out.appendLE(UInt32(bitPattern: code))
        for count in [usage.inputTokens, usage.outputTokens, usage.reasoningTokens, usage.cachedTokens] {
            out.appendLE(UInt64(bitPattern: Int64(count ?? -1)))
        }
        out.appendBytes(text)
        out.appendBytes(name)
    }

    // MARK: - Decoding

    /// A frame that cannot be decoded: the peer is broken or speaks another protocol.
    struct DecodeError: Error, Sendable {
        var message: String
    }

    /// Decodes one frame body (type byte and payload, without the length prefix).
    static func decode(_ body: UnsafeRawBufferPointer) throws(DecodeError) -> RunnerFrame {
        var reader = ByteReader(bytes: body)
        let rawCode = try reader.u8()
        guard let code = Code(rawValue: rawCode) else { throw DecodeError(message: "unknown frame type \(rawCode)") }
        switch code {
        case .hello:
            return .hello(version: try reader.u32(), abiMajor: try reader.u32(), abiMinor: try reader.u32())
        case .load:
            return .load(
                seq: try reader.u64(), manifestPath: try reader.string(), copyDirectory: try reader.string(),
                uniqueName: try reader.string())
        case .create:
            return .create(seq: try reader.u64(), config: try reader.byteString())
        case .describe:
            return .describe(seq: try reader.u64())
        case .generate:
            return .generate(seq: try reader.u64(), requestID: try reader.u64(), request: try reader.byteString())
        case .cancel:
            return .cancel(requestID: try reader.u64())
        case .credit:
            return .credit(requestID: try reader.u64(), events: try reader.u32())
        case .tokenize:
            return .tokenize(seq: try reader.u64(), request: try reader.byteString())
        case .destroy:
            return .destroy(seq: try reader.u64())
        case .shutdown:
            return .shutdown
        case .helloReply:
            return .helloReply(version: try reader.u32(), pid: try reader.u32())
        case .reply:
            return .reply(
                seq: try reader.u64(), status: Int32(bitPattern: try reader.u32()), value: Int64(bitPattern: try reader.u64()),
                message: try reader.string(), payload: try reader.byteString())
        case .event:
            let id = try reader.u64()
            return .event(requestID: id, try decodeEvent(&reader))
        }
    }

    private static func decodeEvent(_ reader: inout ByteReader) throws(DecodeError) -> BackendEvent {
        let type = Int32(bitPattern: try reader.u32())
        let index = Int(max(0, Int32(bitPattern: try reader.u32())))
        let code = Int32(bitPattern: try reader.u32())
        var counts: [Int?] = []
        for _ in 0..<4 {
            // A runner process is untrusted like a backend: its counts are capped by the same rule.
            counts.append(BackendUsage.count(abiValue: Int64(bitPattern: try reader.u64())))
        }
        let text = try reader.byteString()
        let name = try reader.byteString()
        func string(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        switch type {
        case AFM_EVENT_TEXT_DELTA: return .textDelta(string(text))
        case AFM_EVENT_TOOL_CALL_BEGIN: return .toolCallBegin(index: index, name: string(name), callID: string(text))
        case AFM_EVENT_TOOL_CALL_ARGUMENTS: return .toolCallArguments(index: index, delta: string(text))
        case AFM_EVENT_TOOL_CALL_END: return .toolCallEnd(index: index)
        case AFM_EVENT_REASONING_TEXT: return .reasoningText(string(text))
        case AFM_EVENT_REASONING_STATE: return .reasoningState(text)
        case AFM_EVENT_USAGE:
            return .usage(BackendUsage(inputTokens: counts[0], outputTokens: counts[1], reasoningTokens: counts[2], cachedTokens: counts[3]))
        case AFM_EVENT_DONE: return .done(FinishReason(abiValue: code))
        case AFM_EVENT_ERROR: return .failed(AFMErrorCode(abiValue: code), message: string(text))
        default: throw DecodeError(message: "unknown event type \(type)")
        }
    }
}

extension FinishReason {
    /// The `AFM_FINISH_*` value.
    var abiValue: Int32 {
        switch self {
        case .stop: AFM_FINISH_STOP
        case .length: AFM_FINISH_LENGTH
        case .toolCalls: AFM_FINISH_TOOL_CALLS
        case .cancelled: AFM_FINISH_CANCELLED
        }
    }
}

/// A bounds-checked little-endian reader over a frame body.
private struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    mutating func take(_ count: Int) throws(RunnerFrame.DecodeError) -> UnsafeRawBufferPointer {
        guard count >= 0, bytes.count - offset >= count else {
            throw RunnerFrame.DecodeError(message: "frame is truncated at byte \(offset)")
        }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func u8() throws(RunnerFrame.DecodeError) -> UInt8 { try take(1)[0] }

    mutating func u32() throws(RunnerFrame.DecodeError) -> UInt32 {
        let raw = try take(4)
        return UInt32(raw[0]) | UInt32(raw[1]) << 8 | UInt32(raw[2]) << 16 | UInt32(raw[3]) << 24
    }

    mutating func u64() throws(RunnerFrame.DecodeError) -> UInt64 {
        let low = UInt64(try u32())
        return low | UInt64(try u32()) << 32
    }

    mutating func byteString() throws(RunnerFrame.DecodeError) -> [UInt8] {
        Array(try take(Int(try u32())))
    }

    mutating func string() throws(RunnerFrame.DecodeError) -> String {
        String(decoding: try take(Int(try u32())), as: UTF8.self)
    }
}

extension [UInt8] {
    mutating func appendLE<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    mutating func appendBytes(_ bytes: [UInt8]) {
        appendLE(UInt32(bytes.count))
        append(contentsOf: bytes)
    }
}
