// SPDX-License-Identifier: Apache-2.0
// request.cpp: the generation request document (docs/backend-abi.md §8.2) -> llama.cpp chat messages and tools.
#include "local.h"

#include "json_release.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

namespace afm_local {

using json = nlohmann::json;

namespace {

constexpr int kMaxDepth = 128;

/** Rejects documents nested deeper than kMaxDepth before parsing (keeps recursion in dump() bounded). */
bool depth_ok(const char *p, size_t n) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxDepth) return false;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return true;
}

[[noreturn]] void invalid(const std::string &message) { throw BackendError(AFM_ERR_INVALID_REQUEST, message); }

const json *field(const json &object, const char *key) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
}

std::string string_field(const json &object, const char *key, const std::string &where, bool required) {
    const json *v = field(object, key);
    if (!v) {
        if (required) invalid(where + "." + key + " is required");
        return {};
    }
    if (!v->is_string()) invalid(where + "." + key + " must be a string");
    return v->get<std::string>();
}

/** Serializes `output_format.schema` and each `tools[i].parameters` of a request document as written, members in
 *  the document's order, from one SAX pass. The DOM parse (`json`) sorts keys, and an order-preserving DOM
 *  (`nlohmann::ordered_json`) is not allocation-safe: its vector-backed objects copy nested values while growing,
 *  and when an allocation fails there the copies' destructors allocate inside noexcept and the process terminates
 *  (unit test parse_with_memory_exhausted). Here only flat strings grow, so a failed allocation simply throws. */
class OrderedSubtrees final : public nlohmann::json_sax<json> {
public:
    std::string output_schema;                 ///< empty when absent
    std::vector<std::string> tool_parameters;  ///< per tools[] index; empty when absent

    bool null() override { return scalar("null"); }
    bool boolean(bool value) override { return scalar(value ? "true" : "false"); }
    bool number_integer(number_integer_t value) override { return scalar(std::to_string(value)); }
    bool number_unsigned(number_unsigned_t value) override { return scalar(std::to_string(value)); }
    bool number_float(number_float_t, const string_t &text) override { return scalar(text); }
    bool string(string_t &value) override {
        begin_value();
        if (out_) append_quoted(value);
        end_value();
        return true;
    }
    bool binary(binary_t &) override { return false; }
    bool start_object(std::size_t) override { return open(true); }
    bool end_object() override { return close('}'); }
    bool start_array(std::size_t) override { return open(false); }
    bool end_array() override { return close(']'); }
    bool key(string_t &name) override {
        Frame &frame = frames_.back();
        frame.key = name;
        if (out_ && frames_.size() > capture_depth_) {
            if (!frame.first) out_->push_back(',');
            frame.first = false;
            append_quoted(name);
            out_->push_back(':');
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) override { return false; }

private:
    struct Frame {
        bool object;
        std::string key;   // the member being read (objects)
        size_t index = 0;  // the element being read (arrays)
        bool first = true; // nothing written into it yet (inside a capture)
    };
    std::vector<Frame> frames_;
    std::string *out_ = nullptr;
    size_t capture_depth_ = 0;

    std::string *target() {
        if (frames_.size() == 2 && frames_[0].object && frames_[0].key == "output_format" && frames_[1].object &&
            frames_[1].key == "schema")
            return &output_schema;
        if (frames_.size() == 3 && frames_[0].object && frames_[0].key == "tools" && !frames_[1].object &&
            frames_[2].object && frames_[2].key == "parameters") {
            size_t i = frames_[1].index;
            if (tool_parameters.size() <= i) tool_parameters.resize(i + 1);
            return &tool_parameters[i];
        }
        return nullptr;
    }
    void begin_value() {
        if (!out_) {
            if (std::string *t = target()) {
                out_ = t;
                out_->clear();
                capture_depth_ = frames_.size();
            }
        } else if (frames_.size() > capture_depth_ && !frames_.back().object) {
            Frame &frame = frames_.back();
            if (!frame.first) out_->push_back(',');
            frame.first = false;
        }
    }
    void end_value() {
        if (out_ && frames_.size() == capture_depth_) out_ = nullptr;
        if (!frames_.empty() && !frames_.back().object) frames_.back().index++;
    }
    bool scalar(const std::string &text) {
        begin_value();
        if (out_) out_->append(text);
        end_value();
        return true;
    }
    bool open(bool object) {
        begin_value();
        if (out_) out_->push_back(object ? '{' : '[');
        frames_.push_back(Frame{object, {}, 0, true});
        return true;
    }
    bool close(char bracket) {
        frames_.pop_back();
        if (out_) out_->push_back(bracket);
        end_value();
        return true;
    }
    void append_quoted(const std::string &text) {
        static const char *hex = "0123456789abcdef";
        out_->push_back('"');
        for (unsigned char c : text) {
            if (c == '"' || c == '\\') {
                out_->push_back('\\');
                out_->push_back(static_cast<char>(c));
            } else if (c < 0x20) {
                out_->append("\\u00");
                out_->push_back(hex[c >> 4]);
                out_->push_back(hex[c & 15]);
            } else {
                out_->push_back(static_cast<char>(c));
            }
        }
        out_->push_back('"');
    }
};

/** The text of a message's content: a string, or an array of parts ("text"; "image" is refused). */
std::string content_text(const json &content, const std::string &where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) invalid(where + ".content must be an array of parts or a string");
    std::string text;
    size_t i = 0;
    for (const json &part : content) {
        std::string at = where + ".content[" + std::to_string(i++) + "]";
        if (!part.is_object()) invalid(at + " must be an object");
        std::string type = string_field(part, "type", at, true);
        if (type == "text" || type == "input_text" || type == "output_text") {
            std::string piece = string_field(part, "text", at, true);
            if (!text.empty() && !piece.empty()) text += "\n";
            text += piece;
        } else if (type == "image" || type == "input_image") {
            throw BackendError(AFM_ERR_UNSUPPORTED_CAPABILITY, "this model does not accept images (" + at + ")");
        } else {
            invalid(at + ".type \"" + type.substr(0, 40) + "\" is not supported");
        }
    }
    return text;
}

