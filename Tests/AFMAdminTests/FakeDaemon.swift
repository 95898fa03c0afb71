// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMJSON
import Synchronization

/// A test double of the daemon behind the admin socket: fixed replies, and a log of what was called.
final class FakeDaemon: AdminHandler {
    let calls = Mutex<[String]>([])
    let prompt = Mutex<(text: String, revision: Int)>(("Be brief.", 1))

    private func record(_ context: AdminCallContext) { calls.withLock { $0.append(context.method.rawValue) } }

    func getInfo(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        record(context)
        return ["version": "test", "level": .string(context.level.description)]
    }

    func getStatus(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        record(context)
        return ["listener": ["state": "running", "address": "127.0.0.1:1"], "uid": .number(JSONNumber(Int(context.credentials.uid)))]
    }

    func watchCounters(_ context: AdminCallContext, intervalMilliseconds: Int) async throws(AdminError) -> AsyncStream<JSONValue> {
        record(context)
        return AsyncStream { continuation in
            for tick in 1...3 { continuation.yield(["tokensOut": .number(JSONNumber(tick * 10)), "interval": .number(JSONNumber(intervalMilliseconds))]) }
            continuation.finish()
        }
    }

    func listBackends(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        record(context)
        return ["backends": [["id": "scripted", "state": "ready", "generation": 1]]]
    }

    func reload(_ context: AdminCallContext, backend: String?, progress: AdminProgress) async throws(AdminError) -> JSONValue {
        record(context)
        progress.send(["phase": "loading", "backend": .string(backend ?? "all")])
        progress.send(["phase": "smoke-test", "backend": .string(backend ?? "all")])
        if backend == "broken" { throw .reloadFailed(reason: "dlopen failed", backend: backend, activeGeneration: 1) }
        return ["generation": 2]
    }

    func setListener(_ context: AdminCallContext, running: Bool) async throws(AdminError) -> JSONValue {
        record(context)
        return ["state": running ? "running" : "stopped"]
    }

    func getPrompt(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        record(context)
        let current = prompt.withLock { $0 }
        return ["text": .string(current.text), "revision": .number(JSONNumber(current.revision))]
    }

    func setPrompt(_ context: AdminCallContext, text: String, ifRevision: Int?) async throws(AdminError) -> JSONValue {
        record(context)
        let revision = prompt.withLock { state -> Int in
            state = (text, state.revision + 1)
            return state.revision
        }
        return ["revision": .number(JSONNumber(revision))]
    }

    func getConfig(_ context: AdminCallContext, keys: [String], withOrigin: Bool) async throws(AdminError) -> JSONValue {
        record(context)
        return ["values": [["key": "Server.Listen", "value": "127.0.0.1:1", "origin": "default"]]]
    }

    func setSetting(_ context: AdminCallContext, key: String, value: String) async throws(AdminError) -> JSONValue {
        record(context)
        guard key == "port", Int(value) != nil else { throw .invalidSetting(key: key, message: "bad \(key)") }
        return ["key": .string(key), "value": .string(value)]
    }
}
