// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Synchronization

/// The facts a game owns (time of day, who is where, what is open), shared by its NPCs.
///
/// Each NPC turn gets a snapshot of the facts as they are when the turn starts, in that turn's instructions; the
/// snapshot is never stored in an NPC's transcript, so an NPC always sees the world as it is now, not as it was.
/// Every change gives a new ``revision``.
public final class WorldState: Sendable {
    private struct State {
        var facts = JSONObject()
        var revision = 0
    }

    private let state = Mutex(State())

    public init(facts: JSONObject = JSONObject()) {
        state.withLock { $0.facts = facts }
    }

    /// The facts and their revision, read together.
    public var snapshot: (facts: JSONObject, revision: Int) {
        state.withLock { ($0.facts, $0.revision) }
    }

    /// Replaces every fact; returns the new revision.
    @discardableResult
    public func set(_ facts: JSONObject) -> Int {
        state.withLock { state in
            state.facts = facts
            state.revision += 1
            return state.revision
        }
    }

    /// Applies a JSON Merge Patch (RFC 7386): members replace, `null` removes, objects merge recursively. Returns
    /// the new revision.
    @discardableResult
    public func patch(_ patch: JSONObject) -> Int {
        state.withLock { state in
            state.facts = Self.merge(state.facts, patch)
            state.revision += 1
            return state.revision
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
