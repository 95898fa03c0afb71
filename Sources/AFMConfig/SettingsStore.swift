// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import Dispatch
import Foundation
import Synchronization

/// The control layer on disk: reads, validates and atomically rewrites the ``ServerSettings`` file, and
/// remembers (in memory) the last listener bind failure so status can show it.
///
/// ```
/// re-read file ─► edit ─► validate on a copy ─► encode ─► AtomicFile.write (temp, fsync, rename, fsync dir) ─► publish
///  │ corrupt         │ invalid                              │ I/O error before the rename
///  └─► SettingsError └─► SettingsError, nothing changes     ├─► .writeFailed, file and memory unchanged
///                                                           │ fsync of the directory failed after the rename
///                                                           └─► .notDurable, file and memory hold the edit
/// ```
/// Every edit starts from the file as it is on disk, not from the copy in memory: an operator may have edited
/// the file by hand (and run `afmctl reload`), and an edit based on a stale copy would silently revert that, and
/// check `ifRevision` against a stale revision. Writes are serialized on one dispatch queue (never the cooperative
/// pool); ``current`` is a lock-protected copy that readers may take at any time, refreshed by every edit and by
/// ``reload()``. The `async` variants run the write on that queue and suspend.
public final class SettingsStore: Sendable {
    /// A listener bind that failed for the saved address, kept so `GetStatus` can show it.
    public struct BindFailure: Sendable, Hashable {
        /// The address that could not be bound (`HOST:PORT`).
        public var address: String
        /// Why (`bind: Cannot assign requested address (errno 99)`).
        public var reason: String
        /// When it happened.
        public var time: Date

        /// Creates a record.
        public init(address: String, reason: String, time: Date = Date()) {
            self.address = address
            self.reason = reason
            self.time = time
        }
    }

    private struct State {
        var current: ServerSettings
        var bindFailure: BindFailure?
    }

    /// Replaces a file crash-safely: ``AtomicFile/write(_:to:mode:)``, or a test's wrapper of it.
    package typealias FileWriter = @Sendable (_ bytes: [UInt8], _ path: String, _ mode: UInt32) throws(SystemCallError) -> Void

    /// The settings file (``ConfigPaths/controlFile``).
    public let path: String
    private let state: Mutex<State>
    private let writes = DispatchQueue(label: "afm.settings-store")
    private let writer: FileWriter

    /// Opens the store, reading the file if it exists.
    ///
    /// - Throws: ``SettingsError`` when the file exists but is unreadable, malformed or from a newer version.
    public convenience init(path: String) throws(SettingsError) {
        try self.init(path: path) { (bytes, path, mode) throws(SystemCallError) in
            try AtomicFile.write(bytes, to: path, mode: mode)
        }
    }

    /// Opens the store with another way to replace the file: tests use it to make a step fail as the kernel can
    /// (an `fsync` of the directory after the rename), which no file system here does on demand.
    package init(path: String, writer: @escaping FileWriter) throws(SettingsError) {
        self.path = path
        self.writer = writer
        state = Mutex(State(current: try Self.read(path: path) ?? ServerSettings()))
        removeLeftoverTemporaryFiles()
    }

