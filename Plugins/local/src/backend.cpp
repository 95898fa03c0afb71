// SPDX-License-Identifier: Apache-2.0
// backend.cpp: the AFM ABI surface of the local backend: negotiation, the vtable, and the afm.tokenize/1
// extension. Every entry point catches all C++ exceptions; nothing but status codes crosses the boundary.
#include "local.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstring>
#include <map>

using afm_local::BackendError;

struct afm_instance {
    afm_local::Settings settings;
    bool available = false;
    std::string reason;
    std::string reason_code;
    std::unique_ptr<afm_local::Engine> engine;
    std::mutex jobs_mutex;
    std::map<uint64_t, std::shared_ptr<afm_local::Job>> jobs;  // accepted generations whose emitter is not joined
};

namespace afm_local {

afm_status fail(afm_error *error, afm_status code, const std::string &message) {
    if (!error || error->struct_size < offsetof(afm_error, code) + sizeof error->code) return code;
    error->code = code;
    if (error->struct_size <= offsetof(afm_error, message)) return code;
    size_t capacity = std::min<size_t>(sizeof error->message, error->struct_size - offsetof(afm_error, message));
    size_t n = std::min(message.size(), capacity - 1);
    // Do not cut a UTF-8 character in half.
    while (n > 0 && n < message.size() && ((unsigned char)message[n] & 0xC0) == 0x80) n--;
    std::memcpy(error->message, message.data(), n);
    error->message[n] = '\0';
    return code;
}

namespace {

/** Joins and forgets generations whose emitter delivered the terminal event (all of them when `all`). */
void reap(afm_instance *instance, bool all) {
    std::vector<std::shared_ptr<Job>> done;
    {
        std::lock_guard<std::mutex> lock(instance->jobs_mutex);
        for (auto it = instance->jobs.begin(); it != instance->jobs.end();) {
            if (!it->second) {
                ++it;  // being registered by generate
            } else if (all || it->second->finished()) {
                done.push_back(it->second);
                it = instance->jobs.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto &job : done) job->join();
}

afm_status local_create(const afm_host_api *host, afm_str config_json, afm_instance **out, afm_error *error) {
    try {
        if (!out) return fail(error, AFM_ERR_INVALID_REQUEST, "create: out is NULL");
        log_install(host);
        Settings settings = parse_config(config_json);
        auto instance = std::make_unique<afm_instance>();
        instance->settings = settings;
        if (settings.model_path.empty()) {
            instance->reason = "no model configured: set Model= to the path of a GGUF file in [Backend.local]";
            instance->reason_code = "model_missing";
        } else {
            LoadFailure failure;
            instance->engine = Engine::load(settings, failure);
            if (instance->engine) {
                instance->available = true;
            } else {
                instance->reason = failure.reason;
                instance->reason_code = failure.reason_code;
            }
        }
        if (!instance->available)
            log_line(AFM_LOG_WARNING, settings.instance + ": model unavailable: " + instance->reason);
        *out = instance.release();
        return AFM_OK;
    } catch (const BackendError &e) {
        return fail(error, e.code(), e.what());
    } catch (const std::bad_alloc &) {
        return fail(error, AFM_ERR_INTERNAL, "out of memory");
    } catch (const std::exception &e) {
        return fail(error, AFM_ERR_INTERNAL, std::string("create failed: ") + e.what());
    } catch (...) {
        return fail(error, AFM_ERR_INTERNAL, "create failed");
    }
}

afm_status local_describe(afm_instance *instance, const afm_writer *writer, afm_error *error) {
    try {
        if (!instance) return fail(error, AFM_ERR_INVALID_REQUEST, "describe: instance is NULL");
        if (!writer || writer->struct_size < sizeof(afm_writer) || !writer->write)
            return fail(error, AFM_ERR_INVALID_REQUEST, "describe: bad writer");
        const Settings &s = instance->settings;
        int64_t context = s.context_tokens;
        int64_t max_output = context / 4;
        nlohmann::ordered_json doc;
        doc["describe_version"] = 1;
        doc["backend"] = kBackendId;
        doc["version"] = kBackendVersion;
        doc["available"] = instance->available;
        doc["reason"] = instance->available ? nlohmann::ordered_json() : nlohmann::ordered_json(instance->reason);
        doc["reason_code"] =
            instance->available ? nlohmann::ordered_json() : nlohmann::ordered_json(instance->reason_code);
        nlohmann::ordered_json model;
        model["id"] = s.model_id;
        model["context_tokens"] = context;
        model["max_input_tokens"] = context - max_output;
        model["max_output_tokens"] = max_output;
        // structured_output (ABI 1.1): answers to a JSON output_format are grammar-constrained (engine.cpp).
        model["capabilities"] = {{"streaming", true},  {"tools", true},    {"vision", false},
                                 {"reasoning", false}, {"structured_output", true}};
        doc["models"] = nlohmann::ordered_json::array({model});
        if (instance->engine) {
            // The prompt cache's figures: /status shows them with the backend, `afmctl top` and metrics read them.
            nlohmann::ordered_json cache;
            if (const afm_local::PromptCache *pc = instance->engine->prompt_cache()) {
                afm_local::PromptCacheStats st = pc->stats();
                cache["ram_bytes"] = st.ram_bytes;
                cache["ram_entries"] = st.ram_entries;
                cache["ram_limit_bytes"] = st.ram_limit;
                cache["disk_bytes"] = st.disk_bytes;
                cache["disk_entries"] = st.disk_entries;
                cache["disk_limit_bytes"] = st.disk ? st.disk_limit : 0;
                cache["directory"] = st.disk ? nlohmann::ordered_json(pc->directory()) : nlohmann::ordered_json();
                cache["hits"] = st.hits;
                cache["disk_hits"] = st.disk_hits;
                cache["misses"] = st.misses;
                cache["evictions"] = st.evictions;
                cache["disk_evictions"] = st.disk_evictions;
                cache["disk_writes"] = st.disk_writes;
                cache["discarded"] = st.discarded;
                cache["dropped_writes"] = st.dropped_writes;
                cache["restored_tokens"] = st.restored_tokens;
            } else {
                cache["ram_limit_bytes"] = 0;
                cache["disk_limit_bytes"] = 0;
            }
            doc["prompt_cache"] = cache;
        }
        std::string text = doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        writer->write(writer->ctx, afm_str{text.data(), (uint64_t)text.size()});
        return AFM_OK;
    } catch (const std::exception &e) {
        return fail(error, AFM_ERR_INTERNAL, std::string("describe failed: ") + e.what());
    } catch (...) {
        return fail(error, AFM_ERR_INTERNAL, "describe failed");
    }
}

afm_status local_generate(afm_instance *instance, uint64_t request_id, afm_str request_json,
                          const afm_event_sink *sink, afm_error *error) {
    try {
        if (!instance) return fail(error, AFM_ERR_INVALID_REQUEST, "generate: instance is NULL");
        if (!sink || sink->struct_size < sizeof(afm_event_sink) || !sink->emit)
            return fail(error, AFM_ERR_INVALID_REQUEST, "generate: bad event sink");
        reap(instance, false);
        Request request = parse_request(request_json);
        if (!instance->available)
            return fail(error, AFM_ERR_MODEL_UNAVAILABLE, "the local model is unavailable: " + instance->reason);
        Prepared prepared = instance->engine->prepare(request, true);
        auto job = std::make_shared<Job>(request_id, *sink, std::move(prepared), instance->engine.get());
        // Everything that can throw comes before the emitter starts: a refusal must send no event and leave no
        // thread behind, and an accepted job must be both registered and queued.
        std::lock_guard<std::mutex> lock(instance->jobs_mutex);
        auto [entry, inserted] = instance->jobs.emplace(request_id, nullptr);
        if (!inserted)
            return fail(error, AFM_ERR_INVALID_REQUEST,
                        "request id " + std::to_string(request_id) + " is already running");
        try {
            instance->engine->submit(job);
        } catch (...) {
            instance->jobs.erase(entry);
            throw;
        }
        if (!job->start()) {
            job->discard();  // queued already: the decode thread drops it; its events never reach the sink
            instance->jobs.erase(entry);
            return fail(error, AFM_ERR_BUSY, "cannot start a generation thread");
        }
        entry->second = std::move(job);
        return AFM_OK;
    } catch (const BackendError &e) {
        return fail(error, e.code(), e.what());
    } catch (const std::bad_alloc &) {
        return fail(error, AFM_ERR_INTERNAL, "out of memory");
    } catch (const std::exception &e) {
        return fail(error, AFM_ERR_INTERNAL, std::string("generate failed: ") + e.what());
    } catch (...) {
        return fail(error, AFM_ERR_INTERNAL, "generate failed");
    }
}

void local_cancel(afm_instance *instance, uint64_t request_id) {
    try {
        if (!instance) return;
        std::shared_ptr<Job> job;
        {
            std::lock_guard<std::mutex> lock(instance->jobs_mutex);
            auto it = instance->jobs.find(request_id);
            if (it != instance->jobs.end()) job = it->second;
        }
        if (job) {
            job->cancel();
            if (instance->engine) instance->engine->wake();
        }
    } catch (...) {
    }
}

void local_destroy(afm_instance *instance) {
    if (!instance) return;
    try {
        // A well-behaved host destroys only after every terminal event; cancel anything left anyway.
        std::vector<std::shared_ptr<Job>> left;
        {
            std::lock_guard<std::mutex> lock(instance->jobs_mutex);
            for (auto &entry : instance->jobs)
                if (entry.second) left.push_back(entry.second);
            instance->jobs.clear();
        }
        for (auto &job : left) job->cancel();
        for (auto &job : left) job->join();  // emitters no longer touch the engine after this
        if (instance->engine) instance->engine->stop();
        left.clear();  // samplers are freed while the model is still loaded
        instance->engine.reset();
    } catch (...) {
    }
    delete instance;
}

afm_status local_count_input_tokens(afm_instance *instance, afm_str request_json, int64_t *out_tokens,
                                    afm_error *error) {
    try {
        if (!instance || !out_tokens) return fail(error, AFM_ERR_INVALID_REQUEST, "count_input_tokens: NULL argument");
        Request request = parse_request(request_json);
        if (!instance->available)
            return fail(error, AFM_ERR_MODEL_UNAVAILABLE, "the local model is unavailable: " + instance->reason);
        Prepared prepared = instance->engine->prepare(request, false);
        *out_tokens = (int64_t)prepared.prompt.size();
        return AFM_OK;
    } catch (const BackendError &e) {
        return fail(error, e.code(), e.what());
    } catch (const std::exception &e) {
        return fail(error, AFM_ERR_INTERNAL, std::string("count_input_tokens failed: ") + e.what());
    } catch (...) {
        return fail(error, AFM_ERR_INTERNAL, "count_input_tokens failed");
    }
}

const afm_ext_tokenize tokenize_extension = {sizeof(afm_ext_tokenize), 0, local_count_input_tokens};

const void *local_get_extension(afm_instance *instance, const char *id) {
    if (!instance || !id) return nullptr;
    if (std::strcmp(id, AFM_EXT_TOKENIZE) == 0) return &tokenize_extension;
    return nullptr;
}

const afm_backend_vtable vtable = {
    sizeof(afm_backend_vtable), 0,           local_create, local_describe, local_generate, local_cancel,
    local_destroy,              local_get_extension,
};

}  // namespace
}  // namespace afm_local

extern "C" AFM_EXPORT afm_status afm_backend_negotiate(const afm_host_api *host, afm_backend_info *out,
                                                       afm_error *error) {
    using namespace afm_local;
    try {
        if (!host || !out || host->struct_size < offsetof(afm_host_api, reserved0) ||
            out->struct_size < AFM_BACKEND_INFO_SIZE_1_0)
            return fail(error, AFM_ERR_INCOMPATIBLE, "local: host or out missing or too small");
        // out->struct_size stays as the caller set it (the header's rule for caller-allocated structs); this
        // backend writes only the ABI 1.0 fields, which the check above found room for.
        out->abi_major = AFM_ABI_MAJOR;
        out->abi_minor = AFM_ABI_MINOR;
        out->reserved0 = 0;
        out->id = kBackendId;
        out->version = kBackendVersion;
        out->vtable = nullptr;
        if (host->abi_major != AFM_ABI_MAJOR)
            return fail(error, AFM_ERR_INCOMPATIBLE,
                        "local speaks AFM ABI " + std::to_string(AFM_ABI_MAJOR) + "." + std::to_string(AFM_ABI_MINOR) +
                            "; host offered " + std::to_string(host->abi_major) + "." +
                            std::to_string(host->abi_minor));
        out->vtable = &vtable;
        return AFM_OK;
    } catch (...) {
        return fail(error, AFM_ERR_INTERNAL, "local: negotiation failed");
    }
}
