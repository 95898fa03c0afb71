// SPDX-License-Identifier: Apache-2.0
// grammar.cpp: what of a schema llama.cpp's grammar enforces, checked before a request is accepted, and the output
// grammar with number bounds enforced (llama.cpp's converter writes every `number` as an unbounded number).
#include "local.h"

#include "json-schema-to-grammar.h"
#include "json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <vector>

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
    if (auto hook = g_converted_grammar.load(std::memory_order_acquire)) hook(grammar);
    const std::string head = "root ::= ";
    size_t start = grammar.rfind("\n" + head);
    // Without one, llama.cpp's converter changed (not the request): the server's fault.
    start = grammar.compare(0, head.size(), head) == 0 ? head.size()
            : start == std::string::npos ? throw BackendError(AFM_ERR_INTERNAL, "llama.cpp's schema converter wrote no "
                                                                                "root rule for an integer range")
                                         : start + 1 + head.size();
    size_t end = grammar.find('\n', start);
    return grammar.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

/** Significant digits a decimal keeps through a double and back (DBL_DIG): two different decimals of at most 15
 *  significant digits are different doubles, so such a fraction never lands on a whole-number bound. */
constexpr int kExactDigits = 15;

/** The decimal digits of k (k >= 0). */
int decimal_digits(int64_t k) {
    int n = 1;
    for (; k >= 10; k /= 10) n++;
    return n;
}

/** ".F": F of at most `most` digits (most >= 1) ending in a non-zero digit. */
std::string fraction(int most) { return "\".\" [0-9]{0," + std::to_string(most - 1) + "} [1-9]"; }

/**
 * `sign` "k.F" for k in [low, high] (high: unbounded when absent). `tight_low`/`tight_high`: the value at that end
 * (k itself, or k + 1, in magnitude) is an exclusive bound, which a long fraction can round onto as a double
 * (`1.9999999999999999` is 2.0, and the host would then refuse the answer for exclusiveMaximum 2): that k's
 * fraction keeps to kExactDigits significant digits in all, and a k of 15 digits or more has none.
 */
void fraction_branches(std::vector<std::string> &branches, const std::string &sign, int64_t low,
                       std::optional<int64_t> high, bool tight_low, bool tight_high) {
    if (high && low > *high) return;
    std::vector<int64_t> tight;
    if (tight_low) tight.push_back(low);
    if (tight_high && high && !(tight_low && *high == low)) tight.push_back(*high);
    for (int64_t k : tight) {
        int most = kExactDigits - decimal_digits(k);
        if (most >= 1) branches.push_back(sign + "\"" + std::to_string(k) + "\" " + fraction(most));
    }
    int64_t mid_low = tight_low ? low + 1 : low;
    std::optional<int64_t> mid_high = high;
    if (tight_high && high) mid_high = *high - 1;
    if (!mid_high || mid_low <= *mid_high)
        branches.push_back(sign + "(" + integer_range(mid_low, mid_high) + ") " + fraction(kExactDigits + 1));
}

/**
 * A GBNF body for the JSON numbers between two whole-number bounds, without exponents:
 * - an integer in range, optionally written with ".0";
 * - "k.F" (k >= 0, F ending in a non-zero digit, so a value in (k, k+1)) when every such value is in range:
 *   lower <= k and k + 1 <= upper, for inclusive and exclusive bounds alike;
 * - "-k.F" (a value in (-k-1, -k)) when lower <= -k-1 and -k <= upper.
 * Next to an exclusive bound (other than 0) the fraction is shortened so that its double stays off the bound.
 */