    /// A writer killed between creating and renaming its temporary file leaves `.NAME.tmp-*` behind; the
    /// settings file itself is intact, so the leftovers are only clutter.
    private func removeLeftoverTemporaryFiles() {
        let directory = (path as NSString).deletingLastPathComponent
        let prefix = "." + (path as NSString).lastPathComponent + ".tmp-"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix(prefix) {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }

    /// Reads and migrates the settings file at `path`; `nil` when there is no file.
    public static func read(path: String) throws(SettingsError) -> ServerSettings? {
        let data: [UInt8]
        do throws(SystemCallError) {
            data = try FileContents.read(path: path)
        } catch {
            if error.errno.rawValue == ENOENT { return nil }
            throw .corrupt("\(path): cannot read the settings file: \(error)")
        }
        let json: JSONValue
        do {
            json = try JSONParser.parse(data)
        } catch {
            throw .corrupt("\(path): not valid JSON (\(error))")
        }
        do {
            return try ServerSettings(json: json)
        } catch .corrupt(let message) {
            throw .corrupt("\(path): \(message)")
        }
    }

    /// The last valid settings.
    public var current: ServerSettings { state.withLock { $0.current } }

    /// Re-reads the file (after a hand edit; the daemon calls it on reload) and publishes what it holds.
    ///
    /// A removed file means the defaults, at the revision in memory (revisions never go back).
    /// - Returns: the settings now current.
    /// - Throws: ``SettingsError`` when the file is unreadable, malformed or from a newer version; the copy in
    ///   memory is kept then.
    @discardableResult
    public func reload() throws(SettingsError) -> ServerSettings {
        let result: Result<ServerSettings, SettingsError> = writes.sync {
            do throws(SettingsError) {
                let settings = try onDisk()
                state.withLock { $0.current = settings }
                return .success(settings)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The file's settings, or the defaults at the current revision when there is no file. Runs on `writes`.
    private func onDisk() throws(SettingsError) -> ServerSettings {
        if let settings = try Self.read(path: path) { return settings }
        var defaults = ServerSettings()
        defaults.revision = current.revision
        return defaults
    }

    // MARK: - Edits

    /// Validates and saves one edit (see ``ServerSettings/settingNames``). Blocks for the `fsync`.
    ///
    /// - Returns: the saved settings.
    /// - Throws: ``SettingsError``; the previous settings stay in force, on disk and in memory.
    @discardableResult
    public func set(_ name: String, to value: String) throws(SettingsError) -> ServerSettings {
        try update { (settings) throws(SettingsError) in try settings.apply(name, value) }
    }

    /// Saves a new common prompt; with `ifRevision`, only when the settings are still at that revision.
    @discardableResult
    public func setCommonPrompt(_ text: String, ifRevision: Int? = nil) throws(SettingsError) -> ServerSettings {
        try update { (settings) throws(SettingsError) in
            if let ifRevision, ifRevision != settings.revision {
                throw .revisionMismatch(expected: ifRevision, actual: settings.revision)
            }
            settings.commonPrompt = text
        }
    }

    /// Applies `edit` to a copy of the current settings, writes the result atomically, then publishes it.
    @discardableResult
    public func update(_ edit: (inout ServerSettings) throws(SettingsError) -> Void) throws(SettingsError)
        -> ServerSettings
    {
        let result: Result<ServerSettings, SettingsError> = writes.sync {
            var settings: ServerSettings
            do throws(SettingsError) {
                // The file, not the copy in memory: a hand edit since the last write must survive this one.
                settings = try onDisk()
                state.withLock { $0.current = settings }
                try edit(&settings)
            } catch {
                return .failure(error)
            }
            // A hand-edited file may sit at the largest revision: refuse, never trap on the `+ 1`.
            guard settings.revision < ServerSettings.maximumRevision else {
                return .failure(
                    .corrupt("\(path): 'revision' is at its maximum (\(ServerSettings.maximumRevision)); set it lower by hand"))
            }
            settings.revision += 1
            settings.migratedFromVersion = nil
            do throws(SettingsError) {
                try persist(settings)
            } catch .notDurable(let message) {
                // The file holds the edit (only its durability is in doubt), so memory must match it.
                state.withLock { $0.current = settings }
                return .failure(.notDurable(message))
            } catch {
                return .failure(error)
            }
            state.withLock { $0.current = settings }
            return .success(settings)
        }
        return try result.get()
    }

    /// ``set(_:to:)`` without blocking the caller's thread: the write runs on the store's queue.
    @discardableResult
    public func set(_ name: String, to value: String) async throws(SettingsError) -> ServerSettings {
        try await background { () throws(SettingsError) in try self.set(name, to: value) }
    }

    /// ``reload()`` without blocking the caller's thread.
    @discardableResult
    public func reload() async throws(SettingsError) -> ServerSettings {
        try await background { () throws(SettingsError) in try self.reload() }
    }

    /// ``setCommonPrompt(_:ifRevision:)`` without blocking the caller's thread.
    @discardableResult
    public func setCommonPrompt(_ text: String, ifRevision: Int? = nil) async throws(SettingsError) -> ServerSettings {
        try await background { () throws(SettingsError) in try self.setCommonPrompt(text, ifRevision: ifRevision) }
    }

    private func background(
        _ body: @escaping @Sendable () throws(SettingsError) -> ServerSettings
    ) async throws(SettingsError) -> ServerSettings {
        let result: Result<ServerSettings, SettingsError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do throws(SettingsError) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Writes `settings`; tells a failure before the rename (file unchanged) from one after it (file replaced).
    private func persist(_ settings: ServerSettings) throws(SettingsError) {
        let directory = (path as NSString).deletingLastPathComponent
        var bytes = settings.json.prettyPrinted().utf8.map { $0 }
        bytes.append(0x0A)
        do {
            try AtomicFile.makeDirectories(directory, mode: 0o755)
            try writer(bytes, path, 0o644)
        } catch {
            // Only the rename changes the file, so if it now holds exactly these bytes the failure came after it
            // (the directory's fsync): the edit is in place, it is its durability that is not assured.
            if (try? FileContents.read(path: path)) == bytes {
                throw .notDurable("\(path): \(error)")
            }
            throw .writeFailed("\(path): \(error)")
        }
    }

    // MARK: - Bind failures

    /// Records that the listener could not bind the saved address (or, with `nil`, that it now could).
    ///
    /// The saved host is never dropped because of a bind failure: a LAN address whose interface is down
    /// comes back when the interface does, on the next `listener start` or reload.
    public func recordBindFailure(_ failure: BindFailure?) {
        state.withLock { $0.bindFailure = failure }
    }

    /// The last recorded bind failure, if the listener is not bound to the saved address.
    public var bindFailure: BindFailure? { state.withLock { $0.bindFailure } }

    /// `{"revision":…,"settings":{…},"bindFailure":{"address","reason","time"}|null}` for status replies.
    public var statusJSON: JSONValue {
        let (settings, failure) = state.withLock { ($0.current, $0.bindFailure) }
        let failureJSON: JSONValue =
            failure.map { failure in
                [
                    "address": .string(failure.address), "reason": .string(failure.reason),
                    "time": .string(failure.time.formatted(.iso8601)),
                ]
            } ?? .null
        return ["path": .string(path), "settings": settings.json, "bindFailure": failureJSON]
    }
}
