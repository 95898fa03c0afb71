// SPDX-License-Identifier: Apache-2.0

/// Per-request limits the host enforces on a backend.
public struct GenerationLimits: Sendable, Hashable {
    /// A backend silent for this long (no event at all) has its generation failed with `timeout`.
    public var silenceLimit: Duration
    /// A backend that has not ended a cancelled generation after this long is cut off.
    public var cancelGrace: Duration

    public init(silenceLimit: Duration = .seconds(300), cancelGrace: Duration = .seconds(5)) {
        self.silenceLimit = silenceLimit
        self.cancelGrace = cancelGrace
    }
}
