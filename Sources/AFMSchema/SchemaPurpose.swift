// SPDX-License-Identifier: Apache-2.0

/// What a schema describes: the subset is the same, only the top of the schema differs.
public enum SchemaPurpose: Sendable, Hashable {
    /// A function tool's `parameters`: the top is always one object (`{}` means "no arguments").
    case toolParameters
    /// A structured answer (`text.format` `json_schema`, Chat Completions `response_format`): the top may be any
    /// schema of the subset, but not an empty one (`{}` would allow any JSON; `json_object` says that).
    case output

    /// How messages name the top of the schema.
    var rootName: String {
        switch self {
        case .toolParameters: "parameters"
        case .output: "the schema"
        }
    }
}
