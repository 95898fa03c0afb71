// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The size and a 64-bit hash of a file's bytes: notices a backend library replaced by different bytes (a new
/// build) and ignores one rewritten with the same bytes (a reinstalled package), without keeping the bytes.
///
/// A library can be tens of MiB (the local backend links llama.cpp: ~13 MiB); keeping a copy of it per
/// generation to compare byte for byte made afmd's resident memory swing by that much with every reload. The
/// hash is FNV-1a over 64-bit words: not cryptographic, which is fine because the operator who can replace the
/// file is the one the comparison serves.
struct FileFingerprint: Sendable, Hashable {
    var size: Int
    var hash: UInt64

    private static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    private static let prime: UInt64 = 0x0000_0100_0000_01b3

    /// The fingerprint of bytes already in memory.
    init(bytes: UnsafeRawBufferPointer) {
        var hasher = Hasher64()
        hasher.combine(bytes)
        size = bytes.count
        hash = hasher.value
    }

    /// The fingerprint of the file at `path`, read in 1 MiB pieces; nil when it cannot be read.
    init?(contentsOf path: String) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        var hasher = Hasher64()
        var size = 0
        while true {
            let piece: Data?
            do {
                piece = try handle.read(upToCount: 1 << 20)
            } catch {
                return nil
            }
            guard let piece, !piece.isEmpty else { break }  // nil or empty: end of file
            piece.withUnsafeBytes { hasher.combine($0) }
            size += piece.count
        }
        self.size = size
        self.hash = hasher.value
    }

    /// FNV-1a over little-endian 64-bit words; a trailing partial word is zero-padded. Pieces may have any length
    /// (a short read splits a word): bytes that do not yet fill a word wait in `pending`.
    struct Hasher64 {
        private(set) var state = FileFingerprint.offsetBasis
        private var pending: UInt64 = 0
        private var pendingCount = 0

        /// The hash of everything combined so far.
        var value: UInt64 {
            pendingCount == 0 ? state : (state ^ pending) &* FileFingerprint.prime
        }

        mutating func combine(_ bytes: UnsafeRawBufferPointer) {
            var offset = 0
            while pendingCount != 0 && offset < bytes.count { take(bytes[offset]); offset += 1 }
            while bytes.count - offset >= 8 {
                state = (state ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* FileFingerprint.prime
                offset += 8
            }
            while offset < bytes.count { take(bytes[offset]); offset += 1 }
        }

        private mutating func take(_ byte: UInt8) {
            pending |= UInt64(byte) << UInt64(pendingCount * 8)
            pendingCount += 1
            if pendingCount == 8 {
                state = (state ^ pending) &* FileFingerprint.prime
                pending = 0
                pendingCount = 0
            }
        }
    }
}
