// SPDX-License-Identifier: Apache-2.0

/// What the HTTP layer knows of a request that the pipeline books with it: who sent it, through which API, when it
/// arrived and how long it waited for admission. It feeds the token monitor, `/metrics` and the access log.
public struct RequestContext: Sendable {
    /// The name of the API key that authenticated the request (never the key), or nil without keys.
    public var keyName: String?
    /// The API the request used: `responses` (and the other dialects' names).
    public var dialect: String
    /// When the request reached the gateway (monotonic).
    public var receivedAt: ContinuousClock.Instant
    /// Seconds it waited for an admission slot (`MaxConcurrent`).
    public var queueSeconds: Double

    public init(keyName: String? = nil, dialect: String = "responses", receivedAt: ContinuousClock.Instant = .now, queueSeconds: Double = 0) {
        self.keyName = keyName
        self.dialect = dialect
        self.receivedAt = receivedAt
        self.queueSeconds = queueSeconds
    }

    /// Seconds since the request arrived.
    public var elapsedSeconds: Double { Self.seconds(ContinuousClock.now - receivedAt) }

    /// A duration in seconds, as a `Double`.
    public static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
