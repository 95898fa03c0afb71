// SPDX-License-Identifier: Apache-2.0
import AFMChat
import Foundation

/// The chat archive importer (`afm chat --import`), fed `conversations.json` (next to an `Images/` folder holding
/// one real PNG, `cat.png`).
///
/// Properties: an archive is imported completely or not at all (the history's conversation count grows by
/// exactly what the import reports, or not at all), and importing the same archive again changes nothing.
enum ChatArchiveFuzz {
    static func run(_ bytes: [UInt8]) throws {
        let fixture = try Fixture.shared()
        try Data(bytes).write(to: URL(fileURLWithPath: fixture.archive + "/conversations.json"))
        let before = try fixture.store.conversationCount()
        let outcome: ArchiveImporter.Outcome
        do {
            outcome = try ArchiveImporter(store: fixture.store).importArchive(at: fixture.archive)
        } catch {
            try check(try fixture.store.conversationCount() == before, "a failed import left conversations behind: \(error)")
            return
        }
        let after = try fixture.store.conversationCount()
        try check(
            after == before + (outcome.alreadyImported ? 0 : outcome.conversations),
            "an import reported \(outcome.conversations) conversations; the history grew by \(after - before)")
        let again = try ArchiveImporter(store: fixture.store).importArchive(at: fixture.archive)
        try check(again.alreadyImported, "importing the same archive twice imported it again")
        try check(try fixture.store.conversationCount() == after, "a repeated import changed the history")
    }

    /// One history and one archive directory per process (an import is a transaction; the history grows).
    final class Fixture: @unchecked Sendable {
        let archive: String
        let store: HistoryStore

        private init() throws {
            let root = NSTemporaryDirectory() + "afm-fuzz-archive-\(getpid())"
            try? FileManager.default.removeItem(atPath: root)
            archive = root + "/archive"
            try FileManager.default.createDirectory(atPath: archive + "/Images", withIntermediateDirectories: true)
            try Data(onePixelPNG).write(to: URL(fileURLWithPath: archive + "/Images/cat.png"))
            store = try HistoryStore(directory: root + "/history")
        }

        nonisolated(unsafe) private static var instance: Fixture?

        static func shared() throws -> Fixture {
            if let instance { return instance }
            let made = try Fixture()
            instance = made
            return made
        }
    }

    /// A valid 1×1 PNG.
    static let onePixelPNG: [UInt8] = [
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
        0xDE, 0x00, 0x00, 0x00, 0x0C, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0x00,
        0x00, 0x03, 0x01, 0x01, 0x00, 0xC9, 0xFE, 0x92, 0xEF, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E,
        0x44, 0xAE, 0x42, 0x60, 0x82,
    ]
}
