// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMBackends
import AFMConfig
import AFMCore
import AFMJSON
import Foundation

/// `org.afm.Admin` for a running daemon: each method maps to one operation of `Daemon`.
struct DaemonAdminHandler: AdminHandler {
    let daemon: Daemon

    func getInfo(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        [
            "version": .string(AFMVersion.string), "abi": .string("\(AFMVersion.abiMajor).\(AFMVersion.abiMinor)"),
            "pid": .number(JSONNumber(Int(getpid()))), "started_at": .string(ISO8601DateFormatter().string(from: daemon.startedAt)),
            "level": .string(context.level.description), "uid": .number(JSONNumber(Int(context.credentials.uid))),
        ]
    }

    func getStatus(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        guard var status = daemon.statusDocument().objectValue else { return [:] }
        status["level"] = .string(context.level.description)
        status["bind_failure"] = daemon.settings?.bindFailure.map { ["address": .string($0.address), "reason": .string($0.reason)] } ?? nil
        return .object(status)
    }

    func watchCounters(_ context: AdminCallContext, intervalMilliseconds: Int) async throws(AdminError) -> AsyncStream<JSONValue> {
        let monitor = daemon.service.monitor
        let interval = max(100, min(intervalMilliseconds, 60_000))
        let wantsMore = context.wantsMore
        return AsyncStream { continuation in
            let task = Task {
                continuation.yield(monitor.json)
                guard wantsMore else {
                    continuation.finish()
                    return
                }
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(interval))
                    continuation.yield(monitor.json)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    func listBackends(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        ["backends": .array(daemon.registry.statuses().map(\.json))]
    }

    func reload(_ context: AdminCallContext, backend: String?, progress: AdminProgress) async throws(AdminError) -> JSONValue {
        progress.send(["phase": "loading", "backend": backend.map(JSONValue.string) ?? "all"])
        do {
            return try await daemon.reload(backend: backend)
        } catch {
            throw AdminError.reloadFailed(reason: error.reason, backend: error.backend, activeGeneration: error.activeGeneration)
        }
    }

    func drainListener(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        await daemon.drain()
    }

    func setListener(_ context: AdminCallContext, running: Bool) async throws(AdminError) -> JSONValue {
        do {
            return try daemon.setListener(running: running)
        } catch {
            throw AdminError.internalError("cannot start the listener: \(error)")
        }
    }

    /// The text and the revision come from one snapshot of the control layer, so `ifRevision` guards the text
    /// the caller saw; without a prompt in the control layer, the configuration's prompt in force.
    func getPrompt(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        let saved = daemon.settings?.current
        return [
            "text": .string(saved?.commonPrompt ?? daemon.service.currentCommonPrompt),
            "revision": .number(JSONNumber(saved?.revision ?? 0)),
            "origin": .string(saved?.commonPrompt != nil ? "control layer" : "configuration"),
        ]
    }

    func setPrompt(_ context: AdminCallContext, text: String, ifRevision: Int?) async throws(AdminError) -> JSONValue {
        guard let settings = daemon.settings else { throw AdminError.internalError("the control layer is not writable") }
        let before = settings.current
        do throws(SettingsError) {
            let saved = try await settings.setCommonPrompt(text, ifRevision: ifRevision)
            apply(saved, before: before, key: "commonPrompt")
            return ["revision": .number(JSONNumber(saved.revision))]
        } catch .notDurable(let message) {
            throw notDurable(key: "commonPrompt", message: message, settings: settings, before: before)
        } catch {
            throw AdminError.invalidSetting(key: "commonPrompt", message: error.description)
        }
    }

    func getConfig(_ context: AdminCallContext, keys: [String], withOrigin: Bool) async throws(AdminError) -> JSONValue {
        daemon.loadedConfiguration.json(keys: keys, withOrigin: withOrigin)
    }

    func setSetting(_ context: AdminCallContext, key: String, value: String) async throws(AdminError) -> JSONValue {
        guard let settings = daemon.settings else { throw AdminError.internalError("the control layer is not writable") }
        let before = settings.current
        let saved: ServerSettings
        do throws(SettingsError) {
            saved = try await settings.set(key, to: value)
        } catch .notDurable(let message) {
            throw notDurable(key: key, message: message, settings: settings, before: before)
        } catch {
            throw AdminError.invalidSetting(key: key, message: error.description)
        }
        apply(saved, before: before, key: key)
        return ["settings": saved.json, "listener": daemon.listenerJSON]
    }

    /// Puts saved settings in force, whole: an edit starts from the file on disk, so `saved` also holds what a hand
    /// edit changed since the last reload (a prompt, the preference, the address), and applying only the edited
    /// key would leave the daemon serving one prompt while `GetPrompt` and `ifRevision` speak of another.
    ///
    /// - Parameters:
    ///   - before: the control layer before the edit; the listener is rebound when the address changed.
    ///   - key: the setting edited (`commonPrompt` for `SetPrompt`).
    private func apply(_ saved: ServerSettings, before: ServerSettings, key: String) {
        if let prompt = saved.commonPrompt { daemon.service.setCommonPrompt(prompt) }
        if let preference = saved.privateCloudPreference {
            daemon.registry.updateConfiguration { $0.preferPrivateCloud = preference }
        }
        let edited = ServerSettings.settingNames[key] ?? ""
        if ["host", "port", "listen"].contains(edited) || saved.host != before.host || saved.port != before.port {
            // A saved host or port moves a Unix-socket listener to TCP; the missing part comes from the default.
            let current = daemon.configuration.listen.hostPort ?? HostPort(host: "127.0.0.1", port: 11535)
            daemon.rebindIfNeeded(to: .tcp(HostPort(host: saved.host ?? current.host, port: saved.port ?? current.port)))
        }
    }

    /// The file was replaced with the edit but its directory's `fsync` failed: the edit is in the file and in
    /// `current`, so it is put in force like any other, and the caller is told its durability is in doubt.
    private func notDurable(key: String, message: String, settings: SettingsStore, before: ServerSettings) -> AdminError {
        let saved = settings.current
        apply(saved, before: before, key: key)
        return AdminError.settingNotDurable(
            key: key, message: SettingsError.notDurable(message).description, revision: saved.revision)
    }
}
