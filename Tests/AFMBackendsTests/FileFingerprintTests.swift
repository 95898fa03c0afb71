// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation
import Testing

@testable import AFMBackends

/// The fingerprint a reload compares a backend library against (instead of keeping the library's bytes).
@Suite struct FileFingerprintTests {
    let directory = TestPaths.makeTemporaryDirectory("afm-fingerprint")

    func write(_ bytes: [UInt8], _ name: String = "lib.so") throws -> String {
        let path = directory + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: [0, 1, 7, 8, 9, 1 << 20, (1 << 20) + 3, 3 * (1 << 20) + 5])
    func aFileAndItsBytesInMemoryAgree(size: Int) throws {
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        let path = try write(bytes)
        let fromFile = try #require(FileFingerprint(contentsOf: path))
        let fromMemory = bytes.withUnsafeBytes { FileFingerprint(bytes: $0) }
        #expect(fromFile == fromMemory)
        #expect(fromFile.size == size)
    }

    @Test func rewritingTheSameBytesIsNoChangeAndAnyChangedByteIs() throws {
        var bytes = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let original = try #require(FileFingerprint(contentsOf: try write(bytes)))
        #expect(FileFingerprint(contentsOf: try write(bytes)) == original)
        for position in [0, 8, 50_000, 100_000, 100_002] {
            bytes[position] ^= 0x01
            #expect(FileFingerprint(contentsOf: try write(bytes)) != original, "byte \(position)")
            bytes[position] ^= 0x01
        }
        // A trailing zero byte is a different file, not the same padded word.
        #expect(FileFingerprint(contentsOf: try write(bytes + [0])) != original)
    }

    /// A read may return fewer bytes than asked; the hash must not depend on where the pieces split.
    @Test func pieceBoundariesDoNotChangeTheHash() {
        let bytes = (0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        let whole = bytes.withUnsafeBytes { FileFingerprint(bytes: $0) }
        for sizes in [[1, 999], [3, 5, 7, 985], [8, 8, 984], [999, 1], [500, 500]] {
            var hasher = FileFingerprint.Hasher64()
            var start = 0
            for size in sizes {
                bytes[start..<start + size].withUnsafeBytes { hasher.combine($0) }
                start += size
            }
            #expect(hasher.value == whole.hash, "pieces \(sizes)")
        }
    }

    @Test func aMissingFileHasNoFingerprint() {
        #expect(FileFingerprint(contentsOf: directory + "/absent.so") == nil)
    }
}
