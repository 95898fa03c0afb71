// SPDX-License-Identifier: Apache-2.0
// settings.cpp: the backend config document (docs/backend-abi.md §8.1) and the local backend's settings.
#include "local.h"
#include "json_release.h"

#include <nlohmann/json.hpp>

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace afm_local {

using json = nlohmann::json;

int32_t usable_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? (int32_t)n : 1;
}

namespace {

int32_t parse_int(const std::string &key, const std::string &value, int32_t min, int32_t max) {
    const char *begin = value.c_str();
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(begin, &end, 10);
    bool digits_only = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
        return std::isdigit((unsigned char)c) || c == '-' || c == '+';
    });
    if (!digits_only || errno != 0 || end == begin || *end != '\0' || v < min || v > max)
        throw BackendError(AFM_ERR_INVALID_REQUEST, "setting " + key + "=\"" + value.substr(0, 64) +
                                                        "\" is not an integer in " + std::to_string(min) + "..." +
                                                        std::to_string(max));
    return (int32_t)v;
}

}  // namespace

namespace {

/** Whether `t` names a quantization or precision: i?q<digits>(_<alnum>)*, bf16, fp16, f16, f32. */
bool is_quant_tag(const std::string &t) {
    if (t == "bf16" || t == "fp16" || t == "f16" || t == "f32") return true;
    size_t i = 0;
    if (i < t.size() && t[i] == 'i') i++;
    if (i >= t.size() || t[i] != 'q') return false;
    i++;
    size_t digits = i;
    while (i < t.size() && std::isdigit((unsigned char)t[i])) i++;
    if (i == digits) return false;
    while (i < t.size()) {
        if (t[i] != '_') return false;
        size_t start = ++i;
        while (i < t.size() && std::isalnum((unsigned char)t[i])) i++;
        if (i == start) return false;
    }
    return true;
}

}  // namespace

std::string model_id_from_path(const std::string &path) {
    std::string name = path;
    size_t slash = name.find_last_of('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return (char)std::tolower(c); });
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
    // Strip a quantization / precision suffix: -q4_1, .q4_k_m, -iq3_xxs, -f16, -bf16, -fp16, -f32.
    for (size_t p = 1; p + 1 < name.size(); p++) {
        if ((name[p] == '-' || name[p] == '.' || name[p] == '_') && is_quant_tag(name.substr(p + 1))) {
            name.resize(p);
            break;
        }
    }
    std::string id;
    for (char c : name) id += (std::isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_') ? c : '-';
    return id.empty() ? "local" : id;
}

Settings parse_config(afm_str config_json) {
    if (!config_json.data && config_json.size)
        throw BackendError(AFM_ERR_INVALID_REQUEST, "config: bad span");
    const char *begin = config_json.data ? config_json.data : "";
    json doc;
    JsonReleaser<json> release{doc};  // destroying it, or a partial tree, must not allocate (json_release.h)
    if (!json_parse_into(doc, begin, begin + config_json.size)) throw BackendError(AFM_ERR_INVALID_REQUEST, "config: not valid JSON");
    if (!doc.is_object()) throw BackendError(AFM_ERR_INVALID_REQUEST, "config: not a JSON object");

    if (doc.contains("config_version")) {
        const json &v = doc["config_version"];
        if (!v.is_number_integer() || v.get<int64_t>() != 1)
            throw BackendError(AFM_ERR_INCOMPATIBLE, "config: config_version " + v.dump() + " is not supported (1 is)");
    }
    Settings s;
    s.threads = usable_cores();
    if (doc.contains("instance") && doc["instance"].is_string()) s.instance = doc["instance"].get<std::string>();
    if (s.instance.empty()) s.instance = "local";

    std::string model_id;
    if (doc.contains("settings") && !doc["settings"].is_null()) {
        const json &settings = doc["settings"];
        if (!settings.is_object()) throw BackendError(AFM_ERR_INVALID_REQUEST, "config: settings is not an object");
        for (auto it = settings.begin(); it != settings.end(); ++it) {
            const std::string &key = it.key();
            if (!it.value().is_string())
                throw BackendError(AFM_ERR_INVALID_REQUEST, "setting " + key + " is not a string");
            std::string value = it.value().get<std::string>();
            if (key == "Model") {
                s.model_path = value;
            } else if (key == "ModelID") {
                if (value.size() > 128 || std::any_of(value.begin(), value.end(), [](unsigned char c) {
                        return c <= 0x20 || c == 0x7f || c == '"' || c == '\\';
                    }))
                    throw BackendError(AFM_ERR_INVALID_REQUEST,
                                       "setting ModelID must be at most 128 characters without spaces, quotes or "
                                       "control characters");
                model_id = value;
            } else if (key == "ContextTokens") {
                if (!value.empty()) s.context_tokens = parse_int(key, value, 256, (int32_t)kMaxEntryTokens);
            } else if (key == "Threads") {
                if (!value.empty()) s.threads = parse_int(key, value, 1, 512);
            } else if (key == "ParallelSequences") {
                if (!value.empty()) s.parallel = parse_int(key, value, 1, 64);
            } else if (key == "PromptCacheMiB") {
                if (!value.empty()) s.prompt_cache_mib = parse_int(key, value, 0, 1 << 20);
            } else if (key == "PromptCacheDiskMiB") {
                if (!value.empty()) s.prompt_cache_disk_mib = parse_int(key, value, 0, 1 << 24);
            } else if (key == "PromptCacheDir") {
                if (!value.empty() && value[0] != '/')
                    throw BackendError(AFM_ERR_INVALID_REQUEST, "setting PromptCacheDir must be an absolute path");
                if (value.size() > 3000)
                    throw BackendError(AFM_ERR_INVALID_REQUEST, "setting PromptCacheDir is too long");
                s.prompt_cache_dir = value;
            } else {
                throw BackendError(AFM_ERR_INVALID_REQUEST,
                                   "unknown setting \"" + key.substr(0, 64) +
                                       "\" (the local backend knows Model, ModelID, ContextTokens, Threads, "
                                       "ParallelSequences, PromptCacheMiB, PromptCacheDir, PromptCacheDiskMiB)");
            }
        }
    }
    s.model_id = !model_id.empty() ? model_id : (s.model_path.empty() ? "local" : model_id_from_path(s.model_path));
    return s;
}

}  // namespace afm_local
