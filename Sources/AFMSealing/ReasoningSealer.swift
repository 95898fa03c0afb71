// SPDX-License-Identifier: Apache-2.0

/// Seals a backend's opaque reasoning state into the `encrypted_content` of a reasoning item, and opens it
/// again when a client replays the item.
///
/// A blob is the text `afm1.` followed by unpadded base64url of:
///
/// ```
/// offset  0   1                 17                33          45               end-16     end
///         ┌───┬─────────────────┬─────────────────┬───────────┬─────────────────┬─────────┐
///         │ 1 │ instance id (16)│ model tag (16)  │ nonce (12)│ ciphertext (n)  │ tag (16)│
///         └───┴─────────────────┴─────────────────┴───────────┴─────────────────┴─────────┘
///         └──────────── header: AES-GCM additional data ──────┘
/// ```
///
/// - The *version* byte repeats the `afm1.` prefix, so a future format can be told apart before decoding.
/// - The *instance id* is random per sealer (one per daemon start, like the key). It is checked before
///   decryption: a blob from another instance cannot be authenticated without that instance's key, and
///   "sealed before a restart" is the most common replay failure, worth its own message.
/// - The *model tag* is the first 16 bytes of SHA-256 of the model id. It is authenticated (part of the
///   header, which is the GCM additional data) and compared only *after* authentication succeeds. So a blob
///   sealed for another model authenticates and then fails the comparison (``SealError/Reason/wrongModel``),
///   while any changed bit in the version, model tag, nonce, ciphertext or tag fails authentication
///   (``SealError/Reason/tampered``). Binding the hash rather than the id itself is what makes the two
///   distinguishable, and SHA-256 keeps the binding as strong as binding the id.
/// - A fresh random 96-bit *nonce* per seal: with one key per daemon start, the chance of a repeat stays
///   negligible far beyond any realistic number of seals (the NIST SP 800-38D bound is 2³² per key).
///
/// The plaintext never appears in the blob. The one ambiguity left is inherent: a changed bit inside the
/// instance id reads as ``SealError/Reason/otherInstance``, because nothing can be verified without the
/// key that id names.
///
/// Thread safety: the key and id are immutable, and every call uses its own libcrypto context, so one
/// sealer may be shared by all request handlers.
public final class ReasoningSealer: Sendable {
    /// The text every blob of the current format starts with.
    public static let prefix = "afm1."
    /// The current format version, as in the prefix and the first byte.
    public static let version: UInt8 = 1
    /// The length of an instance id in bytes.
    public static let instanceIDLength = 16

    /// This sealer's random id, the one blobs sealed by it carry (not secret).
    public let instanceID: [UInt8]
    private let key: [UInt8]

    private static let modelTagLength = 16
    private static let headerLength = 1 + instanceIDLength + modelTagLength
    private static let minimumLength = headerLength + LibCrypto.nonceLength + LibCrypto.tagLength

    /// Creates a sealer with a fresh random 256-bit key and a random instance id (`RAND_bytes`).
    ///
    /// The key lives only in this object: blobs from earlier sealers (an earlier daemon start) cannot be
    /// opened, by design.
    public init() {
        self.key = LibCrypto.randomBytes(LibCrypto.keyLength)
        self.instanceID = LibCrypto.randomBytes(Self.instanceIDLength)
    }

    /// Creates a sealer with a given key and instance id, for tests.
    ///
    /// - Precondition: `key` is 32 bytes and `instanceID` is 16 bytes.
    public init(key: [UInt8], instanceID: [UInt8]) {
        precondition(key.count == LibCrypto.keyLength, "an AES-256 key is 32 bytes")
        precondition(instanceID.count == Self.instanceIDLength, "an instance id is 16 bytes")
        self.key = key
        self.instanceID = instanceID
    }