std::string number_range(const Bound &lower, const Bound &upper) {
    std::optional<int64_t> lo, hi;  // whole-number range of the integers themselves
    if (lower.present) lo = lower.exclusive ? lower.value + 1 : lower.value;
    if (upper.present) hi = upper.exclusive ? upper.value - 1 : upper.value;
    std::vector<std::string> branches;
    if (!lo || !hi || *lo <= *hi) branches.push_back("(" + integer_range(lo, hi) + ") (\".0\")?");
    // Positive fractions: k in [max(lower, 0), upper - 1].
    int64_t pos_low = lower.present ? std::max<int64_t>(lower.value, 0) : 0;
    if (!upper.present || pos_low <= upper.value - 1) {
        std::optional<int64_t> pos_high;
        if (upper.present) pos_high = upper.value - 1;
        fraction_branches(branches, "", pos_low, pos_high,
                          lower.present && lower.exclusive && lower.value > 0 && pos_low == lower.value,
                          upper.present && upper.exclusive);
    }
    // Negative fractions: k in [max(-upper, 0), -lower - 1].
    int64_t neg_low = upper.present ? std::max<int64_t>(-upper.value, 0) : 0;
    if (!lower.present || neg_low <= -lower.value - 1) {
        std::optional<int64_t> neg_high;
        if (lower.present) neg_high = -lower.value - 1;
        fraction_branches(branches, "\"-\" ", neg_low, neg_high,
                          upper.present && upper.exclusive && upper.value < 0 && neg_low == -upper.value,
                          lower.present && lower.exclusive);
    }
    std::string body;
    for (const auto &b : branches) body += (body.empty() ? "" : " | ") + b;
    return body;
}

template <typename Json>
Bound read_bound(const Json &schema, const char *inclusive, const char *exclusive) {
    Bound b;
    for (const char *key : {inclusive, exclusive}) {
        if (!schema.contains(key) || !schema.at(key).is_number()) continue;
        const Json &v = schema.at(key);
        // Whole numbers within 2^53 (checked when the request was read).
        b.value = v.is_number_integer() ? v.template get<int64_t>() : (int64_t)v.template get<double>();
        b.present = true;
        b.exclusive = key == exclusive;
    }
    return b;
}

// --- Limits ----------------------------------------------------------------------------------------------------

/** A count keyword's value as llama.cpp can meet it: clamped to [0, INT32_MAX] (it reads counts as `int` and refuses
 *  negative ones), so no value makes the budget's sum negative or overflow it. */
int64_t count_value(const json &value) {
    if (value.is_number_unsigned()) return (int64_t)std::min<uint64_t>(value.get<uint64_t>(), INT32_MAX);
    return std::clamp<int64_t>(value.get<int64_t>(), 0, INT32_MAX);
}

/** A bound of an integer as llama.cpp reads it (a fraction rounded inwards), kept within ±2^62 so that the +1/-1 of
 *  an exclusive bound cannot overflow; std::nullopt when absent or not a number (llama.cpp refuses those itself). */
std::optional<int64_t> integer_bound(const json &schema, const char *inclusive, const char *exclusive, bool lower) {
    constexpr int64_t kFar = (int64_t)1 << 62;
    for (const char *key : {inclusive, exclusive}) {
        auto it = schema.find(key);
        if (it == schema.end()) continue;
        if (!it->is_number()) return std::nullopt;
        int64_t v;
        if (it->is_number_unsigned()) {
            v = (int64_t)std::min<uint64_t>(it->get<uint64_t>(), kFar);
        } else if (it->is_number_integer()) {
            v = std::clamp<int64_t>(it->get<int64_t>(), -kFar, kFar);
        } else {
            double d = it->get<double>();
            if (std::isnan(d)) return std::nullopt;
            d = std::clamp(lower == (key == inclusive) ? std::ceil(d) : std::floor(d), -(double)kFar, (double)kFar);
            v = (int64_t)d;
        }
        if (key == exclusive) v += lower ? 1 : -1;
        return v;
    }
    return std::nullopt;
}

/** Grammar text of a number or integer range per unit of the budget: measured, a bounded number's rule costs the
 *  grammar parser about what 8 of its bytes' worth of `maxLength` units do (±2^53: ~11 KB, ~1,400 units; 0..100:
 *  ~250 B, ~30 units). */
constexpr int64_t kRangeBytesPerUnit = 8;

/** How many schema nodes the walk below visits at most: llama.cpp expands a `type` array into one copy of the node
 *  per type, and a `$ref` into its target, so nesting can multiply a small schema. */
