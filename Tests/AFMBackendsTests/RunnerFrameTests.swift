// SPDX-License-Identifier: Apache-2.0
@testable import AFMBackends
import AFMCore
import Testing

/// The runner protocol's frames: every frame survives encoding, and broken input is refused, not trusted.
@Suite struct RunnerFrameTests {
    static let frames: [RunnerFrame] = [
        .hello(version: 1, abiMajor: 1, abiMinor: 0),
        .load(seq: 1, manifestPath: "/b/x.json", copyDirectory: "/c", uniqueName: "x-g1"),
        .create(seq: 2, config: Array(#"{"config_version":1}"#.utf8)),
        .describe(seq: 3),
        .generate(seq: 4, requestID: 77, request: Array("{}".utf8)),
        .cancel(requestID: 77),
        .credit(requestID: 77, events: 64),
        .tokenize(seq: 5, request: []),
        .destroy(seq: 6),
        .shutdown,
        .helloReply(version: 1, pid: 4242),
        .reply(seq: 7, status: 3, value: -1, message: "too long: ü", payload: [0, 255]),
        .event(requestID: 9, .textDelta("héllo")),
        .event(requestID: 9, .toolCallBegin(index: 2, name: "get_weather", callID: "call_1")),
        .event(requestID: 9, .toolCallArguments(index: 2, delta: #"{"city":"#)),
        .event(requestID: 9, .toolCallEnd(index: 2)),
        .event(requestID: 9, .reasoningText("thinking")),
        .event(requestID: 9, .reasoningState([0, 1, 2, 255])),
        .event(requestID: 9, .usage(BackendUsage(inputTokens: 5, outputTokens: nil, reasoningTokens: 0, cachedTokens: 3))),
        .event(requestID: 9, .done(.toolCalls)),
        .event(requestID: 9, .failed(.rateLimited, message: "slow down")),
    ]

    @Test(arguments: frames)
    func roundTrips(_ frame: RunnerFrame) throws {
        let bytes = frame.bytes
        let length = Int(bytes[0]) | Int(bytes[1]) << 8 | Int(bytes[2]) << 16 | Int(bytes[3]) << 24
        #expect(length == bytes.count - 4)
        let decoded = try bytes.withUnsafeBytes { raw in try RunnerFrame.decode(UnsafeRawBufferPointer(rebasing: raw[4...])) }
        #expect(decoded == frame)
    }

    @Test func truncatedAndUnknownFramesAreRefused() {
        let bytes = RunnerFrame.generate(seq: 4, requestID: 77, request: Array("{}".utf8)).bytes
        for cut in 5..<bytes.count {
            #expect(throws: RunnerFrame.DecodeError.self) {
                try bytes.withUnsafeBytes { raw in try RunnerFrame.decode(UnsafeRawBufferPointer(rebasing: raw[4..<cut])) }
            }
        }
        #expect(throws: RunnerFrame.DecodeError.self) {
            try [UInt8]([0x7f]).withUnsafeBytes { try RunnerFrame.decode($0) }
        }
        // A byte string that claims more bytes than the frame has.
        #expect(throws: RunnerFrame.DecodeError.self) {
            try [UInt8]([0x03, 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f]).withUnsafeBytes { try RunnerFrame.decode($0) }
        }
    }

    /// A runner process is untrusted: the usage counts of its event frames get the same cap as counts read from the
    /// C ABI (2^32 - 1), so the host's sums (`input + output`, the token monitor's totals) cannot overflow and trap.
    @Test func usageCountsFromARunnerAreCapped() throws {
        let frame = RunnerFrame.event(
            requestID: 9,
            .usage(BackendUsage(inputTokens: Int.max, outputTokens: 1, reasoningTokens: Int(UInt32.max) + 1, cachedTokens: -7)))
        let bytes = frame.bytes
        let decoded = try bytes.withUnsafeBytes { raw in try RunnerFrame.decode(UnsafeRawBufferPointer(rebasing: raw[4...])) }
        let cap = Int(UInt32.max)
        #expect(decoded == .event(requestID: 9, .usage(BackendUsage(inputTokens: cap, outputTokens: 1, reasoningTokens: cap, cachedTokens: nil))))
    }

    @Test func hostOnlyCodesNeverComeFromTheABI() {
        #expect(AFMErrorCode(abiValue: AFMErrorCode.backendCrashed.abiValue) == .internal)
        #expect(AFMErrorCode.backendCrashed.httpStatus == 503)
        #expect(AFMErrorCode.allCases.filter(\.isHostOnly) == [.backendCrashed, .invalidStructuredOutput])
        // A backend can never claim a host-only code: each one read back from the ABI is `internal`.
        for code in AFMErrorCode.allCases where code.isHostOnly {
            #expect(AFMErrorCode(abiValue: code.abiValue) == .internal)
        }
    }
}
