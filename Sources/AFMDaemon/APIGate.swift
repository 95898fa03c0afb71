// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMHTTP
import Synchronization

/// What every API request passes before its endpoint: the API key check, and whether the node is draining.
///
/// One per daemon, read by the request path under one uncontended `Mutex` and replaced on a reload. The key check
/// is the HTTP layer's, not a dialect's: every endpoint gets it, and the 401 is rendered in the envelope of the
/// path's dialect (``APIHandler/errorBody(_:path:)``).
final class APIGate: Sendable {
    struct Settings: Sendable {
        var keys = APIKeys.none
        /// Whether `/metrics` needs a key when keys are configured.
        var metricsRequireKey = true
    }

    private let settings = Mutex(Settings())
    /// Whether keys are configured: read first by every request, so the usual loopback set-up without keys takes
    /// no lock shared by every event loop (and copies no key table).
    private let keysEnabled = Atomic<Bool>(false)
    /// Set from the moment a drain starts (SIGTERM, `afmctl drain`) until `afmctl listener start`.
    private let draining = Atomic<Bool>(false)

    /// Paths anyone may call: a load balancer's checks must work without a key.
    static let openPaths: Set<String> = ["/health", "/ready"]

    var current: Settings { settings.withLock { $0 } }
    func set(_ value: Settings) {
        settings.withLock { settings in
            settings = value
            keysEnabled.store(value.keys.isEnabled, ordering: .relaxed)
        }
    }

    var isDraining: Bool { draining.load(ordering: .relaxed) }
    func setDraining(_ value: Bool) { draining.store(value, ordering: .relaxed) }

    /// The outcome of the key check for one request.
    enum Verdict: Sendable {
        /// Let through; the key's name when keys are configured.
        case allowed(keyName: String?)
        /// 401 `invalid_api_key`.
        case refused(AFMError)
    }

    /// Checks `request`'s key (`Authorization: Bearer`, else `x-api-key`) when keys are configured and its path
    /// is guarded. CORS preflights are let through: browsers never send credentials on them.
    func check(_ request: HTTPRequest) -> Verdict {
        guard keysEnabled.load(ordering: .relaxed) else { return .allowed(keyName: nil) }
        let settings = self.settings.withLock { $0 }
        guard settings.keys.isEnabled, request.method != "OPTIONS", !Self.openPaths.contains(request.path) else {
            return .allowed(keyName: nil)
        }
        if request.path == "/metrics" && !settings.metricsRequireKey { return .allowed(keyName: nil) }
        guard let token = APIKeys.presentedKey(in: request.headers) else {
            return .refused(
                Self.unauthorized("No API key was provided. Send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'."))
        }
        guard let name = settings.keys.name(forToken: token) else {
            return .refused(Self.unauthorized("The API key provided is not valid."))
        }
        return .allowed(keyName: name)
    }

    /// The 401: OpenAI's shape (`invalid_request_error`, code `invalid_api_key`); other dialects re-shape it.
    static func unauthorized(_ message: String) -> AFMError {
        AFMError(.invalidRequest, message, publicCode: "invalid_api_key", httpStatus: 401)
    }
}