constexpr int64_t kMaxExpandedNodes = 200000;

struct LimitWalk {
    bool output;          // the output schema (enforced exactly, else refused) or a tool's parameters
    int64_t &budget;      // grammar repetitions used so far by the request's schemas
    const json &root;     // for `$ref`s
    std::string where;    // the root's path
    std::set<std::string> walked_refs;                          // each target is built once by llama.cpp
    std::vector<std::pair<const json *, std::string>> pending;  // `$ref` targets and definitions, walked last
    int64_t &visits;      // schema nodes expanded so far by the request's schemas (one cap for all of them)

    void charge(int64_t cost, const std::string &path) {
        budget = cost > kGrammarRepetitionBudget - budget ? kGrammarRepetitionBudget + 1 : budget + cost;
        if (budget > kGrammarRepetitionBudget)
            invalid(path + ": the length and count bounds (minLength, maxLength, minItems, maxItems) and number "
                           "ranges (minimum, maximum, exclusiveMinimum, exclusiveMaximum of a number or integer) of "
                           "the request's schemas add up to more than " + std::to_string(kGrammarRepetitionBudget) +
                    " grammar rules (one per unit of a length or count bound; a range costs by its digits, ±2^53 "
                    "about 1,400); lower or remove some of them");
    }

    void count(const json &schema, const std::string &path, const char *lower, const char *upper) {
        int64_t low = 0, high = -1;
        for (const char *key : {lower, upper}) {
            auto it = schema.find(key);
            if (it == schema.end() || !it->is_number_integer()) continue;
            int64_t value = count_value(*it);
            if (value > kMaxGrammarRepetition && (key == lower || output))
                invalid(member(path, key) + " is " + it->dump() +
                        ": this backend's grammar (llama.cpp) enforces " +
                        (std::string(key).find("Length") != std::string::npos ? "string lengths" : "item counts") +
                        " up to " + std::to_string(kMaxGrammarRepetition) + "; lower it" +
                        (key == lower ? "" : ", or leave it out (an answer may then run until max_output_tokens)"));
            (key == lower ? low : high) = value;
        }
        // llama.cpp writes a bound of n as about n rules (a maximum above its limit as an unbounded repetition).
        int64_t cost = high >= 0 && high <= kMaxGrammarRepetition ? high : low;
        if (cost > 0) charge(cost, member(path, high >= 0 ? upper : lower));
    }

    void number_bounds(const json &schema, const std::string &path) {
        if (!output) return;  // (a tool's `number` bounds are llama.cpp's: not in its grammar at all)
        for (const char *key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
            auto it = schema.find(key);
            if (it == schema.end() || is_whole_bound(*it)) continue;
            invalid(member(path, key) + " is " + it->dump() +
                    ": this backend's grammar enforces bounds of a \"number\" only when they are whole numbers "
                    "from -9007199254740991 to 9007199254740991; use a whole-number bound, scale the value, or "
                    "use \"type\": \"integer\"");
        }
        // The range rule output_schema_grammar writes for it.
        Bound lower = read_bound(schema, "minimum", "exclusiveMinimum");
        Bound upper = read_bound(schema, "maximum", "exclusiveMaximum");
        if (lower.present || upper.present)
            charge((int64_t)number_range(lower, upper).size() / kRangeBytesPerUnit + 1, path);
    }

    void integer_bounds(const json &schema, const std::string &path) {
        std::optional<int64_t> low = integer_bound(schema, "minimum", "exclusiveMinimum", /*lower*/ true);
        std::optional<int64_t> high = integer_bound(schema, "maximum", "exclusiveMaximum", /*lower*/ false);
        if (!low && !high) return;
        int64_t bytes;
        try {
            bytes = (int64_t)integer_range(low, high).size();
        } catch (const std::exception &) {
            bytes = 16 * 1024;  // more than any range of int64 bounds
        }
        charge(bytes / kRangeBytesPerUnit + 1, path);
    }

