// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import AFMSSE
import Foundation

/// The backend config document `create()` receives, with the `[Backend.private-cloud]` settings validated.
///
/// ```ini
/// [Backend.private-cloud]
/// Upstreams = https://a.example/v1, http://127.0.0.1:8080/v1
/// Protocol = chat-completions          ; or responses (the default for every upstream)
/// Upstream.2.Protocol = responses      ; per-upstream override (1-based, in the order of Upstreams)
/// Model = qwen3-8b                     ; the upstream's model name (Upstream.<n>.Model overrides)
/// APIKeyFile = /etc/afm/cloud.key      ; mode 0600 or stricter; or APIKeyEnv = AFM_CLOUD_KEY
/// DailyRequestQuota = 1000             ; per upstream and UTC day, the default for every upstream
/// Upstream.1.DailyTokenQuota = 200000  ; per-upstream quota override (0 = unlimited for that upstream)
/// MaxStreamBytes = 67108864            ; the most bytes one upstream answer may stream (default 64 MiB)
/// MaxEventBytes = 1048576              ; the most data bytes one event of that stream may hold (default 1 MiB)
/// AllowInsecureHTTP = no               ; yes: send the key over http:// to a non-loopback host
/// ```
///
/// Every value is a string; an empty value means "not set". Unknown keys are refused, naming the key. An upstream
/// is identified by its base URL (see `QuotaStore`), so the same URL may appear only once in `Upstreams`.
struct Settings: Sendable {
    /// The only `config_version` this backend reads.
    static let version = 1
    /// The fixed setting names; `Upstream.<n>.<key>` is accepted too for every key in `perUpstreamKeys`.
    static let knownSettings = [
        "Upstreams", "Protocol", "Model", "ModelID", "APIKeyFile", "APIKeyEnv", "ContextTokens", "MaxOutputTokens",
        "Vision", "Reasoning", "DailyRequestQuota", "DailyTokenQuota", "ProbeIntervalSeconds",
        "ConnectTimeoutSeconds", "ReadTimeoutSeconds", "MaxStreamBytes", "MaxEventBytes",
        "AllowInsecureHTTP",
    ]
    static let perUpstreamKeys = ["Protocol", "Model", "DailyRequestQuota", "DailyTokenQuota"]

    /// Where the API key comes from.
    enum KeySource: Sendable, Hashable {
        case none
        case file(String)
        case environment(String)
    }

    /// Whether the served model reasons and whether `reasoning_effort: "none"` can turn it off.
    enum Reasoning: String, Sendable {
        /// The model does not reason (`Reasoning = no`, the default).
        case no
        /// The model always reasons (`Reasoning = yes`); `none` is refused.
        case yes
        /// The model reasons unless asked not to (`Reasoning = optional`).
        case optional
    }

    /// One upstream as configured.
    struct UpstreamConfig: Sendable, Hashable {
        /// The base URL without a trailing slash, e.g. `http://127.0.0.1:8080/v1`.
        var baseURL: String
        var wireProtocol: WireProtocol
        /// The model name sent upstream.
        var model: String
        /// Requests per UTC day at this upstream (nil: unlimited): `Upstream.<n>.DailyRequestQuota`, else
        /// `DailyRequestQuota`.
        var dailyRequestQuota: Int?
        /// Input + output tokens per UTC day at this upstream (nil: unlimited), like `dailyRequestQuota`.
        var dailyTokenQuota: Int?
    }

    var upstreams: [UpstreamConfig]
    var modelID: String
    var keySource: KeySource
    var contextTokens: Int
    var maxOutputTokens: Int
    var vision: Bool
    var reasoning: Reasoning
    /// `DailyRequestQuota`: the default of every upstream's request quota (nil: unlimited).
    var dailyRequestQuota: Int?
    /// `DailyTokenQuota`: the default of every upstream's token quota (nil: unlimited).
    var dailyTokenQuota: Int?
    var probeIntervalSeconds: Int
    var connectTimeoutSeconds: Int
    var readTimeoutSeconds: Int
    /// `MaxStreamBytes`: the most bytes of one upstream response body; a longer stream ends the generation.
    var maxStreamBytes: Int
    /// `MaxEventBytes`: the most data bytes of one event of that body; a larger event ends the generation.
    var maxEventBytes: Int
    /// `AllowInsecureHTTP`: whether the key may go to an `http://` upstream on a non-loopback host.
    var allowInsecureHTTP: Bool
    /// `state_dir`: where the quota database lives (nil: quota is kept in memory only).
    var stateDirectory: String?
    /// `instance`, for log lines.
    var instance: String

    /// True when `Upstreams` is set; otherwise the backend is loaded but disabled.
    var isConfigured: Bool { !upstreams.isEmpty }

