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

    func setListener(_ context: AdminCallContext, running: Bool) async throws(AdminError) -> JSONValue {
        do {
            return try daemon.setListener(running: running)
        } catch {
            throw AdminError.internalError("cannot start the listener: \(error)")
        }
    }

    func getPrompt(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        let origin = daemon.settings?.current.commonPrompt != nil ? "control layer" : "configuration"
        return [
            "text": .string(daemon.service.currentCommonPrompt),
            "revision": .number(JSONNumber(daemon.settings?.current.revision ?? 0)),
            "origin": .string(origin),
        ]
    }

    func setPrompt(_ context: AdminCallContext, text: String, ifRevision: Int?) async throws(AdminError) -> JSONValue {
        guard let settings = daemon.settings else { throw AdminError.internalError("the control layer is not writable") }
        do {
            let saved = try await settings.setCommonPrompt(text, ifRevision: ifRevision)
            daemon.service.setCommonPrompt(text)
            return ["revision": .number(JSONNumber(saved.revision))]
        } catch {
            throw AdminError.invalidSetting(key: "commonPrompt", message: error.description)
        }
    }

    func getConfig(_ context: AdminCallContext, keys: [String], withOrigin: Bool) async throws(AdminError) -> JSONValue {
        daemon.loadedConfiguration.json(keys: keys, withOrigin: withOrigin)
    }

    func setSetting(_ context: AdminCallContext, key: String, value: String) async throws(AdminError) -> JSONValue {
        guard let settings = daemon.settings else { throw AdminError.internalError("the control layer is not writable") }
        let saved: ServerSettings
        do {
            saved = try await settings.set(key, to: value)
        } catch {
            throw AdminError.invalidSetting(key: key, message: error.description)
        }
        if let prompt = saved.commonPrompt, ServerSettings.settingNames[key] == "commonPrompt" {
            daemon.service.setCommonPrompt(prompt)
        }
        if let preference = saved.privateCloudPreference {
            daemon.registry.updateConfiguration { $0.preferPrivateCloud = preference }
        }
        if ["host", "port", "listen"].contains(ServerSettings.settingNames[key] ?? "") {
            let current = daemon.configuration.listen
            let address = HostPort(host: saved.host ?? current.host, port: saved.port ?? current.port)
            daemon.rebindIfNeeded(to: address)
        }
        return ["settings": saved.json, "listener": daemon.listenerJSON]
    }
}
