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
/// edit ─► validate on a copy ─► encode ─► AtomicFile.write (temp, fsync, rename, fsync dir) ─► publish
///            │ invalid                          │ I/O error
///            └─► SettingsError, nothing changes  └─► SettingsError, file and memory unchanged
/// ```
/// Writes are serialized on one dispatch queue (never the cooperative pool); ``current`` is a lock-protected
/// copy that readers may take at any time. The `async` variants run the write on that queue and suspend.
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

    /// The settings file (``ConfigPaths/controlFile``).
    public let path: String
    private let state: Mutex<State>
    private let writes = DispatchQueue(label: "afm.settings-store")

    /// Opens the store, reading the file if it exists.
    ///
    /// - Throws: ``SettingsError`` when the file exists but is unreadable, malformed or from a newer version.
    public init(path: String) throws(SettingsError) {
        self.path = path
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
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .corrupt("\(path): cannot read the settings file")
        }
        let json: JSONValue
        do {
            json = try JSONParser.parse(Array(data))
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
            var settings = current
            do throws(SettingsError) {
                try edit(&settings)
            } catch {
                return .failure(error)
            }
            settings.revision += 1
            settings.migratedFromVersion = nil
            do throws(SettingsError) {
                try persist(settings)
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

    private func persist(_ settings: ServerSettings) throws(SettingsError) {
        let directory = (path as NSString).deletingLastPathComponent
        var bytes = settings.json.prettyPrinted().utf8.map { $0 }
        bytes.append(0x0A)
        do {
            try AtomicFile.makeDirectories(directory, mode: 0o755)
            try AtomicFile.write(bytes, to: path, mode: 0o644)
        } catch {
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