    /// Parses and validates a config document.
    ///
    /// - Throws: `AFM_ERR_INVALID_REQUEST` for malformed JSON, an unknown or non-string setting (naming the key) or
    ///   a bad value (naming the key and the value); `AFM_ERR_INCOMPATIBLE` for a `config_version` other than 1.
    init(parsing bytes: Data) throws(BackendError) {
        let object: [String: Any]
        do {
            object = try JSON.object(from: bytes)
        } catch {
            throw .invalidRequest("backend config document: \(error.message)")
        }
        guard let version = JSON.int(object["config_version"]) else {
            throw .invalidRequest("backend config document: config_version must be an integer")
        }
        guard version == Self.version else {
            throw .incompatible(
                "backend config document has config_version \(version); the private-cloud backend reads version "
                    + "\(Self.version)")
        }
        var settings: [String: String] = [:]
        if let raw = object["settings"], !JSON.isNullOrMissing(raw) {
            guard let dictionary = JSON.object(raw) else {
                throw .invalidRequest("backend config document: settings must be an object of strings")
            }
            for key in dictionary.keys.sorted() {
                guard Self.knownSettings.contains(key) || Self.upstreamOverride(key) != nil else {
                    throw .invalidRequest(
                        "unknown setting \"\(key)\" for the private-cloud backend (known: "
                            + (Self.knownSettings + Self.perUpstreamKeys.map { "Upstream.<n>.\($0)" }).joined(
                                separator: ", ") + ")")
                }
                guard let value = JSON.string(dictionary[key]) else {
                    throw .invalidRequest("setting \"\(key)\" must be a string")
                }
                let trimmed = value.trimmingCharacters(in: .whitespaces)
                if !trimmed.isEmpty { settings[key] = trimmed }
            }
        }
        instance = JSON.string(object["instance"]) ?? "private-cloud"
        stateDirectory = JSON.string(object["state_dir"]).flatMap { $0.isEmpty ? nil : $0 }

        let defaultProtocol = try Self.wireProtocol(settings["Protocol"], key: "Protocol") ?? .responses
        let defaultModel = settings["Model"] ?? ""
        let defaultRequestQuota = try Self.quota(settings, "DailyRequestQuota")
        let defaultTokenQuota = try Self.quota(settings, "DailyTokenQuota")
        var upstreams: [UpstreamConfig] = []
        for (offset, raw) in (settings["Upstreams"] ?? "").split(separator: ",").enumerated() {
            let url = try Self.baseURL(String(raw).trimmingCharacters(in: .whitespaces), position: offset + 1)
            // The URL is the upstream's identity (its quota counts are keyed by it): a second entry would share
            // the first one's counts under different limits.
            if let first = upstreams.firstIndex(where: { $0.baseURL == url }) {
                throw .invalidRequest(
                    "setting \"Upstreams\": entry \(offset + 1) repeats entry \(first + 1) (\(url)); "
                        + "list each upstream once")
            }
            upstreams.append(
                UpstreamConfig(
                    baseURL: url, wireProtocol: defaultProtocol, model: defaultModel,
                    dailyRequestQuota: defaultRequestQuota, dailyTokenQuota: defaultTokenQuota))
        }
        for (key, value) in settings {
            guard let (number, field) = Self.upstreamOverride(key) else { continue }
            guard number >= 1, number <= upstreams.count else {
                throw .invalidRequest(
                    "setting \"\(key)\" names upstream \(number), but Upstreams lists \(upstreams.count)")
            }
            switch field {
            case "Protocol":
                upstreams[number - 1].wireProtocol = try Self.wireProtocol(value, key: key) ?? defaultProtocol
            case "Model": upstreams[number - 1].model = value
            case "DailyRequestQuota": upstreams[number - 1].dailyRequestQuota = try Self.quota(settings, key)
            default: upstreams[number - 1].dailyTokenQuota = try Self.quota(settings, key)
            }
        }
        if let missing = upstreams.firstIndex(where: { $0.model.isEmpty }) {
            throw .invalidRequest(
                "upstream \(missing + 1) (\(upstreams[missing].baseURL)) has no model: set \"Model\" or "
                    + "\"Upstream.\(missing + 1).Model\" to the upstream's model name")
        }
        self.upstreams = upstreams
        modelID = settings["ModelID"] ?? "private-cloud"
        guard modelID.utf8.count <= 256 else { throw .invalidRequest("setting \"ModelID\" is longer than 256 bytes") }
        switch (settings["APIKeyFile"], settings["APIKeyEnv"]) {
        case (let file?, nil): keySource = .file(file)
        case (nil, let variable?): keySource = .environment(variable)
        case (nil, nil): keySource = .none
        case (.some, .some): throw .invalidRequest("set only one of \"APIKeyFile\" and \"APIKeyEnv\"")
        }
        contextTokens = try Self.integer(settings, "ContextTokens", default: 8192, range: 16...10_000_000)
        maxOutputTokens = try Self.integer(
            settings, "MaxOutputTokens", default: max(1, contextTokens / 4), range: 1...(contextTokens - 1))
        vision = try Self.boolean(settings, "Vision", default: false)
        switch settings["Reasoning"]?.lowercased() {
        case nil, "no", "false", "off": reasoning = .no
        case "yes", "true", "on", "always": reasoning = .yes
        case "optional": reasoning = .optional
        case let other?:
            throw .invalidRequest("setting \"Reasoning\" must be no, yes or optional, not \"\(other)\"")
        }
        dailyRequestQuota = defaultRequestQuota
        dailyTokenQuota = defaultTokenQuota
        probeIntervalSeconds = try Self.integer(settings, "ProbeIntervalSeconds", default: 30, range: 1...86_400)
        connectTimeoutSeconds = try Self.integer(settings, "ConnectTimeoutSeconds", default: 5, range: 1...600)
        readTimeoutSeconds = try Self.integer(settings, "ReadTimeoutSeconds", default: 120, range: 1...86_400)
        maxStreamBytes = try Self.integer(
            settings, "MaxStreamBytes", default: SSEParser.defaultMaximumTotalBytes, range: 65_536...(1 << 40))
        maxEventBytes = try Self.integer(
            settings, "MaxEventBytes", default: SSEParser.defaultMaximumEventBytes, range: 65_536...(64 << 20))
        allowInsecureHTTP = try Self.boolean(settings, "AllowInsecureHTTP", default: false)
    }

