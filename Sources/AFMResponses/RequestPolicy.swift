// SPDX-License-Identifier: Apache-2.0
import AFMCore

/// The one table that says what the gateway does with each top-level field of `POST /v1/responses`.
///
/// Validation is driven by it (unknown fields are refused with their name in `param`), and so is the list in
/// `docs/responses-api.md`. DESIGN §4: refuse what we cannot do instead of emulating it, but accept and echo the
/// fields real clients send routinely (Codex, Copilot, the Agents SDK) and that do not change the answer.
public enum RequestPolicy {
    /// What happens to one field.
    public enum Disposition: Sendable, Hashable {
        /// Honoured.
        case supported
        /// Accepted, has no effect, and is echoed in the response object.
        case ignored
        /// Refused with 400 and this error code.
        case rejected(code: String, message: String)
    }

    /// Every top-level field the gateway knows, in documentation order.
    public static let fields: [(name: String, disposition: Disposition, note: String)] = [
        ("model", .supported, "a served model id"),
        ("input", .supported, "a string, or message items with input_text / output_text parts"),
        ("instructions", .supported, "system text; kept apart from the conversation"),
        ("stream", .supported, "true: Server-Sent Events; false: one JSON body"),
        ("temperature", .supported, "0 to 2"),
        ("top_p", .supported, "0 to 1"),
        ("max_output_tokens", .supported, "1 or more; clamped to the model's output budget (and echoed)"),
        ("tools", .supported, "function tools are passed to the backend"),
        ("tool_choice", .supported, "auto, none, required, or {type:function,name}"),
        ("parallel_tool_calls", .supported, "boolean"),
        ("reasoning", .supported, "object or null"),
        ("include", .supported, "list of strings"),
        ("truncation", .supported, "auto or disabled"),
        ("text", .supported, "format text, json_object or json_schema (enforced and checked; echoed); verbosity is echoed"),
        ("metadata", .ignored, "echoed"),
        ("user", .ignored, "echoed"),
        ("safety_identifier", .ignored, "echoed"),
        ("prompt_cache_key", .ignored, "a cache-affinity hint; echoed"),
        ("prompt_cache_retention", .ignored, "echoed"),
        ("service_tier", .ignored, "echoed"),
        ("client_metadata", .ignored, "sent by Codex"),
        ("stream_options", .ignored, "obfuscation is never added"),
        ("store", .ignored, "absent or false; true is refused"),
        ("top_logprobs", .ignored, "0 only"),
        ("max_tool_calls", .ignored, "echoed"),
        (
            "previous_response_id",
            .rejected(
                code: "previous_response_not_found",
                message: "This gateway stores no responses; resend the full conversation in 'input' instead of previous_response_id."),
            "clients retry statelessly"
        ),
        (
            "conversation",
            .rejected(code: "unsupported_parameter", message: "Conversations are not stored by this gateway; send the full history in 'input'."),
            ""
        ),
        ("background", .rejected(code: "unsupported_parameter", message: "Background responses are not supported."), "false is accepted"),
        ("prompt", .rejected(code: "unsupported_parameter", message: "Stored prompt templates are not supported."), ""),
    ]

    private static let index: [String: Disposition] = Dictionary(uniqueKeysWithValues: fields.map { ($0.name, $0.disposition) })

    /// The disposition of a top-level field, or nil when the gateway does not know it.
    public static func disposition(of field: String) -> Disposition? {
        index[field]
    }
}
