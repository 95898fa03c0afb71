// SPDX-License-Identifier: Apache-2.0
// grammar.cpp: what of a schema llama.cpp's grammar enforces, checked before a request is accepted, and the output
// grammar with number bounds enforced (llama.cpp's converter writes every `number` as an unbounded number).
#include "local.h"

#include "json-schema-to-grammar.h"
#include "json.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace afm_local {

namespace {

using json = nlohmann::json;

[[noreturn]] void invalid(const std::string &message) { throw BackendError(AFM_ERR_INVALID_REQUEST, message); }

/** `base.key`, or `base["key"]` when the key is not a plain name: the host's path format (AFMSchema's SchemaPath). */
std::string member(const std::string &base, const std::string &key) {
    bool plain = !key.empty();
    for (unsigned char c : key)
        plain = plain && (std::isalnum(c) || c == '_' || c == '-' || c == '$');
    if (plain) return base + "." + key;
    return base + "[" + json(key).dump() + "]";
}

/** The largest integer a double holds exactly (2^53 - 1), the host's limit for integer bounds. */
constexpr double kLargestExactInteger = 9007199254740991.0;

bool is_whole_bound(const json &value) {
    if (value.is_number_integer()) {
        if (value.is_number_unsigned()) return value.get<uint64_t>() <= (uint64_t)kLargestExactInteger;
        int64_t v = value.get<int64_t>();
        return v >= -(int64_t)kLargestExactInteger && v <= (int64_t)kLargestExactInteger;
    }
    if (!value.is_number_float()) return false;
    double d = value.get<double>();
    return std::isfinite(d) && std::floor(d) == d && std::fabs(d) <= kLargestExactInteger;
}

/** Whether a schema node allows numbers that are not integers (`"type": "number"` or `["number", "null"]`). */
bool is_number_type(const json &schema) {
    auto it = schema.find("type");
    if (it == schema.end()) return false;
    if (it->is_string()) return it->get<std::string>() == "number";
    if (it->is_array())
        for (const json &t : *it)
            if (t.is_string() && t.get<std::string>() == "number") return true;
    return false;
}

struct LimitWalk {
    bool output;       // the output schema (enforced exactly, else refused) or a tool's parameters
    int64_t &budget;   // grammar repetitions used so far by the request's schemas

    void count(const json &schema, const std::string &path, const char *lower, const char *upper) {
        int64_t low = 0, high = -1;
        for (const char *key : {lower, upper}) {
            auto it = schema.find(key);
            if (it == schema.end() || !it->is_number_integer()) continue;
            int64_t value = it->is_number_unsigned() ? (int64_t)std::min<uint64_t>(it->get<uint64_t>(), INT64_MAX)
                                                     : it->get<int64_t>();
            if (value > kMaxGrammarRepetition && (key == lower || output))
                invalid(member(path, key) + " is " + std::to_string(value) +
                        ": this backend's grammar (llama.cpp) enforces " +
                        (std::string(key).find("Length") != std::string::npos ? "string lengths" : "item counts") +
                        " up to " + std::to_string(kMaxGrammarRepetition) + "; lower it" +
                        (key == lower ? "" : ", or leave it out (an answer may then run until max_output_tokens)"));
            (key == lower ? low : high) = value;
        }
        // llama.cpp writes a bound of n as about n rules (a maximum above its limit as an unbounded repetition).
        int64_t cost = high >= 0 && high <= kMaxGrammarRepetition ? high : low;
        budget += cost;
        if (budget > kGrammarRepetitionBudget)
            invalid(member(path, high >= 0 ? upper : lower) + ": the length and count bounds of the request's schemas (minLength, maxLength, "
                                   "minItems, maxItems) add up to more than " +
                    std::to_string(kGrammarRepetitionBudget) +
                    " (the grammar spends one rule per unit of each bound); lower or remove some of them");
    }

    void number_bounds(const json &schema, const std::string &path) {
        if (!output || !is_number_type(schema) || schema.contains("enum") || schema.contains("const")) return;
        for (const char *key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
            auto it = schema.find(key);
            if (it == schema.end() || is_whole_bound(*it)) continue;
            invalid(member(path, key) + " is " + it->dump() +
                    ": this backend's grammar enforces bounds of a \"number\" only when they are whole numbers "
                    "from -9007199254740991 to 9007199254740991; use a whole-number bound, scale the value, or "
                    "use \"type\": \"integer\"");
        }
    }

