// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem

/// Who is calling, and how: passed to every ``AdminHandler`` method.
public struct AdminCallContext: Sendable {
    /// The peer's credentials (`SO_PEERCRED`).
    public var credentials: PeerCredentials
    /// The level granted to this connection.
    public var level: AdminLevel
    /// The method being called.
    public var method: AdminMethod
    /// Whether the client asked for several replies (`more: true`).
    public var wantsMore: Bool

    /// Creates a context (tests of handlers build their own).
    public init(credentials: PeerCredentials, level: AdminLevel, method: AdminMethod, wantsMore: Bool) {
        self.credentials = credentials
        self.level = level
        self.method = method
        self.wantsMore = wantsMore
    }
}

/// Sends intermediate replies (`continues: true`) of a call made with `more: true`; does nothing otherwise.
public struct AdminProgress: Sendable {
    private let sink: @Sendable (JSONValue) -> Void

    /// Creates a progress sink.
    public init(_ sink: @escaping @Sendable (JSONValue) -> Void) { self.sink = sink }

    /// A sink that drops everything.
    public static let discard = AdminProgress { _ in }

    /// Sends one intermediate reply with these parameters.
    public func send(_ parameters: JSONValue) { sink(parameters) }
}

/// What the daemon implements to serve `org.afm.Admin`: one async function per method.
///
/// Replies are the `parameters` objects of the varlink replies (JSON objects). Throw ``AdminError`` for a
/// failure the caller should see (`AdminError.reloadFailed`, `.invalidSetting`, `.invalidParameter`);
/// any other failure should be turned into `.internalError` by the handler.
///
/// The server has already checked the peer's level against ``AdminMethod/minimumLevel`` and parsed the
/// parameters when a method is called.
///
/// # Implementation requirements
/// - Methods run as Swift tasks: never block (no synchronous file or socket I/O, no `sleep`).
/// - ``watchCounters(_:intervalMilliseconds:)`` returns a stream that yields one snapshot per change or
///   interval and ends when the daemon stops; the server cancels the consuming task when the client leaves,
///   so use `AsyncStream`'s `onTermination` to release resources.
/// - ``reload(_:backend:progress:)`` returns only when the new generation serves (or failed), so the reply
///   is synchronous; it may send progress (`{"phase":"loading","backend":…}`) meanwhile.
public protocol AdminHandler: Sendable {
    /// `GetInfo`: version, pid, start time, mode. (`org.varlink.service.GetInfo` is answered by the server.)
    func getInfo(_ context: AdminCallContext) async throws(AdminError) -> JSONValue
    /// `GetStatus`: listener, backends summary, config generation, bind failure, counters.
    func getStatus(_ context: AdminCallContext) async throws(AdminError) -> JSONValue
    /// `WatchCounters`: live token counters (per request and total), one element per update.
    func watchCounters(_ context: AdminCallContext, intervalMilliseconds: Int) async throws(AdminError)
        -> AsyncStream<JSONValue>
    /// `ListBackends`: `{"backends":[…]}`.
    func listBackends(_ context: AdminCallContext) async throws(AdminError) -> JSONValue
    /// `Reload`: reload one backend (or all plus the configuration when `nil`); returns the new generation.
    func reload(_ context: AdminCallContext, backend: String?, progress: AdminProgress) async throws(AdminError)
        -> JSONValue
    /// `SetListener`: start (`running: true`) or stop the HTTP listener.
    func setListener(_ context: AdminCallContext, running: Bool) async throws(AdminError) -> JSONValue
    /// `SetListener` with `state: "draining"`: readiness fails at once, then after the drain delay the listener
    /// closes and in-flight responses finish (`afmctl drain`). Returns when the listener is closed.
    func drainListener(_ context: AdminCallContext) async throws(AdminError) -> JSONValue
    /// `GetPrompt`: `{"text","revision","origin"}`.
    func getPrompt(_ context: AdminCallContext) async throws(AdminError) -> JSONValue
    /// `SetPrompt`: saves the common prompt (only at `ifRevision`, when given); returns the new revision.
    func setPrompt(_ context: AdminCallContext, text: String, ifRevision: Int?) async throws(AdminError) -> JSONValue
    /// `GetConfig`: values (only `keys`, when not empty), with origins when `withOrigin`.
    func getConfig(_ context: AdminCallContext, keys: [String], withOrigin: Bool) async throws(AdminError) -> JSONValue
    /// `SetSetting`: one versioned-settings edit (`host`, `port`, `listen`, `privateCloudPreference`, `commonPrompt`).
    func setSetting(_ context: AdminCallContext, key: String, value: String) async throws(AdminError) -> JSONValue
}

extension AdminHandler {
    /// Handlers without a drain (tests' fakes) refuse it.
    public func drainListener(_ context: AdminCallContext) async throws(AdminError) -> JSONValue {
        throw AdminError.internalError("this server cannot drain its listener")
    }
}
