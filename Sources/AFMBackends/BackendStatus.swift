// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// A point-in-time view of one backend, for `/status`, the admin socket and logs.
public struct BackendStatus: Sendable {
    /// `ready`, `unavailable` (loaded but says it cannot serve), `failed` (never loaded), `loading`, `disabled`,
    /// `restarting` (its runner crashed; a restart is pending) or `crash_loop` (restarting after many crashes).
    public var state: String
    public var id: String
    public var reason: String?
    public var reasonCode: String?
    public var version: String?
    public var hosting: String?
    public var library: String?
    public var generation: UInt64?
    public var inflight: Int
    public var completed: UInt64
    /// Generations still finishing requests after a reload: (number, requests in flight).
    public var draining: [(generation: UInt64, inflight: Int)]
    public var models: [BackendDescription.Model]
    /// Extra fields of the backend's describe document (e.g. upstream health, quota).
    public var details: JSONObject
    /// The runner's process id, when the active generation runs in a runner.
    public var runnerPID: Int32?
    /// The last runner crash (`signal`, `exit_status`, `at`, `crashes`, `restarts`…), or null.
    public var lastCrash: JSONValue
    /// Crashes since the daemon started.
    public var crashes: Int
    /// Successful restarts after runner crashes since the daemon started.
    public var restarts: Int
    /// Seconds until a pending restart, when one is pending.
    public var restartInSeconds: Int?

    init(id: String, slot: BackendRegistry.Slot, disabled: Bool, crashLoopThreshold: Int) {
        self.id = id
        let active = slot.active
        self.runnerPID = active?.snapshot.phase == .crashed ? nil : active?.processID
        self.lastCrash = slot.crashes.json
        self.crashes = slot.crashes.total
        self.restarts = slot.crashes.restarts
        let snapshot = active?.snapshot
        self.generation = active?.number
        self.inflight = snapshot?.inflight ?? 0
        self.completed = snapshot?.completed ?? 0
        self.version = active?.description.version ?? slot.manifest?.version
        self.hosting = active?.hosting.rawValue ?? slot.manifest?.hosting.rawValue
        self.library = slot.library?.sourcePath ?? slot.manifest?.libraryPath
        self.models = active?.description.models ?? []
        self.details = active?.description.details ?? [:]
        self.draining = slot.draining.compactMap { generation in
            let snapshot = generation.snapshot
            return snapshot.phase == .retired ? nil : (generation.number, snapshot.inflight)
        }
        if disabled {
            state = "disabled"
            reason = "disabled in the configuration"
            reasonCode = "disabled"
        } else if let active, active.snapshot.phase == .crashed {
            let loop = slot.crashes.recent.count >= crashLoopThreshold
            state = loop ? "crash_loop" : "restarting"
            reason = slot.crashes.last.map { "runner crashed (\($0.exit.summary)); restarting" }
            reasonCode = loop ? "crash_loop" : "backend_crashed"
            restartInSeconds = slot.crashes.secondsUntilRestart()
        } else if let active {
            if active.description.available {
                state = "ready"
                reason = slot.lastError.map { "last reload failed: \($0.message)" }
                reasonCode = slot.lastError?.reason
            } else {
                state = "unavailable"
                reason = active.description.reason ?? "the backend reports it is unavailable"
                reasonCode = active.description.reasonCode ?? "unavailable"
            }
        } else if let error = slot.lastError {
            state = "failed"
            reason = error.description
            reasonCode = error.reason
        } else {
            state = "loading"
            reason = nil
            reasonCode = nil
        }
    }

    /// The JSON object `/status` shows for this backend.
    public var json: JSONValue {
        var object: JSONObject = [
            "id": .string(id),
            "state": .string(state),
            "reason": reason.map(JSONValue.string) ?? .null,
            "reason_code": reasonCode.map(JSONValue.string) ?? .null,
            "version": version.map(JSONValue.string) ?? .null,
            "hosting": hosting.map(JSONValue.string) ?? .null,
            "generation": generation.map { .number(JSONNumber(Int($0))) } ?? .null,
            "inflight": .number(JSONNumber(inflight)),
            "completed": .number(JSONNumber(Int(completed))),
        ]
        object["draining"] = .array(
            draining.map { ["generation": .number(JSONNumber(Int($0.generation))), "inflight": .number(JSONNumber($0.inflight))] })
        object["models"] = .array(models.map { .string($0.id) })
        object["runner_pid"] = runnerPID.map { .number(JSONNumber(Int($0))) } ?? .null
        object["last_crash"] = lastCrash
        object["restart_in_s"] = restartInSeconds.map { .number(JSONNumber($0)) } ?? .null
        for (key, value) in details where object[key] == nil { object[key] = value }
        return .object(object)
    }
}
