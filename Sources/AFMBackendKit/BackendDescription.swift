// SPDX-License-Identifier: Apache-2.0

/// The describe document a backend writes through `describe` (docs/backend-abi.md §8.3), as one compact line.
///
/// ```swift
/// BackendDescription(backend: "hello", version: "0.1.0",
///                    models: [ModelDescription(id: "hello", contextTokens: 4096)]).json
/// ```
public struct BackendDescription: Sendable {
    /// Why a backend that loaded cannot serve.
    public struct Unavailability: Sendable, Hashable {
        /// For humans (no secrets).
        public var reason: String
        /// For machines, lower snake case (`missing_credentials`).
        public var code: String

        public init(reason: String, code: String) {
            self.reason = reason
            self.code = code
        }
    }

    /// The backend id.
    public var backend: String
    /// The version of this build or configuration.
    public var version: String
    /// nil when the backend serves; otherwise `available` is false with this reason.
    public var unavailability: Unavailability?
    /// The models served.
    public var models: [ModelDescription]
    /// Members of the backend's own after `models`, each a key and its value already written as JSON (readers
    /// ignore members they do not know; the private cloud lists its upstreams and quota this way).
    public var extraMembers: [(key: String, json: String)]

    public init(
        backend: String, version: String, unavailability: Unavailability? = nil, models: [ModelDescription],
        extraMembers: [(key: String, json: String)] = []
    ) {
        self.backend = backend
        self.version = version
        self.unavailability = unavailability
        self.models = models
        self.extraMembers = extraMembers
    }

    /// The document.
    public var json: String {
        var json = "{\"describe_version\":1,\"backend\":" + JSON.quote(backend) + ",\"version\":" + JSON.quote(version)
        if let unavailability {
            json += ",\"available\":false,\"reason\":" + JSON.quote(unavailability.reason)
            json += ",\"reason_code\":" + JSON.quote(unavailability.code)
        } else {
            json += ",\"available\":true,\"reason\":null,\"reason_code\":null"
        }
        json += ",\"models\":[" + models.map(\.json).joined(separator: ",") + "]"
        for member in extraMembers { json += "," + JSON.quote(member.key) + ":" + member.json }
        return json + "}"
    }
}