    /** `#/a/b` as llama.cpp resolves it (split at "/", no escapes), or nullptr. */
    const json *resolve(const std::string &ref, std::string &path) const {
        const json *target = &root;
        path = where;
        size_t at = 2;
        while (at <= ref.size()) {
            size_t next = ref.find('/', at);
            std::string token = ref.substr(at, next == std::string::npos ? std::string::npos : next - at);
            if (target->is_object() && target->contains(token)) {
                target = &target->at(token);
                path = member(path, token);
            } else if (target->is_array() && !token.empty() &&
                       token.find_first_not_of("0123456789") == std::string::npos && token.size() < 10 &&
                       std::stoul(token) < target->size()) {
                path += "[" + token + "]";
                target = &target->at(std::stoul(token));
            } else {
                return nullptr;
            }
            if (next == std::string::npos) break;
            at = next + 1;
        }
        return target;
    }

    void later(const std::string &ref, const json *target, const std::string &path) {
        if (walked_refs.insert(ref).second) pending.emplace_back(target, path);
    }

    /** One node as llama.cpp's schema builder (common/json-schema.cpp, build_node) reads it; `type`: the one type
     *  of a `type` array this copy stands for. */
    void node(const json &schema, const std::string &path, const json *type = nullptr) {
        if (++visits > kMaxExpandedNodes)
            invalid(path + ": the request's schemas expand to more than " + std::to_string(kMaxExpandedNodes) +
                    " schema nodes (each type of a \"type\" array copies the node and everything in it); simplify "
                    "them");
        if (!schema.is_object()) return;
        if (auto it = schema.find("$ref"); it != schema.end()) {
            if (it->is_string() && it->get<std::string>().compare(0, 2, "#/") == 0) {
                std::string target_path;
                if (const json *target = resolve(it->get<std::string>(), target_path))
                    later(it->get<std::string>(), target, target_path);
            }
            return;
        }
        for (const char *key : {"oneOf", "anyOf"})
            if (auto it = schema.find(key); it != schema.end()) {
                if (it->is_array())
                    for (size_t i = 0; i < it->size(); i++)
                        node((*it)[i], member(path, key) + "[" + std::to_string(i) + "]");
                return;  // llama.cpp reads nothing else of the node (oneOf first)
            }
        if (!type) {
            auto it = schema.find("type");
            if (it != schema.end() && it->is_array()) {
                for (const json &t : *it) node(schema, path, &t);
                return;
            }
            if (it != schema.end()) type = &*it;
        }
        if (schema.contains("const") || schema.contains("enum")) return;
        const std::string type_name = type && type->is_string() ? type->get<std::string>() : "";
        const bool has_properties = schema.contains("properties") ||
                                    (schema.contains("additionalProperties") && schema.at("additionalProperties") != true);
        const bool all_of = schema.contains("allOf");
        const bool items = schema.contains("items") || schema.contains("prefixItems");
        enum { Object, AllOf, Array, String, Integer, Number, Other } kind = Other;
        if (type_name.empty()) {
            kind = has_properties ? Object
                   : all_of       ? AllOf
                   : items        ? Array
                   : schema.contains("pattern") || schema.contains("minLength") || schema.contains("maxLength") ||
                           schema.contains("format")
                       ? String
                       : Other;
        } else if (type_name == "object") {
            kind = !has_properties && all_of ? AllOf : Object;
        } else if (type_name == "string") {
            kind = all_of ? AllOf : String;
        } else if (type_name == "array") {
            kind = Array;
        } else if (type_name == "integer") {
            kind = Integer;
        } else if (type_name == "number") {
            kind = Number;
        }
        switch (kind) {
        case Object:
            if (auto it = schema.find("properties"); it != schema.end() && it->is_object())
                for (auto &[name, child] : it->items()) node(child, member(member(path, "properties"), name));
            if (auto it = schema.find("additionalProperties"); it != schema.end() && it->is_object())
                node(*it, member(path, "additionalProperties"));
            break;
        case AllOf:
            if (auto it = schema.find("allOf"); it->is_array())
                for (size_t i = 0; i < it->size(); i++)
                    node((*it)[i], member(path, "allOf") + "[" + std::to_string(i) + "]");
            break;
        case Array: {
            const char *key = schema.contains("items") ? "items" : "prefixItems";
            if (auto it = schema.find(key); it != schema.end()) {
                if (it->is_array()) {  // a tuple: llama.cpp ignores minItems/maxItems there
                    for (size_t i = 0; i < it->size(); i++)
                        node((*it)[i], member(path, key) + "[" + std::to_string(i) + "]");
                    break;
                }
                node(*it, member(path, key));
            }
            count(schema, path, "minItems", "maxItems");
            break;
        }
        case String:
            if (!schema.contains("pattern")) count(schema, path, "minLength", "maxLength");  // else ignored
            break;
        case Integer:
            integer_bounds(schema, path);
            break;
        case Number:
            if (!schema.contains("enum") && !schema.contains("const")) number_bounds(schema, path);
            break;
        case Other:
            break;
        }
    }

