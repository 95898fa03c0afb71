// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON
import Synchronization

/// The facts a game owns (time of day, who is where, what is open), shared by its NPCs.
///
/// Each NPC turn gets a snapshot of the facts as they are when the turn starts, in that turn's instructions; the
/// snapshot is never stored in an NPC's transcript, so an NPC always sees the world as it is now, not as it was.
/// Every change gives a new ``revision``. The facts are bounded by ``maxBytes`` (their JSON text): every NPC turn
/// carries all of them, and patches with new keys would otherwise grow them, and every turn's input, without end.
public final class WorldState: Sendable {
    /// 256 KiB of JSON: far more than a model's context holds, so a world near it is a host's bug, not a game.
    public static let defaultMaxBytes = 256 << 10
    private struct State {
        var facts = JSONObject()
        var revision = 0
    }

    private let state = Mutex(State())
    /// The most bytes the facts' JSON text may have.
    public let maxBytes: Int

    public init(facts: JSONObject = JSONObject(), maxBytes: Int = WorldState.defaultMaxBytes) {
        self.maxBytes = maxBytes
        state.withLock { $0.facts = facts }
    }

    /// The facts and their revision, read together.
    public var snapshot: (facts: JSONObject, revision: Int) {
        state.withLock { ($0.facts, $0.revision) }
    }

    /// Replaces every fact; returns the new revision.
    ///
    /// - Throws: `invalid_request` when the facts' JSON is over ``maxBytes`` (the world is left as it was).
    @discardableResult
    public func set(_ facts: JSONObject) throws(AgentError) -> Int {
        try checkSize(facts)
        return state.withLock { state in
            state.facts = facts
            state.revision += 1
            return state.revision
        }
    }

    /// Applies a JSON Merge Patch (RFC 7386): members replace, `null` removes, objects merge recursively. Returns
    /// the new revision.
    ///
    /// - Throws: `invalid_request` when the result's JSON would be over ``maxBytes`` (the world is left as it was).
    @discardableResult
    public func patch(_ patch: JSONObject) throws(AgentError) -> Int {
        try state.withLock { (state) throws(AgentError) in
            let merged = Self.merge(state.facts, patch)
            try checkSize(merged)
            state.facts = merged
            state.revision += 1
            return state.revision
        }
    }

    private func checkSize(_ facts: JSONObject) throws(AgentError) {
        let size = JSONValue.object(facts).encoded().count
        guard size <= maxBytes else {
            throw AgentError(.invalidRequest, "the world's facts would be \(size) bytes of JSON; the limit is \(maxBytes)")
        }
    }

    /// The text a turn gets: the facts as one JSON object, or nil when there are none.
    public func turnContext() -> String? {
        let (facts, revision) = snapshot
        guard !facts.isEmpty else { return nil }
        return "The world right now (revision \(revision); the game keeps these facts, trust them over anything said "
            + "earlier):\n\(JSONValue.object(facts).jsonString)"
    }

    static func merge(_ target: JSONObject, _ patch: JSONObject) -> JSONObject {
        var result = target
        for (key, value) in patch {
            switch value {
            case .null:
                result[key] = nil
            case .object(let inner):
                result[key] = .object(merge(result[key]?.objectValue ?? JSONObject(), inner))
            default:
                result[key] = value
            }
        }
        return result
    }
}