std::optional<float> number_field(const json &object, const char *key, double min, double max) {
    const json *v = field(object, key);
    if (!v) return std::nullopt;
    if (!v->is_number()) invalid(std::string(key) + " must be a number or null");
    double d = v->get<double>();
    if (!std::isfinite(d) || d < min || d > max)
        invalid(std::string(key) + " must be in " + std::to_string(min) + ".." + std::to_string(max));
    return (float)d;
}

}  // namespace

Request parse_request(afm_str request_json) {
    if (!request_json.data && request_json.size) invalid("request: bad span");
    const char *begin = request_json.data ? request_json.data : "";
    if (!depth_ok(begin, (size_t)request_json.size)) invalid("request: nested too deeply");
    json doc;
    JsonReleaser<json> release{doc};  // destroying it, or a partial tree, must not allocate (json_release.h)
    if (!json_parse_into(doc, begin, begin + request_json.size)) invalid("request: not valid JSON");
    if (!doc.is_object()) invalid("request: not a JSON object");

    if (const json *v = field(doc, "request_version")) {
        if (!v->is_number_integer() || v->get<int64_t>() != 1)
            throw BackendError(AFM_ERR_INCOMPATIBLE, "request_version " + v->dump() + " is not supported (1 is)");
    }
    Request r;
    r.model = string_field(doc, "model", "request", true);

    // System, instructions and developer texts, in order, become one leading system message: many chat
    // templates accept a system message only at the start.
    std::string system;
    if (const json *sys = field(doc, "system")) {
        if (!sys->is_array()) invalid("request.system must be an array of strings");
        for (const json &s : *sys) {
            if (!s.is_string()) invalid("request.system must be an array of strings");
            std::string text = s.get<std::string>();
            if (text.empty()) continue;
            if (!system.empty()) system += "\n\n";
            system += text;
        }
    }
    if (!system.empty()) {
        common_chat_msg msg;
        msg.role = "system";
        msg.content = system;
        r.messages.push_back(std::move(msg));
    }

    std::map<std::string, std::string> call_names;  // call_id -> function name
    if (const json *input = field(doc, "input")) {
        if (!input->is_array()) invalid("request.input must be an array");
        size_t i = 0;
        for (const json &item : *input) {
            std::string at = "input[" + std::to_string(i++) + "]";
            if (!item.is_object()) invalid(at + " must be an object");
            std::string type = string_field(item, "type", at, true);
            if (type == "message") {
                std::string role = string_field(item, "role", at, true);
                if (role != "user" && role != "assistant") invalid(at + ".role must be \"user\" or \"assistant\"");
                const json *content = field(item, "content");
                common_chat_msg msg;
                msg.role = role;
                msg.content = content ? content_text(*content, at) : std::string();
                r.messages.push_back(std::move(msg));
            } else if (type == "function_call") {
                common_chat_tool_call call;
                call.name = string_field(item, "name", at, true);
                call.id = string_field(item, "call_id", at, false);
                const json *args = field(item, "arguments");
                if (!args) call.arguments = "{}";
                else if (args->is_string()) call.arguments = args->get<std::string>();
                else if (args->is_object()) call.arguments = args->dump();
                else invalid(at + ".arguments must be a string");
                // Checked without building a document (whose destructor may allocate, json_release.h).
                size_t first = call.arguments.find_first_not_of(" \t\r\n");
                if (first == std::string::npos || call.arguments[first] != '{' || !json::accept(call.arguments))
                    invalid(at + ".arguments is not a JSON object");
                if (!call.id.empty()) call_names[call.id] = call.name;
                // Consecutive calls (and a preceding assistant text) form one assistant turn.
                if (r.messages.empty() || r.messages.back().role != "assistant") {
                    common_chat_msg msg;
                    msg.role = "assistant";
                    r.messages.push_back(std::move(msg));
                }
                r.messages.back().tool_calls.push_back(std::move(call));
            } else if (type == "function_call_output") {
                common_chat_msg msg;
                msg.role = "tool";
                msg.tool_call_id = string_field(item, "call_id", at, false);
                const json *output = field(item, "output");
                if (!output) msg.content = "";
                else if (output->is_string()) msg.content = output->get<std::string>();
                else if (output->is_array()) msg.content = content_text(*output, at);
                else msg.content = output->dump();
                auto it = call_names.find(msg.tool_call_id);
                if (it != call_names.end()) msg.tool_name = it->second;
                r.messages.push_back(std::move(msg));
            } else if (type == "reasoning") {
                // Opaque state from a reasoning backend; this model does not reason, so there is nothing to replay.
            } else {
                invalid(at + ".type \"" + type.substr(0, 40) + "\" is not supported");
            }
        }
    }

    if (const json *tools = field(doc, "tools")) {
        if (!tools->is_array()) invalid("request.tools must be an array");
        size_t i = 0;
        for (const json &tool : *tools) {
            std::string at = "tools[" + std::to_string(i++) + "]";
            if (!tool.is_object()) invalid(at + " must be an object");
            common_chat_tool t;
            t.name = string_field(tool, "name", at, true);
            if (t.name.empty()) invalid(at + ".name must not be empty");
            t.description = string_field(tool, "description", at, false);
            const json *params = field(tool, "parameters");
            if (!params) t.parameters = R"({"type":"object","properties":{}})";
            else if (params->is_object()) t.parameters = params->dump();
            else invalid(at + ".parameters must be a JSON Schema object");
            r.tools.push_back(std::move(t));
        }
    }

    if (const json *choice = field(doc, "tool_choice")) {
        std::string mode;
        if (choice->is_string()) mode = choice->get<std::string>();
        else if (choice->is_object()) mode = string_field(*choice, "mode", "tool_choice", true);
        else invalid("tool_choice must be an object");
        if (mode == "auto") r.tool_mode = ToolMode::Auto;
        else if (mode == "none") r.tool_mode = ToolMode::None;
        else if (mode == "required") r.tool_mode = ToolMode::Required;
        else if (mode == "function") {
            r.tool_mode = ToolMode::Function;
            r.tool_name = string_field(*choice, "name", "tool_choice", true);
        } else invalid("tool_choice.mode \"" + mode.substr(0, 40) + "\" is not supported");
    }
    if ((r.tool_mode == ToolMode::Required || r.tool_mode == ToolMode::Function) && r.tools.empty())
        invalid("tool_choice requires a tool call but request.tools is empty");
    if (r.tool_mode == ToolMode::Function) {
        bool found = false;
        for (const auto &t : r.tools) found = found || t.name == r.tool_name;
        if (!found) invalid("tool_choice names \"" + r.tool_name.substr(0, 64) + "\", which is not in request.tools");
    }

    if (const json *p = field(doc, "parallel_tool_calls")) {
        if (!p->is_boolean()) invalid("parallel_tool_calls must be a boolean");
        r.parallel_tool_calls = p->get<bool>();
    }
    if (const json *m = field(doc, "max_output_tokens")) {
        if (!m->is_number_integer() || m->get<int64_t>() < 1) invalid("max_output_tokens must be a positive integer");
        r.max_output_tokens = m->get<int64_t>();
    }
    r.temperature = number_field(doc, "temperature", 0.0, 100.0);
    r.top_p = number_field(doc, "top_p", 0.0, 1.0);
    if (const json *s = field(doc, "seed")) {
        if (!s->is_number_integer()) invalid("seed must be an integer");
        // llama.cpp's sampler takes 32 bits and reads 0xFFFFFFFF as "pick a random seed": keep every seed fixed.
        auto bits = static_cast<uint32_t>(s->is_number_unsigned() ? s->get<uint64_t>()
                                                                  : static_cast<uint64_t>(s->get<int64_t>()));
        r.seed = bits == LLAMA_DEFAULT_SEED ? bits - 1 : bits;
    }
    if (const json *k = field(doc, "top_k")) {
        if (!k->is_number_integer() || (!k->is_number_unsigned() && k->get<int64_t>() < 1))
            invalid("top_k must be a positive integer");
        uint64_t value = k->is_number_unsigned() ? k->get<uint64_t>() : static_cast<uint64_t>(k->get<int64_t>());
        r.top_k = static_cast<int32_t>(std::min<uint64_t>(value, INT32_MAX));
    }
    if (const json *f = field(doc, "output_format")) {
        if (!f->is_object()) invalid("output_format must be an object");
        std::string type = string_field(*f, "type", "output_format", true);
        if (type == "json_object") {
            r.output = OutputKind::JsonObject;
        } else if (type == "json_schema") {
            r.output = OutputKind::JsonSchema;
        } else if (type != "text") {
            invalid("output_format.type \"" + type.substr(0, 40) + "\" is not supported");
        }
    }
    if (r.output == OutputKind::JsonSchema || !r.tools.empty()) {
        // Property order is part of the contract (the model writes members in schema order, docs/responses-api.md),
        // and `json` sorts keys: the schemas are taken from the document as written.
        OrderedSubtrees ordered;
        if (!json::sax_parse(begin, begin + request_json.size, &ordered)) invalid("request: not valid JSON");
        if (r.output == OutputKind::JsonSchema) {
            if (ordered.output_schema.empty() || ordered.output_schema[0] != '{')
                invalid("output_format.schema must be a JSON Schema object");
            r.output_schema = std::move(ordered.output_schema);
        }
        for (size_t i = 0; i < r.tools.size() && i < ordered.tool_parameters.size(); i++) {
            const std::string &params = ordered.tool_parameters[i];
            if (!params.empty() && params[0] == '{') r.tools[i].parameters = params;
        }
    }
    // What llama.cpp's grammar cannot enforce is refused here, naming the keyword, rather than left silently open
    // (the host would then fail the answer) or left to allocate without bound (grammar.cpp).
    int64_t budget = 0, visits = 0;
    if (r.output == OutputKind::JsonSchema)
        if (const json *f = field(doc, "output_format"); f && f->is_object())
            if (const json *schema = field(*f, "schema"))
                check_schema_limits(*schema, "output_format.schema", /*output*/ true, budget, visits);
    if (const json *tools = field(doc, "tools")) {
        for (size_t i = 0; i < tools->size(); i++)
            if (const json *params = field((*tools)[i], "parameters"))
                check_schema_limits(*params, "tools[" + std::to_string(i) + "].parameters", /*output*/ false, budget,
                                    visits);
    }
    if (const json *e = field(doc, "reasoning_effort")) {
        if (!e->is_string()) invalid("reasoning_effort must be a string or null");
        // This backend's models do not reason (capabilities.reasoning is false); "none" and the host's
        // pre-check make anything else unreachable, and ignoring it is harmless.
    }
    return r;
}

}  // namespace afm_local
