// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// What a backend generation serves, parsed from its describe document (docs/backend-abi.md, "Describe").
public struct BackendDescription: Sendable, Hashable {
    /// One model a backend serves.
    public struct Model: Sendable, Hashable {
        public var id: String
        public var contextTokens: Int
        public var maxInputTokens: Int
        public var maxOutputTokens: Int
        public var capabilities: Capabilities
    }

    /// What a model can do; the Responses layer refuses requests that need more.
    public struct Capabilities: Sendable, Hashable {
        public var streaming: Bool
        public var tools: Bool
        public var vision: Bool
        public var reasoning: Bool
        /// Whether reasoning can be turned off (`reasoning.effort: "none"`).
        public var reasoningOptional: Bool
        /// Whether the model honours the generation request's `output_format` (ABI 1.1): its answer is JSON that
        /// matches the schema (or any JSON object). Only believed from a backend that reports ABI minor 1 or
        /// later: a 1.0 backend never read `output_format`, whatever its describe document says.
        public var structuredOutput: Bool = false

        /// The capabilities as the JSON object `/status` and `/v1/models` show.
        public var json: JSONValue {
            [
                "streaming": .bool(streaming), "tools": .bool(tools), "vision": .bool(vision),
                "reasoning": .bool(reasoning), "reasoning_optional": .bool(reasoningOptional),
                "structured_output": .bool(structuredOutput),
            ]
        }
    }

    public var backend: String
    public var version: String
    public var available: Bool
    public var reason: String?
    public var reasonCode: String?
    public var models: [Model]
    /// Fields of the describe document beyond the documented ones (for example the private cloud's `upstreams`
    /// and `quota`), shown in `/status` as they are.
    public var details: JSONObject

    /// The largest `context_tokens` the host accepts (2^31 - 1): far beyond any model, and small enough that budget
    /// arithmetic on it never overflows.
    public static let maximumContextTokens = Int(Int32.max)

    /// The first ABI minor whose backends may declare `structured_output`.
    public static let structuredOutputMinor: UInt32 = 1

    /// Parses a describe document.
    ///
    /// - Parameter backendABIMinor: the ABI minor the backend reported in negotiation; capabilities added in a
    ///   later minor are ignored (false) for it.
    /// - Throws: a message saying which field is wrong.
    public init(document bytes: [UInt8], backendABIMinor: UInt32) throws(DescribeError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw DescribeError(message: "describe document is not valid JSON: \(error.message)")
        }
        guard let root = value.objectValue else { throw DescribeError(message: "describe document must be an object") }
        guard root["describe_version"]?.numberValue?.intValue == 1 else {
            throw DescribeError(message: "describe_version must be 1")
        }
        backend = root["backend"]?.stringValue ?? ""
        version = root["version"]?.stringValue ?? "unknown"
        available = root["available"]?.boolValue ?? true
        reason = root["reason"]?.stringValue
        reasonCode = root["reason_code"]?.stringValue
        guard let modelList = root["models"]?.arrayValue else {
            throw DescribeError(message: "describe document has no 'models' array")
        }
        var models: [Model] = []
        for (index, entry) in modelList.enumerated() {
            guard let id = entry["id"]?.stringValue, !id.isEmpty else {
                throw DescribeError(message: "models[\(index)].id must be a non-empty string")
            }
            // The numbers come from a backend (maybe another process): each is range-checked before any
            // arithmetic, so the defaults' `* 3` and `-` (and every later sum of budgets) cannot overflow and trap.
            // Absent or null means the default; anything else must be an integer in range.
            let contextField = entry["context_tokens"]?.nonNull
            let context = contextField.map { $0.numberValue?.intValue ?? 0 } ?? 4096
            guard (1...Self.maximumContextTokens).contains(context) else {
                throw DescribeError(
                    message: "models[\(index)].context_tokens must be an integer from 1 to \(Self.maximumContextTokens)")
            }
            func budget(_ field: String, default value: Int) throws(DescribeError) -> Int {
                let stated = entry[field]?.nonNull
                let budget = stated.map { $0.numberValue?.intValue ?? 0 } ?? value
                guard (1...context).contains(budget) else {
                    throw DescribeError(
                        message: "models[\(index)].\(field) must be an integer from 1 to context_tokens (\(context))"
                            + (stated == nil ? "; its default here is \(value)" : ""))
                }
                return budget
            }
            let maxInput = try budget("max_input_tokens", default: context * 3 / 4)
            let maxOutput = try budget("max_output_tokens", default: context - maxInput)
            let caps = entry["capabilities"]
            models.append(
                Model(
                    id: id, contextTokens: context, maxInputTokens: maxInput, maxOutputTokens: maxOutput,
                    capabilities: Capabilities(
                        streaming: caps?["streaming"]?.boolValue ?? true,
                        tools: caps?["tools"]?.boolValue ?? false,
                        vision: caps?["vision"]?.boolValue ?? false,
                        reasoning: caps?["reasoning"]?.boolValue ?? false,
                        reasoningOptional: caps?["reasoning_optional"]?.boolValue ?? true,
                        structuredOutput: backendABIMinor >= Self.structuredOutputMinor
                            && caps?["structured_output"]?.boolValue == true
                    )))
        }
        self.models = models
        var details = JSONObject()
        for (key, value) in root where !["describe_version", "backend", "version", "available", "reason", "reason_code", "models"].contains(key) {
            details[key] = value
        }
        self.details = details
    }
}

/// A describe document that the host cannot use.
public struct DescribeError: Error, Sendable, Hashable {
    public var message: String
}