    void walk() {
        node(root, where);
        // Definitions last, once each: a lifted root (`$defs.root`, a copy of the root) is reported where the client
        // wrote it. (llama.cpp builds only the referenced ones; an unreferenced one is checked all the same.)
        for (const char *defs : {"$defs", "definitions"})
            if (auto it = root.find(defs); it != root.end() && it->is_object())
                for (auto &[name, child] : it->items())
                    later("#/" + std::string(defs) + "/" + name, &child, member(member(where, defs), name));
        for (size_t i = 0; i < pending.size(); i++) {
            auto [target, path] = pending[i];  // (copied: node() may grow `pending`)
            node(*target, path);
        }
    }
};

struct NumberRewrite {
    std::string marker;  // a string that occurs nowhere in the schema
    std::vector<std::string> rules;
    std::vector<std::string> refs;  // the `$ref`s met, in order: walked after the tree
    std::set<std::string> seen_refs;

    /** What llama.cpp's schema builder (common/json-schema.cpp, build_node) makes of a node of one type (LimitWalk
     *  decides the same way): which of its keywords hold the schemas it builds next. */
    enum class Kind { Object, AllOf, Array, Number, Other };
    static Kind kind_of(const common_json &schema, const std::string &type_name) {
        const bool has_properties = schema.contains("properties") ||
                                    (schema.contains("additionalProperties") && schema.at("additionalProperties") != true);
        const bool all_of = schema.contains("allOf");
        if (type_name.empty())
            return has_properties                                          ? Kind::Object
                   : all_of                                                ? Kind::AllOf
                   : schema.contains("items") || schema.contains("prefixItems") ? Kind::Array
                                                                           : Kind::Other;
        if (type_name == "object") return !has_properties && all_of ? Kind::AllOf : Kind::Object;
        if (type_name == "string") return all_of ? Kind::AllOf : Kind::Other;
        if (type_name == "array") return Kind::Array;
        if (type_name == "number") return Kind::Number;
        return Kind::Other;
    }

    /** Walks `schema` as llama.cpp's schema builder reads it, and makes each bounded `number` it would build a
     *  `const` marker (llama.cpp writes it as one literal), keeping the number range it stands for. Every other
     *  keyword of the node stays (a `$ref` may point into it). */
    void node(common_json &schema) {
        if (!schema.is_object()) return;
        // Definitions wherever they are (a `$ref` may name any; the marker of one nobody references is left out).
        for (const char *key : {"$defs", "definitions"})
            if (schema.contains(key) && schema.at(key).is_object())
                for (auto entry : schema.at(key).items()) node(entry.value());
        if (schema.contains("$ref")) {
            const common_json &ref = schema.at("$ref");
            if (ref.is_string() && seen_refs.insert(ref.get<std::string>()).second) refs.push_back(ref.get<std::string>());
            return;
        }
        for (const char *key : {"oneOf", "anyOf"})
            if (schema.contains(key)) {
                if (schema.at(key).is_array())
                    for (auto &alternative : schema.at(key)) node(alternative);
                return;  // llama.cpp reads nothing else of the node (oneOf first)
            }
        std::vector<std::string> types;  // a `type` array: llama.cpp builds one copy of the node per type
        bool type_array = false;
        if (schema.contains("type")) {
            const common_json &type = schema.at("type");
            if (type.is_string()) {
                types.push_back(type.get<std::string>());
            } else if (type.is_array()) {
                type_array = true;
                for (const auto &t : type) types.push_back(t.is_string() ? t.get<std::string>() : "");
            } else {
                return;  // (llama.cpp refuses it)
            }
        } else {
            types.push_back("");
        }
        if (schema.contains("const") || schema.contains("enum")) return;
        if (std::find(types.begin(), types.end(), "number") != types.end() && bounded_number(schema, type_array)) return;
        // The structure of each copy, once per kind (the copies share the node's keywords).
        std::set<Kind> kinds;
        for (const auto &t : types) kinds.insert(kind_of(schema, t));
        for (Kind kind : kinds) structure(schema, kind);
    }

