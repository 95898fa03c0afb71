// SPDX-License-Identifier: Apache-2.0
//
// The fuzz targets' properties, shared by two builds: `scripts/fuzz` compiles these files (all but
// FuzzRegressionTests.swift) with an `LLVMFuzzerTestOneInput` entry point under libFuzzer and AddressSanitizer,
// and `swift test` runs every seed and regression input of `Fuzz/` through the same functions.

/// A fuzz input broke a property: the libFuzzer entry turns it into a crash (so the input is kept), the regression
/// test into a failure.
struct PropertyViolation: Error, CustomStringConvertible {
    var description: String
}

/// Throws a ``PropertyViolation`` unless `condition` holds.
func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(PropertyViolation) {
    if !condition { throw PropertyViolation(description: message()) }
}

/// One fuzz target: a name (its directory under `Fuzz/corpus` and `Fuzz/regressions`, and the binary
/// `fuzz-<name>`) and the property every input must keep.
struct FuzzTarget: Sendable {
    var name: String
    var run: @Sendable ([UInt8]) throws -> Void
}

/// Every target, in the order `make fuzz` runs them.
enum FuzzTargets {
    static let all: [FuzzTarget] = [
        FuzzTarget(name: "http-request", run: HTTPRequestFuzz.run),
        FuzzTarget(name: "json", run: JSONFuzz.run),
        FuzzTarget(name: "tool-schema", run: ToolSchemaFuzz.run),
        FuzzTarget(name: "responses-request", run: RequestDecodingFuzz.responses),
        FuzzTarget(name: "chat-completions-request", run: RequestDecodingFuzz.chatCompletions),
        FuzzTarget(name: "messages-request", run: RequestDecodingFuzz.messages),
        FuzzTarget(name: "image-header", run: ImageFuzz.header),
        FuzzTarget(name: "base64-payload", run: ImageFuzz.base64),
        FuzzTarget(name: "ini-config", run: ConfigFuzz.run),
        FuzzTarget(name: "varlink-framer", run: VarlinkFuzz.run),
        FuzzTarget(name: "runner-frame", run: RunnerFrameFuzz.run),
        FuzzTarget(name: "sse-client", run: SSEFuzz.client),
        FuzzTarget(name: "sse-private-cloud", run: SSEFuzz.privateCloud),
        FuzzTarget(name: "chat-archive", run: ChatArchiveFuzz.run),
        FuzzTarget(name: "bridge-message", run: BridgeMessageFuzz.run),
    ]

    static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}

/// Cuts an input into pieces whose sizes are derived from the input itself, so a failing split is reproduced by
/// the same bytes: incremental parsers must give the same result however the bytes arrive.
struct SplitPlan: Sequence, IteratorProtocol {
    private let bytes: [UInt8]
    private var offset = 0
    private var state: UInt64

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        // FNV-1a of the input seeds the piece sizes.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        state = hash | 1
    }

    mutating func next() -> ArraySlice<UInt8>? {
        guard offset < bytes.count else { return nil }
        // xorshift64: pieces of 1…16 bytes mostly, sometimes up to 256.
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        let size = state & 0x30 == 0 ? Int(state >> 56) + 1 : Int(state % 16) + 1
        let end = Swift.min(bytes.count, offset + size)
        defer { offset = end }
        return bytes[offset..<end]
    }
}