    void node(const json &schema, const std::string &path) {
        if (!schema.is_object()) return;
        count(schema, path, "minLength", "maxLength");
        count(schema, path, "minItems", "maxItems");
        number_bounds(schema, path);
        if (auto it = schema.find("properties"); it != schema.end() && it->is_object())
            for (auto &[name, child] : it->items()) node(child, member(member(path, "properties"), name));
        if (auto it = schema.find("items"); it != schema.end()) node(*it, member(path, "items"));
        if (auto it = schema.find("anyOf"); it != schema.end() && it->is_array())
            for (size_t i = 0; i < it->size(); i++)
                node((*it)[i], member(path, "anyOf") + "[" + std::to_string(i) + "]");
        // Definitions last: a lifted root (`$defs.root`, a copy of the root) is reported where the client wrote it.
        for (const char *defs : {"$defs", "definitions"})
            if (auto it = schema.find(defs); it != schema.end() && it->is_object())
                for (auto &[name, child] : it->items()) node(child, member(member(path, defs), name));
    }
};

// --- Bounded numbers -------------------------------------------------------------------------------------------

struct Bound {
    bool present = false;
    int64_t value = 0;
    bool exclusive = false;
};

/** The body of llama.cpp's own rule for the integers in [low, high] (std::nullopt: unbounded on that side). */
std::string integer_range(std::optional<int64_t> low, std::optional<int64_t> high) {
    common_json schema = common_json::object({{"type", "integer"}});
    if (low) schema["minimum"] = *low;
    if (high) schema["maximum"] = *high;
    std::string grammar = json_schema_to_grammar(schema, /*force_gbnf*/ true);
    const std::string head = "root ::= ";
    size_t start = grammar.rfind("\n" + head);
    start = grammar.compare(0, head.size(), head) == 0 ? head.size()
            : start == std::string::npos             ? throw std::runtime_error("no root rule for an integer range")
                                                     : start + 1 + head.size();
    size_t end = grammar.find('\n', start);
    return grammar.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

/**
 * A GBNF body for the JSON numbers between two whole-number bounds, without exponents:
 * - an integer in range, optionally written with ".0";
 * - "k.F" (k >= 0, F ending in a non-zero digit, so a value in (k, k+1)) when every such value is in range:
 *   lower <= k and k + 1 <= upper, for inclusive and exclusive bounds alike;
 * - "-k.F" (a value in (-k-1, -k)) when lower <= -k-1 and -k <= upper.
 */
std::string number_range(const Bound &lower, const Bound &upper) {
    std::optional<int64_t> lo, hi;  // whole-number range of the integers themselves
    if (lower.present) lo = lower.exclusive ? lower.value + 1 : lower.value;
    if (upper.present) hi = upper.exclusive ? upper.value - 1 : upper.value;
    const std::string fraction = "\".\" [0-9]{0,15} [1-9]";
    std::vector<std::string> branches;
    if (!lo || !hi || *lo <= *hi) branches.push_back("(" + integer_range(lo, hi) + ") (\".0\")?");
    // Positive fractions: k in [max(lower, 0), upper - 1].
    int64_t pos_low = lower.present ? std::max<int64_t>(lower.value, 0) : 0;
    if (!upper.present || pos_low <= upper.value - 1) {
        std::optional<int64_t> pos_high;
        if (upper.present) pos_high = upper.value - 1;
        branches.push_back("(" + integer_range(pos_low, pos_high) + ") " + fraction);
    }
    // Negative fractions: k in [max(-upper, 0), -lower - 1].
    int64_t neg_low = upper.present ? std::max<int64_t>(-upper.value, 0) : 0;
    if (!lower.present || neg_low <= -lower.value - 1) {
        std::optional<int64_t> neg_high;
        if (lower.present) neg_high = -lower.value - 1;
        branches.push_back("\"-\" (" + integer_range(neg_low, neg_high) + ") " + fraction);
    }
    std::string body;
    for (const auto &b : branches) body += (body.empty() ? "" : " | ") + b;
    return body;
}

Bound read_bound(const common_json &schema, const char *inclusive, const char *exclusive) {
    Bound b;
    for (const char *key : {inclusive, exclusive}) {
        if (!schema.contains(key) || !schema.at(key).is_number()) continue;
        const common_json &v = schema.at(key);
        // Whole numbers within 2^53 (checked when the request was read).
        b.value = v.is_number_integer() ? v.get<int64_t>() : (int64_t)v.get<double>();
        b.present = true;
        b.exclusive = key == exclusive;
    }
    return b;
}

struct NumberRewrite {
    std::string marker;  // a string that occurs nowhere in the schema
    std::vector<std::string> rules;

    /** Replaces each bounded `number` node by a `const` marker (llama.cpp writes it as one literal) and keeps the
     *  number range it stands for. */
    void node(common_json &schema) {
        if (!schema.is_object()) return;
        for (const char *key : {"properties", "$defs", "definitions"})
            if (schema.contains(key) && schema.at(key).is_object())
                for (auto entry : schema.at(key).items()) node(entry.value());
        if (schema.contains("items")) node(schema.at("items"));
        if (schema.contains("anyOf") && schema.at("anyOf").is_array())
            for (size_t i = 0; i < schema.at("anyOf").size(); i++) node(schema.at("anyOf").at(i));
        if (!schema.contains("type") || schema.contains("enum") || schema.contains("const")) return;
        const common_json &type = schema.at("type");
        bool nullable = false, number = false;
        if (type.is_string()) {
            number = type.get<std::string>() == "number";
        } else if (type.is_array()) {
            for (size_t i = 0; i < type.size(); i++) {
                if (!type.at(i).is_string()) continue;
                number = number || type.at(i).get<std::string>() == "number";
                nullable = nullable || type.at(i).get<std::string>() == "null";
            }
        }
        if (!number) return;
        Bound lower = read_bound(schema, "minimum", "exclusiveMinimum");
        Bound upper = read_bound(schema, "maximum", "exclusiveMaximum");
        if (!lower.present && !upper.present) return;
        std::string name = marker + "value-" + std::to_string(rules.size());
        rules.push_back(number_range(lower, upper));
        common_json literal = common_json::object({{"const", name}});
        if (nullable) {
            common_json replacement = common_json::object();
            replacement["anyOf"] = common_json::array({literal, common_json::object({{"type", "null"}})});
            schema = replacement;
        } else {
            schema = literal;
        }
    }
};

}  // namespace

void check_schema_limits(const nlohmann::json &schema, const std::string &where, bool output, int64_t &budget) {
    LimitWalk walk{output, budget};
    walk.node(schema, where);
}

std::string output_schema_grammar(const std::string &schema_text) {
    common_json schema = common_json::parse(schema_text);
    NumberRewrite rewrite;
    // A marker that no string of the schema contains, so the literal it becomes occurs only where it was put.
    rewrite.marker = "afm-number-bound-";
    while (schema_text.find(rewrite.marker) != std::string::npos) rewrite.marker += "x";
    rewrite.node(schema);
    std::string grammar = json_schema_to_grammar(schema, /*force_gbnf*/ true);
    if (rewrite.rules.empty()) return grammar;
    for (size_t i = 0; i < rewrite.rules.size(); i++) {
        // The converter writes a const string as the literal "\"<text>\"" (its JSON text, quoted for GBNF).
        const std::string literal = "\"\\\"" + rewrite.marker + "value-" + std::to_string(i) + "\\\"\"";
        // Named after the marker too, so no rule the converter derived from the schema's names has this name.
        const std::string rule = rewrite.marker + "rule-" + std::to_string(i);
        size_t found = 0;
        for (size_t at = grammar.find(literal); at != std::string::npos; at = grammar.find(literal, at)) {
            // marker0 must not match inside marker01: the literal ends with its closing quotes.
            grammar.replace(at, literal.size(), rule);
            at += rule.size();
            found++;
        }
        if (found == 0) throw std::runtime_error("a bounded number was lost while building the grammar");
        grammar += rule + " ::= " + rewrite.rules[i] + "\n";
    }
    return grammar;
}

}  // namespace afm_local