    /** A node llama.cpp builds a `number` from (alone, or one of the types of a `type` array): when bounded, it
     *  becomes the marker (the other types, if any, an alternative to it). */
    bool bounded_number(common_json &schema, bool type_array) {
        Bound lower = read_bound(schema, "minimum", "exclusiveMinimum");
        Bound upper = read_bound(schema, "maximum", "exclusiveMaximum");
        if (!lower.present && !upper.present) return false;
        std::string name = marker + "value-" + std::to_string(rules.size());
        rules.push_back(number_range(lower, upper));
        if (!type_array) {
            schema["const"] = name;  // (const comes before the type in llama.cpp's builder)
            return true;
        }
        common_json others = common_json::array();
        bool only_null = true;
        for (const auto &t : schema.at("type")) {
            if (t.is_string() && t.get<std::string>() == "number") continue;
            others.push_back(t);
            only_null = only_null && t.is_string() && t.get<std::string>() == "null";
        }
        common_json alternatives = common_json::array({common_json::object({{"const", name}})});
        if (!others.empty()) {
            common_json rest = only_null ? common_json::object() : schema;
            rest["type"] = others;
            node(rest);
            alternatives.push_back(std::move(rest));
        }
        schema["anyOf"] = std::move(alternatives);  // (anyOf comes before the type array in llama.cpp's builder)
        return true;
    }

    void structure(common_json &schema, Kind kind) {
        switch (kind) {
        case Kind::Object:
            if (schema.contains("properties") && schema.at("properties").is_object())
                for (auto entry : schema.at("properties").items()) node(entry.value());
            if (schema.contains("additionalProperties")) node(schema.at("additionalProperties"));
            break;
        case Kind::AllOf:
            if (schema.at("allOf").is_array())
                for (auto &component : schema.at("allOf")) node(component);
            break;
        case Kind::Array: {
            // An array of anything ({"type": "array"} alone) has neither: llama.cpp builds a generic array.
            const char *key = schema.contains("items") ? "items" : schema.contains("prefixItems") ? "prefixItems" : nullptr;
            if (!key) break;
            common_json &items = schema.at(key);
            if (items.is_array()) {  // a tuple
                for (auto &item : items) node(item);
            } else {
                node(items);
            }
            break;
        }
        case Kind::Number:
        case Kind::Other:
            break;
        }
    }

    /** The targets of the `$ref`s met (and of those met in them), each once, resolved as llama.cpp resolves them
     *  (in the rewritten document: "#/a/b/0", split at "/", an array index as a number). */
    void walk_refs(common_json &root) {
        for (size_t i = 0; i < refs.size(); i++) {
            const std::string ref = refs[i];  // (copied: node() may grow `refs`)
            if (ref.compare(0, 2, "#/") != 0) continue;
            common_json *target = &root;
            size_t at = 2;
            while (target && at <= ref.size()) {
                size_t next = ref.find('/', at);
                std::string token = ref.substr(at, next == std::string::npos ? std::string::npos : next - at);
                if (target->is_object() && target->contains(token)) {
                    target = &target->at(token);
                } else if (target->is_array()) {
                    size_t index = target->size();
                    try {
                        index = std::stoull(token);
                    } catch (const std::logic_error &) {
                    }
                    target = index < target->size() ? &target->at(index) : nullptr;
                } else {
                    target = nullptr;  // llama.cpp refuses it
                }
                if (next == std::string::npos) break;
                at = next + 1;
            }
            if (target) node(*target);
        }
    }
};

