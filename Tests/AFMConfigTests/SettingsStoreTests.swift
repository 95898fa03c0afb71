// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import AFMJSON
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

@Suite struct SettingsStoreTests {
    @Test func editsAreSavedAsVersionOneAndReadBack() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.paths.controlFile
        let store = try SettingsStore(path: path)
        #expect(store.current == ServerSettings())
        try store.set("host", to: "192.168.7.7")
        try store.set("port", to: "8080")
        try store.set("cloud", to: "yes")
        let saved = try store.setCommonPrompt("Be brief.")
        #expect(saved.revision == 4)
        let json = try JSONParser.parse(try String(contentsOfFile: path, encoding: .utf8))
        #expect(json["schema"]?.stringValue == "AFM.serverSettings.v1")
        #expect(json["version"]?.numberValue?.intValue == 1)
        #expect(json["host"]?.stringValue == "192.168.7.7")
        #expect(json["port"]?.numberValue?.intValue == 8080)
        #expect(json["privateCloudPreference"]?.boolValue == true)
        #expect(json["commonPrompt"]?.stringValue == "Be brief.")
        #expect(try SettingsStore(path: path).current == saved)
        #expect(try tree.load().listen == .tcp(HostPort(host: "192.168.7.7", port: 8080)))
    }

    @Test(arguments: [
        ("port", "0"), ("port", "65536"), ("port", "http"), ("host", "not a host"), ("host", "999.1.1.1"),
        ("host", "example.com"), ("listen", "1.2.3.4"), ("listen", "1.2.3.4:0"), ("cloud", "perhaps"), ("colour", "red"),
    ])
    func invalidEditsNeverReplaceTheLastValidValue(name: String, value: String) throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.paths.controlFile
        let store = try SettingsStore(path: path)
        try store.set("listen", to: "127.0.0.1:9000")
        let before = try String(contentsOfFile: path, encoding: .utf8)
        #expect(throws: SettingsError.self) { try store.set(name, to: value) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == before)
        #expect(store.current.port == 9000)
        #expect(store.current.host == "127.0.0.1")
    }

    @Test func invalidEditMessagesAreClear() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let store = try SettingsStore(path: tree.paths.controlFile)
        let portError = try #require(throws: SettingsError.self) { try store.set("port", to: "99999") }
        #expect(portError.description == "port: port must be between 1 and 65535, not 99999")
        let hostError = try #require(throws: SettingsError.self) { try store.set("host", to: "bad host") }
        #expect(hostError.description == "host: host must be an IPv4 or IPv6 address or localhost, not 'bad host'")
    }

    @Test func versionZeroIsMigratedOnRead() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.write("var/lib/afm/control.json", #"{"listen":"10.1.2.3:7000","cloud":"on","prompt":"Hi"}"#)
        let store = try SettingsStore(path: path)
        #expect(store.current.host == "10.1.2.3")
        #expect(store.current.port == 7000)
        #expect(store.current.privateCloudPreference == true)
        #expect(store.current.commonPrompt == "Hi")
        #expect(store.current.migratedFromVersion == 0)
        // The loader sees the migrated values, and the next write stores version 1.
        #expect(try tree.load().listen == .tcp(HostPort(host: "10.1.2.3", port: 7000)))
        try store.set("port", to: "7001")
        let json = try JSONParser.parse(try String(contentsOfFile: path, encoding: .utf8))
        #expect(json["version"]?.numberValue?.intValue == 1)
        #expect(json["listen"] == nil)
        #expect(json["commonPrompt"]?.stringValue == "Hi")
    }

    @Test func newerVersionsAndCorruptFilesAreRefused() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.write("var/lib/afm/control.json", #"{"schema":"AFM.serverSettings.v1","version":2}"#)
        #expect(throws: SettingsError.newerVersion(2)) { try SettingsStore(path: path) }
        tree.write("var/lib/afm/control.json", #"{"version":1,"port":"x"}"#)
        #expect(throws: SettingsError.self) { try SettingsStore(path: path) }
        tree.write("var/lib/afm/control.json", "{trunc")
        #expect(throws: SettingsError.self) { try SettingsStore(path: path) }
    }

    @Test func aLANHostWithoutItsInterfaceIsKeptAndTheBindFailureIsVisible() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let store = try SettingsStore(path: tree.paths.controlFile)
        // 192.0.2.0/24 is TEST-NET-1: never configured on this machine, so a bind would fail.
        try store.set("listen", to: "192.0.2.55:11535")
        store.recordBindFailure(.init(address: "192.0.2.55:11535", reason: "bind: Cannot assign requested address"))
        let reopened = try SettingsStore(path: tree.paths.controlFile)
        #expect(reopened.current.host == "192.0.2.55")
        #expect(store.statusJSON["bindFailure"]?["address"]?.stringValue == "192.0.2.55:11535")
        #expect(store.statusJSON["settings"]?["host"]?.stringValue == "192.0.2.55")
        store.recordBindFailure(nil)
        #expect(store.statusJSON["bindFailure"] == .null)
    }

    @Test func promptRevisionGuardsConcurrentEdits() async throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let store = try SettingsStore(path: tree.paths.controlFile)
        let first = try await store.setCommonPrompt("one")
        _ = try await store.setCommonPrompt("two", ifRevision: first.revision)
        await #expect(throws: SettingsError.revisionMismatch(expected: first.revision, actual: first.revision + 1)) {
            try await store.setCommonPrompt("three", ifRevision: first.revision)
        }
        #expect(store.current.commonPrompt == "two")
    }

    @Test func concurrentEditsAreSerialized() async throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let store = try SettingsStore(path: tree.paths.controlFile)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask { _ = try await store.set("port", to: String(2000 + index)) }
            }
            try await group.waitForAll()
        }
        #expect(store.current.revision == 20)
        #expect(try SettingsStore(path: tree.paths.controlFile).current == store.current)
    }

    /// kill -9 during writes: a child process rewrites the file in a loop and is killed at random times once it
    /// writes, 50 rounds; the file must always be one complete version.
    @Test func killDuringWritesLeavesTheOldOrTheNewVersion() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.paths.controlFile
        try SettingsStore(path: path).setCommonPrompt(String(repeating: "b", count: 65_536))
        var lastRevision = 1
        for _ in 0..<50 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afm-atomic-writer")
            process.arguments = [path]
            process.standardError = FileHandle.nullDevice
            try process.run()
            // The random kill comes once the writer is in its loop (its first write landed): a fixed time after
            // the start was sometimes all start-up (under AddressSanitizer every kill came before the first write).
            let started = Date()
            while (try? SettingsStore.read(path: path))?.revision ?? 0 <= lastRevision, process.isRunning,
                Date().timeIntervalSince(started) < 30
            {
                usleep(1_000)
            }
            usleep(UInt32.random(in: 0...20_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal, "the writer must have been killed, not have failed")
            let settings = try #require(try SettingsStore.read(path: path))
            let prompt = try #require(settings.commonPrompt)
            let expected = Character(UnicodeScalar(UInt8(97 + settings.revision % 26)))
            #expect(prompt.count == 65_536)
            #expect(prompt.allSatisfy { $0 == expected }, "torn file at revision \(settings.revision)")
            #expect(settings.revision >= lastRevision)
            lastRevision = settings.revision
        }
        #expect(lastRevision > 1, "the writer never completed a write")
    }

    /// A hand edit of the file (then `afmctl reload`) is the new base: the next edit keeps it, and `ifRevision` is
    /// checked against the file's revision, not a stale copy in memory.
    @Test func aHandEditIsKeptByTheNextEdit() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.paths.controlFile
        let store = try SettingsStore(path: path)
        try store.set("port", to: "8080")
        try #"{"schema":"AFM.serverSettings.v1","version":1,"revision":5,"port":8080,"commonPrompt":"by hand"}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        let saved = try store.set("host", to: "127.0.0.1")
        #expect(saved.revision == 6)
        #expect(saved.commonPrompt == "by hand")
        let file = try #require(try SettingsStore.read(path: path))
        #expect(file == saved)
        #expect(file.commonPrompt == "by hand" && file.port == 8080 && file.host == "127.0.0.1")
        #expect(throws: SettingsError.revisionMismatch(expected: 1, actual: 6)) { try store.setCommonPrompt("x", ifRevision: 1) }
        #expect(try store.setCommonPrompt("after", ifRevision: 6).revision == 7)
        #expect(store.current.commonPrompt == "after")
    }

    /// `reload()` publishes the hand edit; a broken hand edit is refused by the next edit, never overwritten.
    @Test func reloadReadsTheFileAndABrokenHandEditIsNotOverwritten() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.paths.controlFile
        let store = try SettingsStore(path: path)
        try store.set("port", to: "8080")
        try #"{"schema":"AFM.serverSettings.v1","version":1,"revision":3,"port":9090}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try store.reload().port == 9090)
        #expect(store.current.revision == 3)
        try #"{"schema":"AFM.serverSettings.v1","version":1,"#.write(toFile: path, atomically: true, encoding: .utf8)
        let error = try #require(throws: SettingsError.self) { try store.set("host", to: "127.0.0.1") }
        #expect(error.description.contains("not valid JSON"))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == #"{"schema":"AFM.serverSettings.v1","version":1,"#)
    }

    /// The directory's fsync fails after the rename (as the kernel may report EIO): the file holds the edit, so
    /// the error must not say it is unchanged, and memory must match the file.
    @Test func aFailureAfterTheRenameSaysTheFileChanged() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.paths.controlFile
        let store = try SettingsStore(path: path) { (bytes, path, mode) throws(SystemCallError) in
            try AtomicFile.write(bytes, to: path, mode: mode)
            throw SystemCallError(call: "fsync", errno: Errno(rawValue: EIO))
        }
        let error = try #require(throws: SettingsError.self) { try store.set("port", to: "8080") }
        #expect(error == .notDurable("\(path): `fsync`: Input/output error (errno 5)"))
        #expect(!error.description.contains("unchanged"))
        #expect(error.description.contains("the file holds the change"))
        #expect(try SettingsStore.read(path: path)?.port == 8080)
        #expect(store.current.port == 8080 && store.current.revision == 1)

        let failing = try SettingsStore(path: path) { (_, _, _) throws(SystemCallError) in
            throw SystemCallError(call: "open", errno: Errno(rawValue: ENOSPC))
        }
        let unchanged = try #require(throws: SettingsError.self) { try failing.set("port", to: "9090") }
        #expect(unchanged.description == "cannot save settings (the file is unchanged): \(path): `open`: No space left on device (errno 28)")
        #expect(try SettingsStore.read(path: path)?.port == 8080)
        #expect(failing.current.port == 8080)
    }

    /// A hand-edited revision at `Int.max` used to trap on the next edit's `+ 1` (afmd aborted on
    /// `settings set`); a negative, fractional or non-numeric one was taken as is or as 0. Each is a corrupt file
    /// now: a clear error, and the file is not overwritten.
    @Test(arguments: ["9223372036854775807", "9007199254740992", "-1", "1.5", "\"7\""])
    func aRevisionOutOfRangeIsACorruptFileNotATrap(revision: String) throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.paths.controlFile
        let store = try SettingsStore(path: path)
        try store.set("port", to: "9000")
        let text = #"{"schema":"AFM.serverSettings.v1","version":1,"revision":\#(revision),"commonPrompt":"By hand."}"#
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let error = try #require(throws: SettingsError.self) { try store.set("port", to: "8080") }
        guard case .corrupt(let message) = error else {
            Issue.record("expected .corrupt, got \(error)")
            return
        }
        #expect(message.contains("'revision' must be an integer from 0 to 9007199254740991"), "\(message)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == text)
        #expect(throws: SettingsError.self) { try store.setCommonPrompt("x") }
        #expect(store.current.port == 9000)
    }

    /// The largest revision the file may hold is still edited once more without a trap only if that stays in
    /// range; at the maximum, the edit is refused instead.
    @Test func anEditAtTheLargestRevisionIsRefused() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let path = tree.paths.controlFile
        let store = try SettingsStore(path: path)
        try store.set("port", to: "9000")
        let text = #"{"schema":"AFM.serverSettings.v1","version":1,"revision":9007199254740991}"#
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let error = try #require(throws: SettingsError.self) { try store.set("port", to: "8080") }
        #expect(error.description.contains("revision"), "\(error)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == text)
    }
}
