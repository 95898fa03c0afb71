// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMJSON

/// What a bridge starts with: the gateway and model agents use unless they name their own, and its limits.
///
/// `afm bridge` takes them from its command line (`--url`, `--model`); `afm_bridge_open` from its config JSON
/// (`{"url":…,"model":…,"max_agents":…,"max_runs":…}`, every field optional).
public struct BridgeConfiguration: Sendable, Hashable {
    /// The gateway of agents that give no `url`.
    public var url: ServerURL
    /// The model of agents that give no `model`.
    public var model: String
    /// How many agents and NPCs may exist at once.
    public var maxAgents: Int
    /// How many runs may be active (queued or running) at once.
    public var maxRuns: Int
    /// The largest message the bridge reads, in bytes.
    public var maxMessageBytes: Int

    public static let defaultMaxMessageBytes = 8 << 20

    public init(
        url: ServerURL = .default, model: String = "on-device", maxAgents: Int = 1024, maxRuns: Int = 1024,
        maxMessageBytes: Int = BridgeConfiguration.defaultMaxMessageBytes
    ) {
        self.url = url
        self.model = model
        self.maxAgents = maxAgents
        self.maxRuns = maxRuns
        self.maxMessageBytes = maxMessageBytes
    }

    /// A config document (`afm_bridge_open`); a problem is a message naming the field.
    public init(json text: String) throws(JSONRPCError) {
        self.init()
        guard !text.allSatisfy(\.isWhitespace) else { return }
        let value: JSONValue
        do {
            value = try JSONParser.parse(text)
        } catch {
            throw .parseError("the config is not valid JSON: \(error.message)")
        }
        guard let object = value.objectValue else { throw .invalidParams("config", "must be a JSON object") }
        var params = BridgeParams(object, path: "config")
        if let text = try params.optionalString("url") {
            guard let parsed = ServerURL(string: text) else {
                throw .invalidParams("config.url", "must look like http://127.0.0.1:11535")
            }
            url = parsed
        }
        if let model = try params.optionalString("model", maxBytes: 256) { self.model = model }
        if let value = try params.optionalInt("max_agents", in: 1...65536) { maxAgents = value }
        if let value = try params.optionalInt("max_runs", in: 1...65536) { maxRuns = value }
        if let value = try params.optionalInt("max_message_bytes", in: 1024...(256 << 20)) { maxMessageBytes = value }
        try params.finish()
    }
}
