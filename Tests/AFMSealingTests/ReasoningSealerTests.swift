// SPDX-License-Identifier: Apache-2.0
import AFMSealing
import Foundation
import Testing

private let testKey = (0..<32).map { UInt8($0) }
private let testID = [UInt8](repeating: 0xA5, count: 16)
private let model = "qwen3-8b"

/// Offsets into the decoded blob (see ReasoningSealer's layout).
private enum Layout {
    static let version = 0
    static let instanceID = 1..<17
    static let modelTag = 17..<33
    static let nonce = 33..<45
    static func ciphertext(_ count: Int) -> Range<Int> { 45..<count - 16 }
    static func tag(_ count: Int) -> Range<Int> { count - 16..<count }
}

/// Decodes the base64url part of a blob (test-side, via Foundation, independent of the module's decoder).
private func decode(_ blob: String) throws -> [UInt8] {
    var text = String(blob.dropFirst(ReasoningSealer.prefix.count))
        .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while text.count % 4 != 0 { text += "=" }
    return Array(try #require(Data(base64Encoded: text)))
}

private func encode(_ bytes: [UInt8], prefix: String = ReasoningSealer.prefix) -> String {
    var text = Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    while text.hasSuffix("=") { text.removeLast() }
    return prefix + text
}

private func openError(_ sealer: ReasoningSealer, _ blob: String, modelID: String = model) -> SealError? {
    do {
        _ = try sealer.open(blob, modelID: modelID)
        return nil
    } catch {
        return error
    }
}

/// A blob that must not open, and why.
struct BadBlob: Sendable, CustomTestStringConvertible {
    let name: String
    let blob: String
    let reason: SealError.Reason
    var testDescription: String { name }
}

@Suite("ReasoningSealer")
struct ReasoningSealerTests {
    let sealer = ReasoningSealer(key: testKey, instanceID: testID)

    @Test("round trip", arguments: [0, 1, 2, 3, 15, 16, 17, 1000, 1 << 20])
    func roundTrip(size: Int) throws {
        var rng = SystemRandomNumberGenerator()
        let state = (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let blob = sealer.seal(state, modelID: model)
        #expect(blob.hasPrefix("afm1."))
        #expect(try sealer.open(blob, modelID: model) == state)
        #expect(try decode(blob).count == 1 + 16 + 16 + 12 + size + 16)
    }

    @Test("the blob is URL-safe text without padding")
    func blobAlphabet() {
        for size in 0..<8 {
            let blob = sealer.seal([UInt8](repeating: 0xFB, count: size), modelID: model)
            let body = blob.dropFirst(5)
            #expect(body.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        }
    }

    @Test("a fresh sealer round-trips with its random key")
    func randomKey() throws {
        let sealer = ReasoningSealer()
        #expect(sealer.instanceID.count == 16)
        #expect(
            try sealer.open(sealer.seal(Array("thinking".utf8), modelID: "m"), modelID: "m") == Array("thinking".utf8))
        #expect(ReasoningSealer().instanceID != sealer.instanceID)
    }

    @Test("two seals of the same state differ (fresh nonce)")
    func freshNonce() throws {
        let state = Array("same reasoning".utf8)
        let first = sealer.seal(state, modelID: model)
        let second = sealer.seal(state, modelID: model)
        #expect(first != second)
        #expect(try decode(first)[Layout.nonce] != decode(second)[Layout.nonce])
        #expect(try sealer.open(first, modelID: model) == sealer.open(second, modelID: model))
    }

    @Test("the plaintext never appears in the blob, raw or encoded")
    func plaintextHidden() throws {
        let state = Array(String(repeating: "The user wants the weather in Paris. ", count: 8).utf8)
        let blob = sealer.seal(state, modelID: model)
        let bytes = try decode(blob)
        let needle = Array(state.prefix(16))
        let found = (0...(bytes.count - needle.count)).contains { Array(bytes[$0..<$0 + needle.count]) == needle }
        #expect(!found)
        #expect(!blob.contains("weather"))
        #expect(!blob.contains(encode(Array("weather in Paris".utf8), prefix: "")))
        #expect(!blob.contains(Data(state).base64EncodedString().prefix(12)))
    }

    @Test("another instance (e.g. after a restart) gives otherInstance")
    func otherInstance() throws {
        let blob = sealer.seal([1, 2, 3], modelID: model)
        let restarted = ReasoningSealer(key: testKey.reversed(), instanceID: [UInt8](repeating: 0x5A, count: 16))
        #expect(openError(restarted, blob)?.reason == .otherInstance)
        #expect(openError(ReasoningSealer(), blob)?.reason == .otherInstance)
    }

    @Test("another model gives wrongModel, not tampered")
    func wrongModel() throws {
        let blob = sealer.seal([1, 2, 3], modelID: model)
        let error = try #require(openError(sealer, blob, modelID: "llama-3.1-8b"))
        #expect(error.reason == .wrongModel)
        #expect(error.message.contains("llama-3.1-8b"))
        #expect(openError(sealer, blob, modelID: model + " ")?.reason == .wrongModel)
        #expect(openError(sealer, blob, modelID: "")?.reason == .wrongModel)
        #expect(error.code == "invalid_encrypted_content")
    }

    @Test("the same key under another instance id does not open (instance id is authenticated)")
    func sameKeyOtherID() {
        let blob = sealer.seal([9, 9, 9], modelID: model)
        let twin = ReasoningSealer(key: testKey, instanceID: [UInt8](repeating: 0x00, count: 16))
        var bytes = (try? decode(blob)) ?? []
        bytes.replaceSubrange(Layout.instanceID, with: [UInt8](repeating: 0x00, count: 16))
        #expect(openError(twin, encode(bytes))?.reason == .tampered)
    }

    @Test("a flipped bit in each region is detected", arguments: ["version", "modelTag", "nonce", "ciphertext", "tag"])
    func tamperRegion(region: String) throws {
        let blob = sealer.seal(Array("some reasoning state".utf8), modelID: model)
        let original = try decode(blob)
        let range: Range<Int> =
            switch region {
            case "version": 0..<1
            case "modelTag": Layout.modelTag
            case "nonce": Layout.nonce
            case "ciphertext": Layout.ciphertext(original.count)
            default: Layout.tag(original.count)
            }
        for index in range {
            for bit in [0, 3, 7] {
                var bytes = original
                bytes[index] ^= 1 << bit
                #expect(openError(sealer, encode(bytes))?.reason == .tampered, "byte \(index) bit \(bit)")
            }
        }
    }

    @Test("a flipped bit in the instance id reads as another instance (inherent: nothing can be verified)")
    func tamperInstanceID() throws {
        var bytes = try decode(sealer.seal([1], modelID: model))
        bytes[Layout.instanceID.lowerBound] ^= 1
        #expect(openError(sealer, encode(bytes))?.reason == .otherInstance)
    }

    @Test("every one-character edit of the text is refused")
    func everyCharacterEdit() throws {
        let blob = Array(sealer.seal(Array("abc".utf8), modelID: model))
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for index in blob.indices {
            for replacement in [alphabet[(alphabet.firstIndex(of: blob[index]) ?? 0) ^ 1], "A", "_"]
            where replacement != blob[index] {
                var edited = blob
                edited[index] = replacement
                #expect(openError(sealer, String(edited)) != nil, "position \(index)")
            }
        }
    }

    @Test("truncating at every length is refused")
    func everyTruncation() throws {
        let blob = sealer.seal(Array("abcdef".utf8), modelID: model)
        for length in 0..<blob.count {
            let error = openError(sealer, String(blob.prefix(length)))
            #expect(error != nil, "length \(length)")
            #expect(error?.reason == .malformed || error?.reason == .tampered, "length \(length)")
        }
    }

    static let badBlobs: [BadBlob] = {
        let header = [UInt8(1)] + testID + [UInt8](repeating: 0, count: 16)
        return [
            BadBlob(name: "empty", blob: "", reason: .malformed),
            BadBlob(name: "plain text", blob: "I thought about it", reason: .malformed),
            BadBlob(name: "prefix only", blob: "afm1.", reason: .malformed),
            BadBlob(name: "no dot", blob: "afm1AAAA", reason: .malformed),
            BadBlob(name: "other prefix", blob: "gAAAAABo" + String(repeating: "A", count: 100), reason: .malformed),
            BadBlob(name: "OpenAI-style blob", blob: "gAAAAA.bc", reason: .malformed),
            BadBlob(name: "upper-case prefix", blob: "AFM1.AAAA", reason: .malformed),
            BadBlob(name: "version with sign", blob: "afm+1.AAAA", reason: .malformed),
            BadBlob(name: "version with leading zero", blob: "afm01.AAAA", reason: .malformed),
            BadBlob(name: "version too long", blob: "afm1234.AAAA", reason: .malformed),
            BadBlob(name: "padding", blob: encode(header + [UInt8](repeating: 7, count: 29)) + "=", reason: .malformed),
            BadBlob(
                name: "standard alphabet", blob: "afm1.ab+/" + String(repeating: "A", count: 80), reason: .malformed),
            BadBlob(name: "whitespace", blob: "afm1.AAAA AAAA", reason: .malformed),
            BadBlob(name: "impossible length", blob: "afm1.AAAAA", reason: .malformed),
            BadBlob(name: "non-canonical last character", blob: "afm1.AB", reason: .malformed),
            BadBlob(name: "too short", blob: encode(header + [UInt8](repeating: 7, count: 27)), reason: .malformed),
            BadBlob(name: "non-ASCII", blob: "afm1.é" + String(repeating: "A", count: 80), reason: .malformed),
            BadBlob(
                name: "version 2 prefix", blob: "afm2." + String(repeating: "A", count: 80), reason: .unknownVersion),
            BadBlob(name: "version 0 prefix", blob: "afm0.AAAA", reason: .unknownVersion),
            BadBlob(name: "version 999 prefix", blob: "afm999.AAAA", reason: .unknownVersion),
            BadBlob(
                name: "version byte 2 under afm1",
                blob: encode([2] + Array(header.dropFirst()) + [UInt8](repeating: 0, count: 28)), reason: .tampered),
            BadBlob(
                name: "forged blob with our instance id", blob: encode(header + [UInt8](repeating: 0, count: 28)),
                reason: .tampered),
            BadBlob(
                name: "forged blob with another instance id",
                blob: encode([1] + [UInt8](repeating: 3, count: 44) + [UInt8](repeating: 0, count: 16)),
                reason: .otherInstance),
        ]
    }()

    @Test("malformed, foreign-version and forged blobs are refused with the right reason", arguments: badBlobs)
    func refusesBadBlobs(_ c: BadBlob) {
        let error = openError(sealer, c.blob)
        #expect(error?.reason == c.reason, "\(error?.message ?? "opened")")
        #expect(error?.message.isEmpty == false)
    }

    @Test("seal and open from 8 concurrent tasks, on one shared sealer")
    func concurrency() async throws {
        let sealer = self.sealer
        let other = ReasoningSealer()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for round in 0..<200 {
                        let state =
                            Array("task \(task) round \(round)".utf8) + [UInt8](repeating: UInt8(task), count: round)
                        let modelID = "model-\(task % 3)"
                        let blob = sealer.seal(state, modelID: modelID)
                        let opened = try sealer.open(blob, modelID: modelID)
                        guard opened == state else { throw SealError(reason: .tampered, message: "mismatch") }
                        guard openError(other, blob, modelID: modelID)?.reason == .otherInstance else {
                            throw SealError(reason: .malformed, message: "opened by another instance")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
