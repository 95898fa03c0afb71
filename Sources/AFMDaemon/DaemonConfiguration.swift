// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import AFMHTTP
import AFMResponses
import AFMSystem
import Foundation

/// The daemon's typed view of one loaded configuration (all layers merged; see `AFMConfig`).
///
/// A reload builds a new one; values that only take effect at start (timeouts of the HTTP server, the admin
/// socket path) are read once at start.
public struct DaemonConfiguration: Sendable {
    public var listen: ListenAddress
    /// Permission bits of a `unix:` listen socket (`Server.ListenSocketMode`).
    public var listenSocketMode: UInt32
    /// `Server.APIKeyFile`, nil without authentication.
    public var apiKeyFile: String?
    /// `Server.AllowUnauthenticated`: serve a non-loopback address without keys.
    public var allowUnauthenticated: Bool
    /// `Server.MetricsRequireKey`.
    public var metricsRequireKey: Bool
    /// `Server.DrainDelaySeconds`: how long a drain keeps serving with `/ready` at 503 before closing the listener.
    public var drainDelay: Duration
    /// `Server.AccessLog`.
    public var accessLog: Bool
    public var shutdownTimeout: Duration
    public var backendDirectory: String?
    public var disabledBackends: Set<String>
    public var silenceTimeout: Duration
    public var cancelGrace: Duration
    public var drainTimeout: Duration
    public var requestHeaderTimeout: Duration
    public var processingDeadline: Duration
    /// HTTP event-loop threads (`Server.IOThreads`, 0 resolved to one per usable CPU, at most 4).
    public var ioThreads: Int
    /// `Server.MaxConnections`: HTTP connections open at once (see ``Daemon`` for how it meets `RLIMIT_NOFILE`).
    public var maxConnections: Int
    /// `Server.AllowedHosts`: further names accepted in `Host` (`*`: any).
    public var allowedHosts: [String]
    /// `Server.AllowedOrigins`: web origins whose pages may call the API (`*`: any).
    public var allowedOrigins: [String]
    public var backendSettings: [String: [String: String]]
    /// Text prepended to the instructions of every request.
    public var commonPrompt: String
    /// The most bytes of output one response may accumulate (`Responses.MaxOutputBytes`).
    public var maxOutputBytes: Int
    public var stateDirectory: String
    public var runtimeDirectory: String
    /// Whether ``runtimeDirectory`` lies where another user could replace it (`/tmp/afm-UID`, a world-writable
    /// parent): it is verified private again before every backend copy is written there.
    public var runtimeDirectoryMustBePrivate: Bool
    public var adminSocket: String
    public var operatorGroups: [String]
    /// The group of the admin socket file (`Admin.SocketGroup`), empty for the daemon's own group.
    public var adminSocketGroup: String
    /// Whether `auto` prefers the private cloud when it is available.
    public var preferPrivateCloud: Bool
    /// Whether the listen address came from the control layer (a saved setting): a bind failure then keeps the
    /// daemon up and is reported, instead of stopping it.
    public var listenFromControlLayer: Bool

    /// `[Backend.<id>] MaxConcurrent` and `MaxQueued` of every backend that sets them (whole numbers; anything else
    /// is reported at load by ``admissionProblems``).
    public var admissionLimits: [String: AdmissionControl.Limits] {
        var limits: [String: AdmissionControl.Limits] = [:]
        for (id, settings) in backendSettings {
            let concurrent = settings["MaxConcurrent"].flatMap { Int($0) } ?? 0
            let queued = settings["MaxQueued"].flatMap { Int($0) } ?? 0
            if concurrent > 0 { limits[id] = AdmissionControl.Limits(maxConcurrent: concurrent, maxQueued: max(0, queued)) }
        }
        return limits
    }

    /// Why the admission settings cannot be used, or nil.
    public var admissionProblem: String? {
        for (id, settings) in backendSettings.sorted(by: { $0.key < $1.key }) {
            for key in ["MaxConcurrent", "MaxQueued"] {
                if let text = settings[key], Int(text).map({ (0...100_000).contains($0) }) != true {
                    return "[Backend.\(id)] \(key) must be a whole number from 0 to 100000, not '\(text)'"
                }
            }
        }
        return nil
    }

    /// The browser-facing checks these settings make, for a listener on `listenHost`.
    func browserPolicy(listenHost: String) -> BrowserRequestPolicy {
        BrowserRequestPolicy(listenHost: listenHost, allowedHosts: allowedHosts, allowedOrigins: allowedOrigins)
    }

    /// The typed view of `loaded`.
    public init(_ loaded: LoadedConfiguration) {
        listen = loaded.listen
        listenSocketMode = loaded.listenSocketMode
        apiKeyFile = loaded.apiKeyFile
        allowUnauthenticated = loaded.allowUnauthenticated
        metricsRequireKey = loaded.metricsRequireKey
        drainDelay = loaded.drainDelay
        accessLog = loaded.accessLog
        shutdownTimeout = loaded.shutdownTimeout
        backendDirectory = loaded.backendDirectory
        disabledBackends = loaded.disabledBackends
        silenceTimeout = loaded.silenceTimeout
        cancelGrace = loaded.cancelGrace
        drainTimeout = loaded.drainTimeout
        requestHeaderTimeout = loaded.requestHeaderTimeout
        processingDeadline = loaded.processingDeadline
        ioThreads = loaded.ioThreads > 0 ? loaded.ioThreads : min(4, max(1, CurrentProcess.usableProcessorCount))
        maxConnections = loaded.maxConnections
        allowedHosts = loaded.list(.serverAllowedHosts)
        allowedOrigins = loaded.list(.serverAllowedOrigins)
        backendSettings = loaded.backendSettings
        commonPrompt = loaded.commonPrompt
        maxOutputBytes = loaded.maxOutputBytes
        stateDirectory = loaded.paths.stateDirectory
        runtimeDirectory = loaded.paths.runtimeDirectory
        runtimeDirectoryMustBePrivate = loaded.paths.runtimeDirectoryMustBePrivate
        adminSocket = loaded.adminSocket
        operatorGroups = loaded.operatorGroups
        adminSocketGroup = loaded.adminSocketGroup
        preferPrivateCloud = loaded.cloudPreference
        if case .controlLayer = loaded.origin(of: .serverListen) {
            listenFromControlLayer = true
        } else {
            listenFromControlLayer = false
        }
    }
}