/** 128 random bits in hex, after "afm-": no schema can be written to contain it ahead of time. */
std::string random_marker() {
    uint32_t words[4];
    try {
        std::optional<std::random_device> source;
        if (const char *token = g_random_device_token.load(std::memory_order_acquire))
            source.emplace(token);
        else
            source.emplace();
        for (uint32_t &word : words) word = (*source)();
    } catch (const std::bad_alloc &) {
        throw;
    } catch (const std::exception &e) {
        // No entropy source (a seccomp filter, no descriptors left): the server's fault, not the request's.
        throw BackendError(AFM_ERR_INTERNAL, std::string("no random numbers for the output schema's grammar (") +
                                                 e.what() + ")");
    }
    std::string marker = "afm-";
    static const char hex[] = "0123456789abcdef";
    for (uint32_t word : words)
        for (int j = 0; j < 8; j++, word >>= 4) marker += hex[word & 15];
    return marker + "-";
}

}  // namespace

std::atomic<const char *> g_random_device_token{nullptr};
std::atomic<void (*)(std::string &)> g_converted_grammar{nullptr};

void check_schema_limits(const nlohmann::json &schema, const std::string &where, bool output, int64_t &budget,
                         int64_t &visits) {
    LimitWalk walk{output, budget, schema, where, {}, {}, visits};
    walk.walk();
}

std::string output_schema_grammar(const std::string &schema_text) {
    common_json schema = common_json::parse(schema_text);
    NumberRewrite rewrite;
    // A marker that no string of the schema contains, so the literal it becomes occurs only where it was put:
    // unguessable, so it is checked once (one pass over the text) and redrawn in the unlikely case it is there.
    do rewrite.marker = random_marker();
    while (schema_text.find(rewrite.marker) != std::string::npos);
    rewrite.node(schema);
    rewrite.walk_refs(schema);
    std::string grammar = json_schema_to_grammar(schema, /*force_gbnf*/ true);
    if (auto hook = g_converted_grammar.load(std::memory_order_acquire)) hook(grammar);
    if (rewrite.rules.empty()) return grammar;
    // One pass over the converter's output: each marker literal ("\"<marker>value-<i>\"": a const string's JSON text,
    // quoted for GBNF) becomes the name of rule i, named after the marker too, so no rule the converter derived from
    // the schema's names has it. A marker the converter left out (a definition nobody references) has no rule.
    const std::string head = "\"\\\"" + rewrite.marker + "value-", tail = "\\\"\"";
    std::string out, appended;
    out.reserve(grammar.size());
    std::vector<bool> used(rewrite.rules.size(), false);
    size_t from = 0;
    for (size_t at = grammar.find(head); at != std::string::npos; at = grammar.find(head, from)) {
        size_t digits = at + head.size(), end = digits;
        while (end < grammar.size() && end - digits < 12 && std::isdigit((unsigned char)grammar[end])) end++;
        size_t i = end > digits ? std::stoul(grammar.substr(digits, end - digits)) : rewrite.rules.size();
        // The marker is no text of the request's (it is random): a converter that did not keep it as written is
        // the server's fault.
        if (i >= rewrite.rules.size() || grammar.compare(end, tail.size(), tail) != 0)
            throw BackendError(AFM_ERR_INTERNAL, "a bounded number's marker was mangled while building the grammar");
        const std::string rule = rewrite.marker + "rule-" + std::to_string(i);
        out.append(grammar, from, at - from);
        out += rule;
        from = end + tail.size();
        if (!used[i]) appended += rule + " ::= " + rewrite.rules[i] + "\n";
        used[i] = true;
    }
    out.append(grammar, from, std::string::npos);
    return out + appended;
}

}  // namespace afm_local
