// SPDX-License-Identifier: Apache-2.0

/// The one table that says what the gateway does with each top-level field of `POST /v1/responses`.
///
/// Validation is driven by it (unknown fields are refused with their name in `param`), and so is the list in
/// `docs/responses-api.md`. DESIGN §4: refuse what we cannot do instead of emulating it, but accept and echo the
/// fields real clients send routinely (Codex, Copilot, the Agents SDK) and that do not change the answer.
public enum RequestPolicy {
    public typealias Disposition = PolicyTable.Disposition

    /// The table of `POST /v1/responses`.
    public static let table = PolicyTable([
        .init("model", .supported, "a served model id"),
        .init("input", .supported, "a string, or message items with input_text / output_text parts"),
        .init("instructions", .supported, "system text; kept apart from the conversation"),
        .init("stream", .supported, "true: Server-Sent Events; false: one JSON body"),
        .init("temperature", .supported, "0 to 2"),
        .init("top_p", .supported, "0 to 1"),
        .init("max_output_tokens", .supported, "1 or more; clamped to the model's output budget (and echoed)"),
        .init("tools", .supported, "function tools are passed to the backend"),
        .init("tool_choice", .supported, "auto, none, required, or {type:function,name}"),
        .init("parallel_tool_calls", .supported, "boolean"),
        .init("reasoning", .supported, "object or null"),
        .init("include", .supported, "list of strings"),
        .init("truncation", .supported, "auto or disabled"),
        .init("text", .supported, "format text, json_object or json_schema (enforced and checked; echoed); verbosity is echoed"),
        .init("metadata", .ignored, "echoed"),
        .init("user", .ignored, "echoed"),
        .init("safety_identifier", .ignored, "echoed"),
        .init("prompt_cache_key", .ignored, "a cache-affinity hint; echoed"),
        .init("prompt_cache_retention", .ignored, "echoed"),
        .init("service_tier", .ignored, "echoed"),
        .init("client_metadata", .ignored, "sent by Codex"),
        .init("stream_options", .ignored, "obfuscation is never added"),
        .init("store", .ignored, "absent or false; true is refused"),
        .init("top_logprobs", .ignored, "0 only"),
        .init("max_tool_calls", .ignored, "echoed"),
        .init(
            "previous_response_id",
            .rejected(
                code: "previous_response_not_found",
                message: "This gateway stores no responses; resend the full conversation in 'input' instead of previous_response_id."),
            "clients retry statelessly"
        ),
        .init(
            "conversation",
            .rejected(code: "unsupported_parameter", message: "Conversations are not stored by this gateway; send the full history in 'input'."),
            ""
        ),
        .init("background", .rejected(code: "unsupported_parameter", message: "Background responses are not supported."), "false is accepted",
            accepted: false),
        .init("prompt", .rejected(code: "unsupported_parameter", message: "Stored prompt templates are not supported."), ""),
    ])

    /// Every top-level field, in documentation order.
    public static var fields: [PolicyTable.Field] { table.fields }

    /// The disposition of a top-level field, or nil when the gateway does not know it.
    public static func disposition(of field: String) -> Disposition? {
        table.disposition(of: field)
    }
}