    /// Seals reasoning state for one model.
    ///
    /// - Parameters:
    ///   - state: The backend's opaque reasoning state (may be empty).
    ///   - modelID: The id of the model that produced the state; only that model can open the blob.
    /// - Returns: `afm1.` followed by unpadded base64url; different on every call, even for equal input.
    public func seal(_ state: [UInt8], modelID: String) -> String {
        let header = [Self.version] + instanceID + Self.modelTag(modelID)
        let nonce = LibCrypto.randomBytes(LibCrypto.nonceLength)
        var blob = [UInt8](repeating: 0, count: Self.minimumLength + state.count)
        blob.replaceSubrange(0..<Self.headerLength, with: header)
        blob.replaceSubrange(Self.headerLength..<Self.headerLength + LibCrypto.nonceLength, with: nonce)
        blob.withUnsafeMutableBufferPointer { buffer in
            let sealed = UnsafeMutableBufferPointer(
                rebasing: buffer[(Self.headerLength + LibCrypto.nonceLength)...])
            LibCrypto.sealAES256GCM(key: key, nonce: nonce, aad: header, plaintext: state, output: sealed)
        }
        return Self.prefix + Base64URL.encode(blob)
    }

    /// Opens a blob sealed by this sealer for `modelID`.
    ///
    /// - Parameters:
    ///   - blob: The `encrypted_content` a client sent back.
    ///   - modelID: The id of the model the request is for.
    /// - Returns: The reasoning state exactly as it was sealed.
    /// - Throws: ``SealError`` whose reason says why: ``SealError/Reason/malformed``,
    ///   ``SealError/Reason/unknownVersion``, ``SealError/Reason/otherInstance``,
    ///   ``SealError/Reason/wrongModel`` or ``SealError/Reason/tampered``.
    public func open(_ blob: String, modelID: String) throws(SealError) -> [UInt8] {
        let utf8 = blob.utf8
        guard let dot = utf8.firstIndex(of: UInt8(ascii: ".")), let version = Self.formatVersion(utf8[..<dot]) else {
            throw SealError(reason: .malformed, message: "encrypted_content is not a blob sealed by this server")
        }
        guard version == Int(Self.version) else {
            throw SealError(
                reason: .unknownVersion,
                message: "encrypted_content has format version \(version); this server reads version \(Self.version)")
        }
        guard let bytes = Base64URL.decode(utf8[utf8.index(after: dot)...]) else {
            throw SealError(reason: .malformed, message: "encrypted_content is not valid unpadded base64url")
        }
        guard bytes.count >= Self.minimumLength else {
            throw SealError(reason: .malformed, message: "encrypted_content is too short (\(bytes.count) bytes)")
        }
        guard bytes[0] == Self.version else {
            throw SealError(reason: .tampered, message: "encrypted_content was modified (version byte)")
        }
        guard bytes[1...Self.instanceIDLength].elementsEqual(instanceID) else {
            throw SealError(
                reason: .otherInstance,
                message: "encrypted_content was sealed by another server instance (for example before a restart); "
                    + "it can no longer be opened, start a new conversation or drop the reasoning item")
        }
        let nonceStart = Self.headerLength
        let tagStart = bytes.count - LibCrypto.tagLength
        guard
            let state = LibCrypto.openAES256GCM(
                key: key, nonce: bytes[nonceStart..<nonceStart + LibCrypto.nonceLength],
                aad: bytes[0..<Self.headerLength],
                ciphertext: bytes[(nonceStart + LibCrypto.nonceLength)..<tagStart], tag: bytes[tagStart...])
        else {
            throw SealError(reason: .tampered, message: "encrypted_content was modified (authentication failed)")
        }
        guard bytes[(1 + Self.instanceIDLength)..<Self.headerLength].elementsEqual(Self.modelTag(modelID)) else {
            throw SealError(
                reason: .wrongModel, message: "encrypted_content was produced by a different model than '\(modelID)'")
        }
        return state
    }

    /// The version in a prefix `afm<N>` (N in decimal without leading zeros, at most 3 digits), or `nil`.
    private static func formatVersion(_ prefix: Substring.UTF8View) -> Int? {
        guard prefix.starts(with: "afm".utf8) else { return nil }
        let digits = prefix.dropFirst(3)
        guard (1...3).contains(digits.count), digits.first != UInt8(ascii: "0") || digits.count == 1,
            digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    /// The first 16 bytes of SHA-256 of the model id's UTF-8.
    private static func modelTag(_ modelID: String) -> [UInt8] {
        Array(LibCrypto.sha256(Array(modelID.utf8)).prefix(modelTagLength))
    }
}