    /// The upstreams whose key would cross the network in clear: `http://` on a host other than loopback
    /// (`localhost`, 127.0.0.0/8, `::1`).
    var cleartextUpstreams: [String] {
        upstreams.map(\.baseURL).filter { url in
            guard let components = URLComponents(string: url), components.scheme?.lowercased() == "http" else {
                return false
            }
            return !Self.isLoopback(components.host ?? "")
        }
    }

    /// Whether `host` (as URLComponents gives it, IPv6 with or without brackets) names the loopback interface:
    /// `localhost`, or an address in 127.0.0.0/8 or `::1` in the strict numeric form `inet_pton` accepts.
    ///
    /// Anything looser (`127.0.0.08`, `127.1`, `0177.0.0.1`) is not loopback here: libcurl may not read it as an
    /// address at all and resolve it as a name instead (over DNS, to anywhere), so the key must not go there in clear.
    static func isLoopback(_ host: String) -> Bool {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        return withUnsafeBytes(of: &v6) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
    }

    /// `Upstream.<n>.<field>` for a field in `perUpstreamKeys` → (n, field), else nil.
    private static func upstreamOverride(_ key: String) -> (Int, String)? {
        let parts = key.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "Upstream", let number = Int(parts[1]),
            perUpstreamKeys.contains(String(parts[2]))
        else { return nil }
        return (number, String(parts[2]))
    }

    private static func wireProtocol(_ value: String?, key: String) throws(BackendError) -> WireProtocol? {
        guard let value else { return nil }
        guard let parsed = WireProtocol(rawValue: value.lowercased()) else {
            throw .invalidRequest("setting \"\(key)\" must be responses or chat-completions, not \"\(value)\"")
        }
        return parsed
    }

    /// Validates one base URL: http or https, a host, no user-info (credentials belong in APIKeyFile/APIKeyEnv).
    private static func baseURL(_ text: String, position: Int) throws(BackendError) -> String {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else {
            throw .invalidRequest(
                "setting \"Upstreams\": entry \(position) is not an http:// or https:// base URL")
        }
        guard components.user == nil, components.password == nil else {
            throw .invalidRequest(
                "setting \"Upstreams\": entry \(position) carries credentials in the URL; use APIKeyFile or APIKeyEnv")
        }
        guard components.query == nil, components.fragment == nil else {
            throw .invalidRequest("setting \"Upstreams\": entry \(position) must not have a query or fragment")
        }
        var url = text
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }

    private static func integer(
        _ settings: [String: String], _ key: String, default value: Int, range: ClosedRange<Int>
    ) throws(BackendError) -> Int {
        guard let text = settings[key] else { return value }
        guard let parsed = Int(text), range.contains(parsed) else {
            throw .invalidRequest(
                "setting \"\(key)\" must be an integer from \(range.lowerBound) to \(range.upperBound), not \"\(text)\"")
        }
        return parsed
    }

    /// A quota: 0 means unlimited (an empty value is "not set" and never reaches here).
    private static func quota(_ settings: [String: String], _ key: String) throws(BackendError) -> Int? {
        guard let text = settings[key] else { return nil }
        guard let parsed = Int(text), parsed >= 0 else {
            throw .invalidRequest("setting \"\(key)\" must be a non-negative integer (0 = unlimited), not \"\(text)\"")
        }
        return parsed == 0 ? nil : parsed
    }

    private static func boolean(_ settings: [String: String], _ key: String, default value: Bool) throws(BackendError)
        -> Bool
    {
        switch settings[key]?.lowercased() {
        case nil: return value
        case "yes", "true", "on", "1": return true
        case "no", "false", "off", "0": return false
        case let other?: throw .invalidRequest("setting \"\(key)\" must be yes or no, not \"\(other)\"")
        }
    }
}
