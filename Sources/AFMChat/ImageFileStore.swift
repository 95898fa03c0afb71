// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation

/// The directory of image files, one per distinct content, named `<sha256>.<ext>`.
///
/// Files are written atomically before the rows that reference them are committed, and removed after the
/// commit that dropped their last reference; a crash between the two leaves an unreferenced file, which
/// ``sweep(keeping:)`` removes later. ``HistoryStore`` runs the sweep only while no process writes image
/// files (its `images.lock`), so another writer's new or temporary files are never swept.
public struct ImageFileStore: Sendable {
    public let directory: String

    public init(directory: String) throws {
        self.directory = directory
        try AtomicFile.makeDirectories(directory, mode: 0o700)
    }

    /// The file path for a hash and MIME type.
    public func path(hash: String, mimeType: String) -> String {
        let ext =
            switch mimeType {
            case "image/jpeg": "jpg"
            case "image/webp": "webp"
            case "image/gif": "gif"
            default: "png"
            }
        return directory + "/" + hash + "." + ext
    }

    /// Writes the bytes unless a file with that content already exists.
    public func write(_ bytes: [UInt8], hash: String, mimeType: String) throws {
        let path = path(hash: hash, mimeType: mimeType)
        if FileManager.default.fileExists(atPath: path) { return }
        try AtomicFile.write(bytes, to: path, mode: 0o600)
    }

    /// The bytes of an image.
    public func read(hash: String, mimeType: String) throws -> [UInt8] {
        let path = path(hash: hash, mimeType: mimeType)
        // FileContents: Foundation's FileManager.contents(atPath:) leaks a 4 KiB buffer for an empty file.
        guard let bytes = try? FileContents.read(path: path) else {
            throw HistoryError("the image file \(path) is missing")
        }
        return bytes
    }

    /// Removes files whose hash is not in `hashes` (left by a crash between a file write and its commit),
    /// temporary files included; call it only while nobody writes image files.
    public func sweep(keeping hashes: Set<String>) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            let hash = String(name.prefix { $0 != "." })
            if !hashes.contains(hash) { try? FileManager.default.removeItem(atPath: directory + "/" + name) }
        }
    }
}
