// SPDX-License-Identifier: Apache-2.0
internal import CLibCrypto

/// The few libcrypto (OpenSSL 3) operations the sealer needs, behind Swift signatures.
///
/// This is the only file that touches C. Every call creates and frees its own `EVP_CIPHER_CTX`, so the
/// functions are safe to call from any number of threads at once (libcrypto 3 needs no global locking
/// setup). Failures of calls that cannot fail on valid input (allocation, cipher setup) trap with a reason:
/// a sealer that cannot encrypt must not carry on.
enum LibCrypto {
    static let keyLength = 32
    static let nonceLength = 12
    static let tagLength = 16

    /// `count` bytes from the operating system's CSPRNG (`RAND_bytes`).
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let status = bytes.withUnsafeMutableBufferPointer { buffer in
            RAND_bytes(buffer.baseAddress, Int32(buffer.count))
        }
        guard status == 1 else { fatalError("RAND_bytes failed: \(lastError())") }
        return bytes
    }

    /// SHA-256 of `bytes` (`EVP_Digest`).
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let status = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, nil, EVP_sha256(), nil)
            }
        }
        guard status == 1 else { fatalError("EVP_Digest(SHA-256) failed: \(lastError())") }
        return digest
    }

    /// Encrypts `plaintext` with AES-256-GCM, authenticating `aad` as well, and writes the ciphertext
    /// (the same length as the plaintext) followed by the 16-byte tag into `output`.
    ///
    /// - Precondition: `key` is 32 bytes, `nonce` 12 bytes, and `output` has room for
    ///   `plaintext.count + tagLength` bytes.
    static func sealAES256GCM(
        key: [UInt8], nonce: [UInt8], aad: [UInt8], plaintext: [UInt8], output: UnsafeMutableBufferPointer<UInt8>
    ) {
        precondition(key.count == keyLength && nonce.count == nonceLength)
        precondition(output.count == plaintext.count + tagLength)
        guard let context = EVP_CIPHER_CTX_new() else { fatalError("EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(context) }
        check(EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, nil, nil), "EVP_EncryptInit_ex")
        check(
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, Int32(nonceLength), nil), "EVP_CTRL_GCM_SET_IVLEN")
        check(EVP_EncryptInit_ex(context, nil, nil, key, nonce), "EVP_EncryptInit_ex(key)")
        // `output` holds at least the 16-byte tag, so it has a base address.
        let out = output.baseAddress!
        var written: Int32 = 0
        if !aad.isEmpty {
            check(EVP_EncryptUpdate(context, nil, &written, aad, Int32(aad.count)), "EVP_EncryptUpdate(aad)")
        }
        var position = 0
        plaintext.withUnsafeBufferPointer { input in
            // An update with no input is skipped: with a NULL output pointer GCM would read it as AAD.
            while position < input.count {
                let length = min(input.count - position, chunkLength)
                // `input` is non-empty inside this loop, so it has a base address.
                check(
                    EVP_EncryptUpdate(context, out + position, &written, input.baseAddress! + position, Int32(length)),
                    "EVP_EncryptUpdate")
                position += Int(written)
            }
        }
        check(EVP_EncryptFinal_ex(context, out + position, &written), "EVP_EncryptFinal_ex")
        position += Int(written)
        precondition(position == plaintext.count, "GCM produced \(position) bytes for \(plaintext.count)")
        check(
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), out + position), "EVP_CTRL_GCM_GET_TAG"
        )
    }

    /// Decrypts and authenticates AES-256-GCM `ciphertext` with its `tag`; returns `nil` when authentication
    /// fails (wrong key, nonce, AAD, ciphertext or tag).
    static func openAES256GCM(
        key: [UInt8], nonce: ArraySlice<UInt8>, aad: ArraySlice<UInt8>, ciphertext: ArraySlice<UInt8>,
        tag: ArraySlice<UInt8>
    ) -> [UInt8]? {
        precondition(key.count == keyLength && nonce.count == nonceLength && tag.count == tagLength)
        guard let context = EVP_CIPHER_CTX_new() else { fatalError("EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(context) }
        check(EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, nil, nil), "EVP_DecryptInit_ex")
        check(
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, Int32(nonceLength), nil), "EVP_CTRL_GCM_SET_IVLEN")
        check(EVP_DecryptInit_ex(context, nil, nil, key, Array(nonce)), "EVP_DecryptInit_ex(key)")
        var written: Int32 = 0
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        let authentic = plaintext.withUnsafeMutableBufferPointer { output -> Bool in
            if !aad.isEmpty {
                let status = aad.withUnsafeBufferPointer { aad in
                    EVP_DecryptUpdate(context, nil, &written, aad.baseAddress, Int32(aad.count))
                }
                guard status == 1 else { return false }
            }
            var position = 0
            let decrypted = ciphertext.withUnsafeBufferPointer { input -> Bool in
                while position < input.count {
                    let length = min(input.count - position, chunkLength)
                    // Both base addresses exist: the buffers are non-empty inside this loop.
                    guard
                        EVP_DecryptUpdate(
                            context, output.baseAddress! + position, &written, input.baseAddress! + position,
                            Int32(length)) == 1
                    else { return false }
                    position += Int(written)
                }
                return true
            }
            guard decrypted else { return false }
            var tagCopy = Array(tag)
            check(
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tagCopy), "EVP_CTRL_GCM_SET_TAG")
            // GCM writes nothing at final; a scratch byte keeps the pointer valid when the plaintext is empty.
            var scratch = [UInt8](repeating: 0, count: 16)
            return EVP_DecryptFinal_ex(context, &scratch, &written) > 0
        }
        guard authentic else {
            // A refused blob is the client's error, not ours: leave no stale entry in this thread's queue.
            ERR_clear_error()
            return nil
        }
        return plaintext
    }

    /// EVP lengths are `int`; large inputs go through in pieces well below `Int32.max`.
    private static let chunkLength = 1 << 30

    private static func check(_ status: Int32, _ call: StaticString) {
        guard status == 1 else { fatalError("\(call) failed: \(lastError())") }
    }

    /// The oldest queued libcrypto error as text, for the trap message.
    private static func lastError() -> String {
        let code = ERR_get_error()
        guard code != 0 else { return "no libcrypto error queued" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
