// SPDX-License-Identifier: Apache-2.0
// engine.cpp: the model, one llama_context holding N sequences ("slots"), and the decode thread.
//
// Design (README.md has the long version):
//   - One decode thread owns the llama_context. Each step builds one llama_batch: the next token of every
//     generating slot first, then prompt tokens of slots still reading their prompt, up to n_batch tokens; one
//     llama_decode per step; then each slot with logits samples its next token.
//   - Each slot remembers the tokens whose KV entries it holds. A new request takes the idle slot sharing the
//     longest prefix with its prompt (clients resend the whole conversation), or the least recently used one; the
//     shared prefix stays in the KV cache and only the rest is decoded. A slot can also borrow a long prefix held
//     by another slot (llama_memory_seq_cp shares the cells in the unified KV cache).
//   - Events go to the job's queue (job.cpp); the decode thread never calls the host.
#include "local.h"

#include "chat-peg-parser.h"
#include "common.h"
#include "json-schema-to-grammar.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "sampling.h"

#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <random>

namespace afm_local {

struct Engine::Slot {
    int32_t id = 0;
    std::vector<llama_token> cache;  // tokens whose KV entries sequence `id` holds, positions 0..size-1
    std::shared_ptr<Job> job;
    int64_t last_used = 0;
    int32_t batch_index = -1;        // index of this slot's logits in the current batch, or -1
    int32_t batch_count = 0;         // tokens this slot put into the current batch
};

namespace {

std::once_flag g_backend_once;

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Borrowing another slot's prefix copies a whole KV stream (tens of MB): worth it only for a long prefix.
constexpr size_t kMinBorrowTokens = 128;
// The prompt cache keeps sequences of at least this many tokens (shorter ones are recomputed in a few ms); a request
// restores an entry only when PromptCache::worth_restoring() says so.
constexpr size_t kMinCacheTokens = PromptCache::kMinCacheTokens;

size_t common_prefix(const std::vector<llama_token> &a, const std::vector<llama_token> &b) {
    size_t n = std::min(a.size(), b.size()), i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

void batch_add(llama_batch &batch, llama_token token, llama_pos pos, llama_seq_id seq, bool logits) {
    int32_t i = batch.n_tokens++;
    batch.token[i] = token;
    batch.pos[i] = pos;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = seq;
    batch.logits[i] = logits ? 1 : 0;
}

std::string make_call_id() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    std::string id = "call_";
    for (int i = 0; i < 24; i++) id += digits[rng() % 36];
    return id;
}

/** Loads the ggml backends when the build uses dynamically loaded ones (GGML_BACKEND_DL, the portable build). */
void init_backends() {
    llama_backend_init();
    if (ggml_backend_dev_count() == 0) {
        Dl_info info;
        if (dladdr((void *)&llama_backend_init, &info) && info.dli_fname) {
            std::string dir = info.dli_fname;
            size_t slash = dir.find_last_of('/');
            dir = slash == std::string::npos ? "." : dir.substr(0, slash);
            ggml_backend_load_all_from_path(dir.c_str());
        }
        if (ggml_backend_dev_count() == 0) ggml_backend_load_all();
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The generic tool format, for chat templates that cannot render tools (SmolLM2's, for one). The tools are
// described in the system message; a call is a JSON object in a <tool_call> block; earlier calls and their
// results are rendered as text in the same format. llama.cpp common builds the parser and the grammar from it.
// ---------------------------------------------------------------------------------------------------------------

const char kToolCallOpen[] = "<tool_call>";
const char kToolCallClose[] = "</tool_call>";

nlohmann::ordered_json parse_or_string(const std::string &text) {
    auto value = nlohmann::ordered_json::parse(text, nullptr, false);
    if (value.is_discarded()) return nlohmann::ordered_json(text);
    return value;
}

std::string render_calls(const std::vector<common_chat_tool_call> &calls) {
    std::string block = std::string(kToolCallOpen) + "\n";
    for (size_t i = 0; i < calls.size(); i++) {
        nlohmann::ordered_json call;
        call["name"] = calls[i].name;
        call["arguments"] = parse_or_string(calls[i].arguments);
        if (i) block += ", ";
        block += call.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    }
    return block + "\n" + kToolCallClose;
}

/** Rewrites tool calls and tool results as plain text and merges consecutive messages of one role. */
std::vector<common_chat_msg> text_tool_history(const std::vector<common_chat_msg> &messages) {
    std::vector<common_chat_msg> out;
    for (const auto &original : messages) {
        common_chat_msg msg;
        if (original.role == "tool") {
            msg.role = "user";
            msg.content = "<tool_response>\n" + original.content + "\n</tool_response>";
        } else {
            msg.role = original.role;
            msg.content = original.content;
            if (!original.tool_calls.empty()) {
                if (!msg.content.empty()) msg.content += "\n";
                msg.content += render_calls(original.tool_calls);
            }
        }
        if (!out.empty() && out.back().role == msg.role && msg.role != "system") {
            out.back().content += (original.role == "tool" ? "\n" : "\n\n") + msg.content;
        } else {
            out.push_back(std::move(msg));
        }
    }
    return out;
}

std::string tools_instructions(const std::vector<common_chat_tool> &tools, ToolMode mode, const std::string &name,
                               bool parallel) {
    std::string text = "# Tools\n\nYou can call these functions. Each line describes one: its name, what it does, and "
                       "the JSON Schema of its arguments.\n";
    for (const auto &tool : tools) {
        nlohmann::ordered_json t;
        t["name"] = tool.name;
        t["description"] = tool.description;
        t["parameters"] = parse_or_string(tool.parameters);
        text += t.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    }
    text += std::string("\nTo call a function, reply with this block and nothing after it, with arguments that "
                        "follow the function's schema:\n") +
            kToolCallOpen + "\n{\"name\": \"<function name>\", \"arguments\": {<arguments>}}\n" + kToolCallClose + "\n";
    if (parallel) text += "To call several functions at once, put their objects in the same block, separated by commas.\n";
    if (mode == ToolMode::Function) text += "You must call the function " + name + " now.\n";
    else if (mode == ToolMode::Required) text += "You must call a function now.\n";
    else text += "When no function is needed, answer in plain text.\n";
    text += "Function results come back in <tool_response> blocks.";
    return text;
}

}  // namespace

size_t partial_stop_length(std::string_view text, const std::vector<std::string> &stops) {
    size_t best = 0;
    for (const auto &stop : stops) {
        if (stop.empty()) continue;  // size() - 1 would wrap
        for (size_t len = std::min(stop.size() - 1, text.size()); len > best; len--) {
            if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
                best = len;
                break;
            }
        }
    }
    return best;
}

int32_t top_k_from_metadata(const char *text, int32_t fallback) {
    if (!text) return fallback;
    char *end = nullptr;
    double v = std::strtod(text, &end);
    if (!end || end == text) return fallback;
    // A float-to-int conversion of a value out of range (or NaN) is undefined behaviour: check first.
    if (!std::isfinite(v) || v < 0 || v > (double)INT32_MAX || v != std::floor(v)) return fallback;
    return (int32_t)v;
}

int32_t sampling_top_k(std::optional<int32_t> requested, int32_t fallback, int32_t n_vocab) {
    int32_t k = requested.value_or(fallback);
    return n_vocab > 0 && k > n_vocab ? n_vocab : k;
}

std::atomic<void (*)()> g_before_final_tool_parse{nullptr};
std::atomic<void (*)(int, int64_t)> g_after_decode{nullptr};

bool tool_parse_due(uint64_t parsed_so_far, size_t text_size) {
    // Every token while the output is short (up to ~2 kB); then only when this run keeps the total within the
    // budget, which spaces runs out to every ~text_size/kParseBudget new bytes (a few tokens).
    return parsed_so_far + text_size <= kParseBudget * (uint64_t)text_size;
}

// ---------------------------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------------------------

std::unique_ptr<Engine> Engine::load(const Settings &settings, LoadFailure &failure) {
    const std::string &path = settings.model_path;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
        failure = {"model file not found: " + path + " (" + std::strerror(errno) + ")", "model_missing"};
        return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
        failure = {"model path is not a regular file: " + path, "model_missing"};
        return nullptr;
    }
    {
        std::ifstream file(path, std::ios::binary);
        char magic[4] = {0, 0, 0, 0};
        if (!file.read(magic, 4)) {
            failure = {"cannot read the model file " + path + " (" + std::strerror(errno) + ")",
                       file.is_open() ? "model_invalid" : "model_missing"};
            return nullptr;
        }
        if (std::memcmp(magic, "GGUF", 4) != 0) {
            failure = {"not a GGUF file (bad magic): " + path, "model_invalid"};
            return nullptr;
        }
    }

    std::call_once(g_backend_once, init_backends);
    std::unique_ptr<Engine> engine(new Engine());
    engine->settings_ = settings;
    int64_t t0 = now_us();

    log_capture_begin();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    // AFM_LOCAL_EXTRA_BUFFERS=0 keeps the weights in plain CPU buffers: no AMX tiles or repacked layouts. An escape
    // hatch for machines whose CPU advertises AMX that then faults (SIGILL in llama.cpp's AMX kernels; seen on a
    // virtualised Xeon).
    if (const char *extra = std::getenv("AFM_LOCAL_EXTRA_BUFFERS"); extra && std::strcmp(extra, "0") == 0)
        mp.use_extra_bufts = false;
    engine->model_ = llama_model_load_from_file(path.c_str(), mp);
    std::string captured = log_capture_end();
    if (!engine->model_) {
        // llama.cpp says which architecture it does not know; that is "unsupported", not a damaged file.
        bool unknown_arch = captured.find("unknown model architecture") != std::string::npos;
        failure = {(unknown_arch ? "unsupported model architecture: " : "cannot load the model ") + path +
                       (captured.empty() ? "" : ": " + captured),
                   unknown_arch ? "model_unsupported" : "model_invalid"};
        return nullptr;
    }
    if (!llama_model_has_decoder(engine->model_) || llama_model_has_encoder(engine->model_) ||
        llama_model_is_diffusion(engine->model_)) {
        failure = {"unsupported model architecture (the local backend serves decoder-only text models): " + path,
                   "model_unsupported"};
        return nullptr;
    }
    engine->vocab_ = llama_model_get_vocab(engine->model_);

    int32_t n_ctx_train = llama_model_n_ctx_train(engine->model_);
    if (n_ctx_train > 0 && settings.context_tokens > n_ctx_train)
        log_line(AFM_LOG_WARNING, settings.instance + ": ContextTokens=" + std::to_string(settings.context_tokens) +
                                      " exceeds the model's training context (" + std::to_string(n_ctx_train) + ")");

    llama_context_params cp = llama_context_default_params();
    // Every slot may hold a whole context's worth of tokens.
    cp.n_ctx = (uint32_t)settings.context_tokens * (uint32_t)settings.parallel;
    cp.n_batch = (uint32_t)engine->n_batch_;
    cp.n_ubatch = (uint32_t)engine->n_batch_;
    cp.n_seq_max = (uint32_t)settings.parallel;
    cp.n_threads = settings.threads;
    cp.n_threads_batch = settings.threads;
    // Separate KV streams per sequence (kv_unified = false): each sequence attends only over its own cells, so
    // a long conversation kept in one slot does not slow the others down. AFM_LOCAL_KV_UNIFIED=1 switches to one
    // shared pool (measured slower here, see README).
    const char *unified = std::getenv("AFM_LOCAL_KV_UNIFIED");
    engine->kv_unified_ = unified && std::strcmp(unified, "1") == 0;
    cp.kv_unified = engine->kv_unified_;
    cp.swa_full = true;  // keep whole sequences for sliding-window models, so prefixes stay reusable
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.no_perf = true;
    log_capture_begin();
    engine->ctx_ = llama_init_from_model(engine->model_, cp);
    captured = log_capture_end();
    if (!engine->ctx_) {
        failure = {"cannot create the inference context (" + std::to_string(cp.n_ctx) +
                       " KV cells; out of memory?)" + (captured.empty() ? "" : ": " + captured),
                   "out_of_memory"};
        return nullptr;
    }
    if (llama_n_ctx_seq(engine->ctx_) < (uint32_t)settings.context_tokens) {
        failure = {"the inference context holds " + std::to_string(llama_n_ctx_seq(engine->ctx_)) +
                       " tokens per sequence, fewer than ContextTokens=" + std::to_string(settings.context_tokens),
                   "model_invalid"};
        return nullptr;
    }

    // A persistent ggml thread pool for the decode thread, as llama-server attaches one (with OpenMP builds it
    // keeps the per-graph setup off the hot path).
    if (ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) {
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpu);
        auto new_fn = (decltype(ggml_threadpool_new) *)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
        auto free_fn = (decltype(ggml_threadpool_free) *)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
        if (new_fn && free_fn) {
            ggml_threadpool_params tpp;
            ggml_threadpool_params_init(&tpp, settings.threads);
            engine->threadpool_ = new_fn(&tpp);
            if (engine->threadpool_) {
                engine->threadpool_free_ = free_fn;
                llama_attach_threadpool(engine->ctx_, engine->threadpool_, nullptr);
            }
        }
    }

    try {
        engine->templates_ = common_chat_templates_init(engine->model_, "");
    } catch (const std::exception &e) {
        failure = {std::string("the model's chat template cannot be used: ") + e.what(), "model_invalid"};
        return nullptr;
    }
    if (!engine->templates_) {
        failure = {"the model has no usable chat template", "model_invalid"};
        return nullptr;
    }
    {
        auto caps = common_chat_templates_get_caps(engine->templates_.get());
        engine->native_tools_ = caps["supports_tool_calls"];
        engine->default_template_ = llama_model_chat_template(engine->model_, nullptr) == nullptr;
        if (engine->default_template_)
            log_line(AFM_LOG_WARNING, settings.instance + ": " + path +
                                          " has no chat template; using ChatML, and stopping at its turn markers");
    }

    // Sampling defaults: llama.cpp's, overridden by the model's own recommendations (general.sampling.*).
    auto meta_float = [&](llama_model_meta_key key, float &dst) {
        char buf[64] = {0};
        if (llama_model_meta_val_str(engine->model_, llama_model_meta_key_str(key), buf, sizeof buf) > 0) {
            char *end = nullptr;
            float v = std::strtof(buf, &end);
            if (end && end != buf && std::isfinite(v)) dst = v;
        }
    };
    {
        char buf[64] = {0};
        if (llama_model_meta_val_str(engine->model_, llama_model_meta_key_str(LLAMA_MODEL_META_KEY_SAMPLING_TOP_K),
                                     buf, sizeof buf) > 0)
            engine->defaults_.top_k = top_k_from_metadata(buf, engine->defaults_.top_k);
    }
    meta_float(LLAMA_MODEL_META_KEY_SAMPLING_TOP_P, engine->defaults_.top_p);
    meta_float(LLAMA_MODEL_META_KEY_SAMPLING_MIN_P, engine->defaults_.min_p);
    meta_float(LLAMA_MODEL_META_KEY_SAMPLING_TEMP, engine->defaults_.temp);

    for (int32_t i = 0; i < settings.parallel; i++) {
        Slot *slot = new Slot();
        slot->id = i;
        engine->slots_.push_back(slot);
    }
    engine->readers_.reserve(engine->slots_.size());  // no allocation on the decode thread's hot path
    if (settings.prompt_cache_mib > 0 || (!settings.prompt_cache_dir.empty() && settings.prompt_cache_disk_mib > 0)) {
        std::string dir = settings.prompt_cache_disk_mib > 0 ? settings.prompt_cache_dir : std::string();
        uint64_t fingerprint = dir.empty() ? 0 : model_fingerprint(path);
        if (!dir.empty() && fingerprint == 0) {
            log_line(AFM_LOG_WARNING, settings.instance + ": cannot fingerprint " + path + "; the prompt cache's disk tier is off");
            dir.clear();
        }
        // A sequence's saved state depends on the model, on the number of KV streams (llama.cpp checks the latter
        // when restoring) and on llama.cpp's state format: the three name the directory, so no other model, layout
        // or llama.cpp build ever reads its entries.
#ifndef AFM_LLAMA_BUILD
#define AFM_LLAMA_BUILD "unknown"
#endif
        std::string layout = "n" + std::to_string(engine->kv_unified_ ? 1 : settings.parallel) + "-llama" AFM_LLAMA_BUILD;
        engine->cache_ = std::make_unique<PromptCache>((size_t)settings.prompt_cache_mib << 20, dir,
                                                       (size_t)settings.prompt_cache_disk_mib << 20, fingerprint,
                                                       layout, settings.instance, (size_t)settings.context_tokens);
    }
    if (const char *ms = std::getenv("AFM_LOCAL_PROGRESS_MS")) {
        long v = std::strtol(ms, nullptr, 10);
        if (v > 0 && v <= 60000) engine->progress_interval_us_ = (int64_t)v * 1000;
    }
    // The decode thread warms the model up first (one decode touches the weights and sets up its thread team)
    // and reports how that went. Every llama_decode runs on that one thread: with OpenMP, each thread that starts
    // a parallel region gets its own team of workers, and a second team (a warm-up on this thread) made libgomp
    // throttle its spinning and halved decode speed here (~30 vs ~70 tokens/s).
    std::promise<int> warmed;
    std::future<int> warm_result = warmed.get_future();
    try {
        engine->thread_ = std::thread([e = engine.get(), p = std::move(warmed)]() mutable { e->run(std::move(p)); });
    } catch (...) {
        failure = {"cannot start the decode thread", "internal"};
        return nullptr;
    }
    int rc = warm_result.get();
    if (rc != 0) {
        failure = {"the model failed its warm-up decode (llama_decode returned " + std::to_string(rc) + ")",
                   "model_invalid"};
        return nullptr;  // the thread has returned; the destructor joins it
    }

    char desc[128] = {0};
    llama_model_desc(engine->model_, desc, sizeof desc);
    log_line(AFM_LOG_INFO, settings.instance + ": loaded " + path + " (" + desc + ") as \"" + settings.model_id +
                               "\" in " + std::to_string((now_us() - t0) / 1000) + " ms: context " +
                               std::to_string(settings.context_tokens) + " tokens x " +
                               std::to_string(settings.parallel) + " sequences, " + std::to_string(settings.threads) +
                               " threads");
    return engine;
}

void Engine::stop() {
    stopping_.store(true, std::memory_order_release);  // a batch being computed ends now (abort_decode)
    {
        std::lock_guard<std::mutex> lock(work_mutex_);
        if (shutdown_ && !thread_.joinable()) return;
        shutdown_ = true;
        wake_seq_++;
    }
    work_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(work_mutex_);
    incoming_.clear();
    for (Slot *slot : slots_) slot->job.reset();
}

Engine::~Engine() {
    stop();
    cache_.reset();  // finishes queued disk writes, then frees the cache

    for (Slot *slot : slots_) delete slot;
    slots_.clear();
    templates_.reset();
    if (ctx_) llama_free(ctx_);
    if (threadpool_ && threadpool_free_) threadpool_free_(threadpool_);
    if (model_) llama_model_free(model_);
    // Hand the freed cache and KV memory back to the system now: glibc keeps freed heap for reuse otherwise, and
    // a generation that drained after a reload should not hold on to hundreds of MiB.
    malloc_trim(0);
}

// ---------------------------------------------------------------------------------------------------------------
// Preparing a request (caller's thread)
// ---------------------------------------------------------------------------------------------------------------

Prepared Engine::prepare(const Request &request, bool for_generation) {
    if (request.model != settings_.model_id)
        throw BackendError(AFM_ERR_MODEL_UNAVAILABLE, "model \"" + request.model.substr(0, 128) +
                                                          "\" is not served by the local backend (it serves \"" +
                                                          settings_.model_id + "\")");
    if (request.messages.empty()) throw BackendError(AFM_ERR_INVALID_REQUEST, "the request has no input");

    common_chat_templates_inputs inputs;
    bool offer_tools = !request.tools.empty() && request.tool_mode != ToolMode::None;
    std::vector<common_chat_tool> tools;
    if (offer_tools) {
        if (request.tool_mode == ToolMode::Function) {
            for (const auto &tool : request.tools)
                if (tool.name == request.tool_name) tools.push_back(tool);
        } else {
            tools = request.tools;
        }
    }
    const bool forced = request.tool_mode == ToolMode::Required || request.tool_mode == ToolMode::Function;
    const bool structured = request.output != OutputKind::Text;
    // A JSON answer and a lazy tool-call grammar cannot both constrain one output: refuse rather than drop one.
    if (structured && offer_tools)
        throw BackendError(AFM_ERR_UNSUPPORTED_CAPABILITY,
                           "the local backend cannot combine a JSON output_format with tools in one request; send "
                           "tool_choice none or no output_format");
    if (native_tools_) {
        inputs.messages = request.messages;
        if (offer_tools) {
            inputs.tools = tools;
            inputs.tool_choice = forced ? COMMON_CHAT_TOOL_CHOICE_REQUIRED : COMMON_CHAT_TOOL_CHOICE_AUTO;
            inputs.parallel_tool_calls = request.parallel_tool_calls;
        }
    } else {
        inputs.messages = text_tool_history(request.messages);
        if (offer_tools) {
            std::string block = tools_instructions(tools, request.tool_mode, request.tool_name, request.parallel_tool_calls);
            if (!inputs.messages.empty() && inputs.messages.front().role == "system") {
                inputs.messages.front().content += "\n\n" + block;
            } else {
                common_chat_msg system;
                system.role = "system";
                system.content = block;
                inputs.messages.insert(inputs.messages.begin(), std::move(system));
            }
        }
    }
    if (structured) {
        // The grammar makes the answer JSON; the model still has to know what the members mean (a schema the
        // model never sees gets filled with whatever fits the grammar).
        std::string block = request.output == OutputKind::JsonObject
                                ? std::string("Answer with one JSON object and nothing else.")
                                : "Answer with one JSON value that follows this JSON Schema, and nothing else:\n" +
                                      request.output_schema;
        if (!inputs.messages.empty() && inputs.messages.front().role == "system") {
            inputs.messages.front().content += "\n\n" + block;
        } else {
            common_chat_msg system;
            system.role = "system";
            system.content = block;
            inputs.messages.insert(inputs.messages.begin(), std::move(system));
        }
    }
    inputs.add_generation_prompt = true;
    inputs.use_jinja = true;
    inputs.enable_thinking = false;
    inputs.reasoning_format = COMMON_REASONING_FORMAT_NONE;

    common_chat_params chat;
    try {
        std::lock_guard<std::mutex> lock(template_mutex_);
        chat = common_chat_templates_apply(templates_.get(), inputs);
    } catch (const std::exception &e) {
        throw BackendError(offer_tools ? AFM_ERR_TOOL_FAILED : AFM_ERR_INVALID_REQUEST,
                           std::string("the model's chat template cannot render this request: ") + e.what());
    }

    if (offer_tools && !native_tools_) {
        // The generic format: optional text, then one <tool_call> block (required: the block only).
        try {
            auto tools_json = common_chat_tools_to_json_oaicompat(tools);
            common_peg_arena parser = build_chat_peg_parser([&](common_chat_peg_builder &b) {
                auto calls = b.standard_json_tools(kToolCallOpen, kToolCallClose, tools_json,
                                                   request.parallel_tool_calls, /*force_tool_calls*/ true);
                if (forced) return b.literal(chat.generation_prompt) + calls + b.space() + b.end();
                return b.literal(chat.generation_prompt) + b.content(b.until(kToolCallOpen)) + b.optional(calls) +
                       b.space() + b.end();
            });
            chat.format = COMMON_CHAT_FORMAT_PEG_NATIVE;
            chat.grammar_lazy = !forced;
            chat.grammar = build_grammar([&](const common_grammar_builder &builder) {
                parser.build_grammar(builder, chat.grammar_lazy);
            });
            chat.grammar_triggers = {{COMMON_GRAMMAR_TRIGGER_TYPE_WORD, kToolCallOpen}};
            chat.parser = parser.save();
        } catch (const std::bad_alloc &) {
            throw;
        } catch (const std::exception &e) {
            // The schemas come from the request: one that has no grammar equivalent is the request's problem.
            throw BackendError(AFM_ERR_INVALID_REQUEST,
                               std::string("a tool's parameters schema cannot be turned into a grammar: ") + e.what());
        }
    }

    Prepared p;
    p.prompt = common_tokenize(vocab_, chat.prompt, /*add_special*/ true, /*parse_special*/ true);
    if (!for_generation) return p;

    const int64_t n = (int64_t)p.prompt.size();
    if (n == 0) throw BackendError(AFM_ERR_INVALID_REQUEST, "the request renders to an empty prompt");
    if (n > max_input_tokens())
        throw BackendError(AFM_ERR_CONTEXT_LENGTH_EXCEEDED, "the input is " + std::to_string(n) +
                                                                " tokens; this model's input budget is " +
                                                                std::to_string(max_input_tokens()));
    p.max_output = output_cap(request.max_output_tokens, n);

    common_params_sampling sp;
    sp.top_k = sampling_top_k(request.top_k, defaults_.top_k, llama_vocab_n_tokens(vocab_));
    sp.top_p = request.top_p.value_or(defaults_.top_p);
    sp.min_p = defaults_.min_p;
    sp.temp = request.temperature.value_or(defaults_.temp);
    sp.no_perf = true;
    if (request.seed) sp.seed = *request.seed;
    if (sp.temp <= 0.0f) {
        // Greedy: the most likely token (among those the grammar allows).
        sp.samplers = {COMMON_SAMPLER_TYPE_TOP_K};
        sp.top_k = 1;
    }
    p.stops = chat.additional_stops;
    if (default_template_) {
        // A model without a template of its own (often a base model) may not know ChatML's end-of-turn marker as
        // a token: stop where it would end its turn or start another.
        p.stops.push_back("<|im_end|>");
        p.stops.push_back("<|im_start|>");
    }
    if (offer_tools) {
        p.parse_tools = true;
        p.single_call = !request.parallel_tool_calls;
        for (const auto &text : chat.preserved_tokens) {
            auto ids = common_tokenize(vocab_, text, false, true);
            if (ids.size() == 1) p.preserved_tokens.insert(ids[0]);
        }
        if (!chat.grammar.empty()) {
            sp.grammar = common_grammar(COMMON_GRAMMAR_TYPE_TOOL_CALLS, chat.grammar);
            sp.grammar_lazy = chat.grammar_lazy;
            sp.preserved_tokens = p.preserved_tokens;
            sp.generation_prompt = chat.generation_prompt;
            for (const auto &trigger : chat.grammar_triggers) {
                if (trigger.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD) {
                    auto ids = common_tokenize(vocab_, trigger.value, false, true);
                    if (ids.size() == 1 && p.preserved_tokens.count(ids[0])) {
                        common_grammar_trigger t;
                        t.type = COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN;
                        t.value = trigger.value;
                        t.token = ids[0];
                        sp.grammar_triggers.push_back(t);
                        continue;
                    }
                }
                sp.grammar_triggers.push_back(trigger);
            }
            if (sp.grammar_lazy && sp.grammar_triggers.empty())
                throw BackendError(AFM_ERR_TOOL_FAILED, "the chat format produced a lazy tool grammar without triggers");
        }
        p.parser_params = common_chat_parser_params(chat);
        p.parser_params.reasoning_format = COMMON_REASONING_FORMAT_NONE;
        p.parser_params.parse_tool_calls = true;
        if (!chat.parser.empty()) {
            try {
                p.parser_params.parser.load(chat.parser);
            } catch (const std::exception &e) {
                throw BackendError(AFM_ERR_TOOL_FAILED, std::string("cannot load the tool-call parser: ") + e.what());
            }
        }
    }
    if (structured) {
        // Grammar-constrained decoding from the schema: llama.cpp's json-schema-to-grammar (docs/ARCHITECTURE.md,
        // "Structured output"). The schema is the host's normalized one, so everything in it is enforceable; a
        // conversion failure is still the request's problem, not a silent fallback to free text.
        try {
            std::string grammar = request.output == OutputKind::JsonObject
                                      ? json_schema_to_grammar(common_json::parse(R"({"type":"object"})"), true)
                                      : output_schema_grammar(request.output_schema);
            sp.grammar = common_grammar(COMMON_GRAMMAR_TYPE_OUTPUT_FORMAT, grammar);
            sp.grammar_lazy = false;
        } catch (const std::bad_alloc &) {
            throw;  // the server's problem (5xx), not the request's
        } catch (const BackendError &) {
            throw;  // classified already (no random numbers for the marker: internal)
        } catch (const std::exception &e) {
            throw BackendError(AFM_ERR_INVALID_REQUEST,
                               std::string("the output schema cannot be turned into a grammar: ") + e.what());
        }
    }
    try {
        p.sampler = common_sampler_init(model_, sp);
    } catch (const std::bad_alloc &) {
        throw;  // out of memory is the server's problem (5xx), never the request's
    } catch (const std::exception &e) {
        // A grammar from the client's schemas that llama.cpp's parser refuses is the request's problem. The bounds
        // it is known to refuse (minLength/minItems above 2000) and the repetition budget are checked when the
        // request is read (grammar.cpp), so this is a rule complexity llama.cpp finds too large.
        if (structured || !sp.grammar.empty())
            throw BackendError(AFM_ERR_INVALID_REQUEST,
                               std::string(structured ? "the output schema's" : "a tool's parameters schema's") +
                                   " grammar was refused by llama.cpp's grammar parser (" + e.what() + ")");
        throw BackendError(offer_tools ? AFM_ERR_TOOL_FAILED : AFM_ERR_INTERNAL,
                           std::string("cannot set up sampling: ") + e.what());
    }
    if (!p.sampler)
        throw BackendError(offer_tools ? AFM_ERR_TOOL_FAILED : AFM_ERR_INTERNAL,
                           structured ? "cannot set up sampling (output grammar rejected)"
                                      : "cannot set up sampling (tool grammar rejected)");
    return p;
}

int64_t Engine::output_cap(int64_t requested, int64_t prompt_tokens) const {
    int64_t cap = requested > 0 ? std::min<int64_t>(requested, max_output_tokens()) : max_output_tokens();
    return std::max<int64_t>(1, std::min<int64_t>(cap, context_tokens() - prompt_tokens));
}

void Engine::submit(std::shared_ptr<Job> job) {
    job->t_start_us = now_us();
    job->last_progress_us = job->t_start_us;
    {
        std::lock_guard<std::mutex> lock(work_mutex_);
        incoming_.push_back(std::move(job));
        wake_seq_++;
    }
    work_cv_.notify_one();
}

void Engine::wake() {
    {
        std::lock_guard<std::mutex> lock(work_mutex_);
        wake_seq_++;
    }
    work_cv_.notify_one();
}

// ---------------------------------------------------------------------------------------------------------------
// The decode thread
// ---------------------------------------------------------------------------------------------------------------

void Engine::release(Slot &slot, bool clear_cache) noexcept {
    if (clear_cache) {
        try {
            llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
        } catch (...) {
        }
        slot.cache.clear();
    }
    slot.job.reset();
    slot.last_used = now_us();
    slot.batch_index = -1;
    slot.batch_count = 0;
}

void Engine::stash(Slot &slot, bool ram) noexcept {
    if (!cache_ || slot.cache.size() < kMinCacheTokens) return;
    try {
        if (!cache_->needs(slot.cache, ram)) return;
        size_t size = llama_state_seq_get_size(ctx_, slot.id);
        if (size == 0) return;
        auto state = std::make_shared<std::vector<uint8_t>>(size);
        size_t n = llama_state_seq_get_data(ctx_, state->data(), size, slot.id);
        if (n == 0 || n > size) return;
        state->resize(n);
        cache_->save(slot.cache, std::move(state), ram);
    } catch (...) {
        // Out of memory copying the state: it is not kept.
    }
}

void Engine::assign(Slot &slot, const std::shared_ptr<Job> &job) {
    llama_memory_t mem = llama_get_memory(ctx_);
    const auto &prompt = job->prep.prompt;
    size_t own = common_prefix(slot.cache, prompt);

    // Another slot may hold a longer prefix (a shared system prompt, a conversation that moved): share its cells.
    Slot *donor = nullptr;
    size_t donor_len = 0;
    for (Slot *other : slots_) {
        if (other == &slot) continue;
        size_t len = common_prefix(other->cache, prompt);
        if (len > donor_len) {
            donor = other;
            donor_len = len;
        }
    }
    const bool borrow = donor && donor_len >= kMinBorrowTokens && donor_len > own + kMinBorrowTokens / 2;
    const size_t from_slots = borrow ? donor_len : own;

    // The prompt cache may hold a longer prefix still: a conversation that lost its slot, or one from before a
    // restart (disk tier).
    PromptCache::Match match;
    PromptCache::State state;
    if (cache_ && prompt.size() >= from_slots + PromptCache::kMinRestoreGain) {
        match = cache_->find(prompt);  // never throws: out of memory is a miss
        if (PromptCache::worth_restoring(match.length, match.entry_tokens, from_slots) && !cache_->take(match, state))
            state.reset();
        if (!state) cache_->count_miss();
    }
    // What the slot holds and this request does not keep goes to the prompt cache first (unless it is a prefix of
    // what is restored: that entry comes back to the cache later and serves it too).
    const size_t keep = state || borrow ? 0 : own;
    const bool superseded = state && own == slot.cache.size();
    if (cache_ && !superseded && slot.cache.size() >= keep + kMinCacheTokens && 2 * keep < slot.cache.size())
        stash(slot, true);

    size_t reuse;
    bool restored = false;
    if (state) {
        llama_memory_seq_rm(mem, slot.id, -1, -1);
        slot.cache.clear();
        size_t n = llama_state_seq_set_data(ctx_, state->data(), state->size(), slot.id);
        if (n == state->size()) {
            restored = true;
            reuse = std::min(match.length, match.entry_tokens);
            if (!llama_memory_seq_rm(mem, slot.id, (llama_pos)reuse, -1)) {
                llama_memory_seq_rm(mem, slot.id, -1, -1);
                reuse = 0;
            }
        } else {
            llama_memory_seq_rm(mem, slot.id, -1, -1);
            if (kv_unified_) {
                // One stream for every sequence: the others' cells may leave too few free for this state now. That
                // says nothing about the entry, which stays for a later request.
                cache_->restore_refused(match, std::move(state));
            } else {
                // The slot's own stream was emptied above, so there was room: llama.cpp refused the state itself
                // (it does not fit this context): it is never offered again.
                log_line(AFM_LOG_WARNING, settings_.instance + ": a prompt cache entry did not restore; recomputing");
                cache_->discard(match);
            }
            reuse = 0;
        }
    } else if (borrow) {
        llama_memory_seq_rm(mem, slot.id, -1, -1);
        if (kv_unified_) {
            llama_memory_seq_cp(mem, donor->id, slot.id, 0, (llama_pos)donor_len);  // shares the cells
        } else {
            llama_memory_seq_cp(mem, donor->id, slot.id, -1, -1);  // copies the donor's stream, then trims it
            llama_memory_seq_rm(mem, slot.id, (llama_pos)donor_len, -1);
        }
        reuse = donor_len;
    } else {
        reuse = own;
        if (!llama_memory_seq_rm(mem, slot.id, (llama_pos)reuse, -1)) {
            llama_memory_seq_rm(mem, slot.id, -1, -1);
            reuse = 0;
        }
    }
    state.reset();  // the state is in the KV cache now: its copy is returned at once
    // The last prompt token is always decoded again: its logits give the first output token.
    if (reuse >= prompt.size()) {
        reuse = prompt.size() - 1;
        if (!llama_memory_seq_rm(mem, slot.id, (llama_pos)reuse, -1)) {
            llama_memory_seq_rm(mem, slot.id, -1, -1);
            reuse = 0;
        }
    }
    if (reuse > 0 && llama_memory_seq_pos_min(mem, slot.id) > 0) {  // cells were evicted: nothing reusable
        llama_memory_seq_rm(mem, slot.id, -1, -1);
        reuse = 0;
    }
    if (restored) cache_->count_hit(!match.ram, reuse);
    slot.cache.assign(prompt.begin(), prompt.begin() + (std::ptrdiff_t)reuse);
    job->n_prompt_done = reuse;
    job->cached_tokens.store((int64_t)reuse);
    slot.job = job;
    slot.last_used = now_us();
}

void Engine::step_assign(std::deque<std::shared_ptr<Job>> &waiting) {
    while (!waiting.empty()) {
        const auto &job = waiting.front();
        Slot *best = nullptr, *lru = nullptr;
        size_t best_len = 0;
        for (Slot *slot : slots_) {
            if (slot->job) continue;
            size_t len = common_prefix(slot->cache, job->prep.prompt);
            if (!best || len > best_len || (len == best_len && slot->last_used < best->last_used)) {
                best = slot;
                best_len = len;
            }
            // Least recently used, empty slots first.
            auto key = [](const Slot *s) { return s->cache.empty() ? INT64_MIN : s->last_used; };
            if (!lru || key(slot) < key(lru)) lru = slot;
        }
        if (!best) return;  // every slot is busy: the job waits
        // Take the best-matching slot when the match is a real continuation (it keeps at least half of what the
        // slot holds, or covers at least half of the new prompt); otherwise keep that slot's conversation for
        // later and use the least recently used slot.
        bool continuation = best_len > 0 && (2 * best_len >= best->cache.size() || 2 * best_len >= job->prep.prompt.size());
        Slot *target = continuation ? best : lru;
        std::shared_ptr<Job> taken = job;
        waiting.pop_front();
        try {
            assign(*target, taken);
        } catch (...) {
            // The job left the queue: end it here, and forget what the slot may half hold.
            taken->abort(AFM_ERR_INTERNAL, "the local backend could not start this generation (out of memory?)");
            if (target->job == taken) target->job.reset();
            release(*target, true);
        }
    }
}

void Engine::emit_text(Job &job, std::string_view bytes) {
    std::string text = job.utf8.push(bytes);
    if (text.empty()) return;
    Event e;
    e.type = AFM_EVENT_TEXT_DELTA;
    e.text = std::move(text);
    job.push(std::move(e));
}

void Engine::process_tools(Slot &slot, bool final, int32_t reason) {
    Job &job = *slot.job;
    // While streaming, the parser sees neither an incomplete character nor what may be the start of a stop string.
    size_t visible = final ? job.raw.size()
                           : std::min(utf8_complete_prefix(job.raw),
                                      job.raw.size() - partial_stop_length(job.raw, job.prep.stops));
    // The parser reads the whole output each time: while streaming, its runs are spaced out as the output grows,
    // so the work per token stays proportional to the new bytes (tool_parse_due); the final run always happens.
    if (!final && !tool_parse_due(job.parsed_bytes, visible)) return;
    job.parsed_bytes += visible;
    std::string text = job.raw.substr(0, visible);
    common_chat_msg msg;
    // The output ended where the format says it may (the final parse is strict) or it was cut inside a call.
    bool cut = false;
    if (auto hook = final ? g_before_final_tool_parse.load(std::memory_order_acquire) : nullptr) hook();
    try {
        msg = common_chat_parse(text, !final, job.prep.parser_params);
    } catch (const std::bad_alloc &) {
        throw;  // out of memory is not a cut call: the decode loop ends the generation with `internal`
    } catch (const std::exception &e) {
        if (!final) return;  // not parseable yet: wait for more tokens
        cut = true;
        try {
            msg = common_chat_parse(text, true, job.prep.parser_params);
        } catch (const std::bad_alloc &) {
            throw;
        } catch (const std::exception &e2) {
            throw BackendError(AFM_ERR_TOOL_FAILED, std::string("cannot parse the model's output: ") + e.what());
        }
    }
    // A stop string is not part of the tool-call grammar: the parser may accept what it cut (a lenient format),
    // so a call it cut is treated as cut whatever the parse says.
    if (final && job.stop_cut && !msg.tool_calls.empty()) cut = true;
    // parallel_tool_calls false stops at the start of a second call: only the first, complete, one is kept.
    if (cut && job.prep.single_call && msg.tool_calls.size() > 1) cut = false;
    if (cut && reason != AFM_FINISH_LENGTH) {
        // An end-of-generation token cannot come before the grammar completes, but a stop string can cut the
        // output anywhere: what was cut is not a call the client may run (and not a "completed" answer).
        throw BackendError(AFM_ERR_TOOL_FAILED,
                           "the model's output ended inside a tool call (cut by a stop string of its chat format)");
    }

    if (msg.content.size() > job.content_sent.size() &&
        msg.content.compare(0, job.content_sent.size(), job.content_sent) == 0) {
        emit_text(job, std::string_view(msg.content).substr(job.content_sent.size()));
        job.content_sent = msg.content;
    }

    size_t n = msg.tool_calls.size();
    bool extra_call = false;
    if (job.prep.single_call && n > 1) {
        n = 1;
        extra_call = true;
    }
    for (size_t i = 0; i < n; i++) {
        const auto &call = msg.tool_calls[i];
        if (i >= job.calls.size()) job.calls.emplace_back();
        ToolCallProgress &progress = job.calls[i];
        bool later = i + 1 < msg.tool_calls.size();
        // Complete: a later call follows it, or the whole output parsed strictly at the end.
        bool complete = later || (final && !cut);
        if (!progress.begun) {
            // A name can still grow while it is being parsed; it is final once arguments or a later call appear.
            if (call.name.empty() || !(final || later || !call.arguments.empty())) break;
            progress.begun = true;
            progress.id = call.id.empty() ? make_call_id() : call.id;
            Event e;
            e.type = AFM_EVENT_TOOL_CALL_BEGIN;
            e.index = (int32_t)i;
            e.name = call.name;
            e.text = progress.id;
            job.push(std::move(e));
        }
        if (call.arguments.size() > progress.args_sent.size() &&
            call.arguments.compare(0, progress.args_sent.size(), progress.args_sent) == 0) {
            Event e;
            e.type = AFM_EVENT_TOOL_CALL_ARGUMENTS;
            e.index = (int32_t)i;
            e.text = call.arguments.substr(progress.args_sent.size());
            job.push(std::move(e));
            progress.args_sent = call.arguments;
        } else if (final && complete && call.arguments != progress.args_sent) {
            throw BackendError(AFM_ERR_TOOL_FAILED, "the tool call arguments changed while streaming");
        }
        if (!progress.ended && complete && progress.args_sent == call.arguments) {
            // Never close a call whose arguments do not parse: the host would hand them to the client as done.
            if (!nlohmann::json::accept(progress.args_sent)) {
                if (reason == AFM_FINISH_LENGTH && final) break;  // left open: the host marks it incomplete
                throw BackendError(AFM_ERR_TOOL_FAILED,
                                   "the model's output ended inside a tool call (its arguments do not parse)");
            }
            progress.ended = true;
            Event e;
            e.type = AFM_EVENT_TOOL_CALL_END;
            e.index = (int32_t)i;
            job.push(std::move(e));
        }
    }
    if (final) {
        if (job.prep.single_call && job.calls.size() > 1) job.calls.resize(1);
        std::string tail = job.utf8.finish();
        if (!tail.empty()) {
            Event e;
            e.type = AFM_EVENT_TEXT_DELTA;
            e.text = std::move(tail);
            job.push(std::move(e));
        }
    } else if (extra_call) {
        finish(slot, AFM_FINISH_TOOL_CALLS);  // parallel_tool_calls false: stop at the second call
    }
}

void Engine::finish(Slot &slot, int32_t reason) {
    Job &job = *slot.job;
    if (job.done) return;
    if (job.prep.parse_tools) {
        process_tools(slot, true, reason);
        bool called = false;
        for (const auto &call : job.calls) called = called || call.begun;
        if (called && reason == AFM_FINISH_STOP) reason = AFM_FINISH_TOOL_CALLS;
    } else {
        if (job.raw.size() > job.raw_sent) emit_text(job, std::string_view(job.raw).substr(job.raw_sent));
        job.raw_sent = job.raw.size();
        std::string tail = job.utf8.finish();
        if (!tail.empty()) {
            Event e;
            e.type = AFM_EVENT_TEXT_DELTA;
            e.text = std::move(tail);
            job.push(std::move(e));
        }
    }
    Event usage;
    usage.type = AFM_EVENT_USAGE;
    usage.input_tokens = (int64_t)job.prep.prompt.size();
    usage.output_tokens = job.n_generated;
    usage.reasoning_tokens = 0;
    usage.cached_tokens = job.cached_tokens.load();
    job.push(std::move(usage));
    {
        int64_t now = now_us();
        double ttft = (job.t_first_us - job.t_start_us) / 1000.0;
        double gen_s = (now - job.t_first_us) / 1e6;
        char line[256];
        std::snprintf(line, sizeof line,
                      "request %" PRIu64 " on slot %d: %zu prompt tokens (%" PRId64 " cached), first token after %.1f ms, "
                      "%" PRId64 " tokens in %.2f s (%.1f tokens/s), %d steps (decode %.1f ms, sample+emit %.1f ms), "
                      "finish %d",
                      job.request_id(), slot.id, job.prep.prompt.size(), job.cached_tokens.load(), ttft,
                      job.n_generated, gen_s, gen_s > 0 ? (job.n_generated - 1) / gen_s : 0.0, job.decode_steps,
                      job.us_decode / 1000.0, job.us_sample / 1000.0, reason);
        log_line(AFM_LOG_DEBUG, settings_.instance + ": " + line);
    }
    Event done;
    done.type = AFM_EVENT_DONE;
    done.code = reason;
    done.input_tokens = (int64_t)job.prep.prompt.size();
    done.output_tokens = job.n_generated;
    done.reasoning_tokens = 0;
    done.cached_tokens = job.cached_tokens.load();
    job.push(std::move(done));
    job.done = true;
    // With a disk tier, the conversation is written in the background now (after its last event: no delay for
    // the client), so it survives a restart; the slot keeps it too.
    if (cache_ && cache_->disk_enabled()) stash(slot, false);
    release(slot, false);
}

void Engine::fail_slot(Slot &slot, afm_status code, const char *message) noexcept {
    if (slot.job && !slot.job->done) {
        Job &job = *slot.job;
        try {
            log_line(AFM_LOG_WARNING, settings_.instance + ": request " + std::to_string(job.request_id()) +
                                          " failed: " + message);
        } catch (...) {
        }
        job.abort(code, message);  // USAGE and ERROR, built by the emitter without allocating
        job.done = true;
    }
    release(slot, true);
}

void Engine::fail_all(std::deque<std::shared_ptr<Job>> &waiting, const char *message) noexcept {
    for (Slot *slot : slots_)
        if (slot->job) fail_slot(*slot, AFM_ERR_INTERNAL, message);
    for (auto &job : waiting)
        if (job) job->abort(AFM_ERR_INTERNAL, message);
    waiting.clear();
    try {
        std::lock_guard<std::mutex> lock(work_mutex_);
        for (auto &job : incoming_)
            if (job) job->abort(AFM_ERR_INTERNAL, message);
        incoming_.clear();
    } catch (...) {
    }
}

void Engine::send_progress(Job &job, int64_t now) noexcept {
    // USAGE is invisible to clients but counts as activity for the host's silence watchdog. At most one is in
    // the queue: a client that does not read gets no pile of them.
    if (now - job.last_progress_us < progress_interval_us_ || job.queued() > 0) return;
    job.last_progress_us = now;
    Event usage;
    usage.type = AFM_EVENT_USAGE;
    usage.input_tokens = (int64_t)job.prep.prompt.size();
    usage.output_tokens = 0;
    usage.reasoning_tokens = 0;
    usage.cached_tokens = job.cached_tokens.load();
    try {
        job.push(std::move(usage));
    } catch (...) {
        job.abort(AFM_ERR_INTERNAL, "the local backend ran out of memory");
    }
}

void Engine::on_token(Slot &slot, llama_token token) {
    Job &job = *slot.job;
    if (job.t_first_us == 0) job.t_first_us = now_us();
    if (llama_vocab_is_eog(vocab_, token)) {
        finish(slot, AFM_FINISH_STOP);
        return;
    }
    job.n_generated++;
    job.output_tokens.store(job.n_generated);
    std::string piece = common_token_to_piece(vocab_, token, job.prep.preserved_tokens.count(token) > 0);
    size_t searched_from = job.raw.size();
    job.raw += piece;

    bool stop_hit = false;
    if (!job.prep.stops.empty()) {
        size_t longest = 0;
        for (const auto &s : job.prep.stops) longest = std::max(longest, s.size());
        size_t from = searched_from > longest ? searched_from - longest : 0;
        size_t at = std::string::npos;
        for (const auto &s : job.prep.stops) {
            if (s.empty()) continue;
            size_t pos = job.raw.find(s, from);
            if (pos != std::string::npos && pos < at) at = pos;
        }
        if (at != std::string::npos) {
            job.raw.resize(at);
            stop_hit = true;
        }
    }
    if (stop_hit) {
        job.stop_cut = true;
        finish(slot, AFM_FINISH_STOP);
        return;
    }
    if (job.prep.parse_tools) {
        process_tools(slot, false, AFM_FINISH_STOP);
        if (job.done) return;
    } else {
        size_t safe = job.raw.size() - partial_stop_length(job.raw, job.prep.stops);
        if (safe > job.raw_sent) {
            emit_text(job, std::string_view(job.raw).substr(job.raw_sent, safe - job.raw_sent));
            job.raw_sent = safe;
        }
    }
    if (job.n_generated >= job.prep.max_output || (int64_t)slot.cache.size() + 1 >= context_tokens()) {
        finish(slot, AFM_FINISH_LENGTH);
        return;
    }
    job.next_token = token;
}

void Engine::run(std::promise<int> warmed) {
    int rc = -1;
    try {
        llama_token token = llama_vocab_bos(vocab_);
        if (token == LLAMA_TOKEN_NULL) token = 0;
        llama_batch one = llama_batch_init(1, 0, 1);
        batch_add(one, token, 0, 0, true);
        const size_t empty_state = llama_state_seq_get_size(ctx_, 0);
        try {
            rc = llama_decode(ctx_, one);
        } catch (...) {
            rc = -1;
        }
        llama_batch_free(one);
        if (rc == 0 && cache_) {
            // A sequence's state with one token against none: what the prompt cache admits from a file follows.
            const size_t one_token = llama_state_seq_get_size(ctx_, 0);
            if (one_token > empty_state) cache_->set_state_size(empty_state, one_token - empty_state);
        }
        llama_memory_clear(llama_get_memory(ctx_), true);
    } catch (...) {
        rc = -1;
    }
    warmed.set_value(rc);
    if (rc != 0) return;
    loop();
}

bool Engine::abort_decode(void *data) noexcept {
    // Reads only what the decode thread, blocked in llama_decode, does not change meanwhile (the batch's slots and
    // their jobs), and the atomics other threads set.
    const auto *self = static_cast<const Engine *>(data);
    if (self->stopping_.load(std::memory_order_acquire)) return true;
    bool any = false;
    for (const Slot *slot : self->slots_) {
        if (slot->batch_count == 0) continue;
        if (slot->job && !slot->job->stopped()) return false;  // someone still waits for this batch
        any = true;
    }
    return any;
}

void Engine::loop() {
    // Nothing may escape this thread (std::terminate would end the process: the runner, or afmd itself with
    // in-process hosting). Failures inside one slot's work end that generation with ERROR; anything else ends
    // every generation this thread knows of, and the loop goes on.
    llama_memory_t mem = llama_get_memory(ctx_);
    llama_batch batch = llama_batch_init(n_batch_, 0, 1);
    std::deque<std::shared_ptr<Job>> waiting;
    size_t turn = 0;  // rotates which prompt-reading slot is served first
    // From here on (not during the warm-up): a batch whose generations all stopped is abandoned mid-computation.
    llama_set_abort_callback(ctx_, &Engine::abort_decode, this);

    for (;;) {
        try {
        uint64_t seen;
        {
            std::lock_guard<std::mutex> lock(work_mutex_);
            if (shutdown_) break;
            while (!incoming_.empty()) {
                waiting.push_back(incoming_.front());  // a copy first: if it throws, the job stays in incoming_
                incoming_.pop_front();
            }
            seen = wake_seq_;
        }

        // Drop generations that were cancelled, whose client is gone, or that already ended.
        for (Slot *slot : slots_)
            if (slot->job && (slot->job->stopped() || slot->job->done)) release(*slot, false);
        waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                     [](const std::shared_ptr<Job> &j) { return j->stopped(); }),
                      waiting.end());

        step_assign(waiting);

        // Build the batch: one token per generating slot, then prompt tokens.
        batch.n_tokens = 0;
        bool paused = false;
        readers_.clear();
        for (Slot *slot : slots_) {
            slot->batch_index = -1;
            slot->batch_count = 0;
            Job *job = slot->job.get();
            if (!job) continue;
            if (job->n_prompt_done < job->prep.prompt.size()) {
                readers_.push_back(slot);  // reserved to the slot count: does not allocate
                continue;
            }
            if (job->queued() >= kMaxQueuedEvents) {  // its client lags: pause this sequence only
                paused = true;
                continue;
            }
            batch_add(batch, job->next_token, (llama_pos)slot->cache.size(), slot->id, true);
            slot->batch_index = batch.n_tokens - 1;
            slot->batch_count = 1;
        }
        // The prompt room is shared: shortest remaining prompt first, each taking at most an equal share of what
        // is left, so what a short prompt does not need goes to the longer ones, and no slot index is favoured.
        if (!readers_.empty()) {
            std::rotate(readers_.begin(), readers_.begin() + (std::ptrdiff_t)(turn++ % readers_.size()), readers_.end());
            std::stable_sort(readers_.begin(), readers_.end(), [](const Slot *a, const Slot *b) {
                return a->job->prep.prompt.size() - a->job->n_prompt_done <
                       b->job->prep.prompt.size() - b->job->n_prompt_done;
            });
        }
        for (size_t r = 0; r < readers_.size(); r++) {
            Slot *slot = readers_[r];
            Job *job = slot->job.get();
            int32_t room = n_batch_ - batch.n_tokens;
            if (room <= 0) break;
            int32_t share = std::max<int32_t>(1, room / (int32_t)(readers_.size() - r));
            size_t remaining = job->prep.prompt.size() - job->n_prompt_done;
            int32_t take = (int32_t)std::min<size_t>(remaining, (size_t)share);
            for (int32_t k = 0; k < take; k++) {
                size_t index = job->n_prompt_done + (size_t)k;
                bool last = index + 1 == job->prep.prompt.size();
                batch_add(batch, job->prep.prompt[index], (llama_pos)(slot->cache.size() + (size_t)k), slot->id, last);
                if (last) slot->batch_index = batch.n_tokens - 1;
            }
            slot->batch_count = take;
        }

        // Generations that send nothing visible for a while (queued behind others, or reading a long prompt)
        // tell the host they are alive.
        int64_t now = now_us();
        for (auto &job : waiting) send_progress(*job, now);
        for (Slot *slot : readers_) send_progress(*slot->job, now);

        if (batch.n_tokens == 0) {
            std::unique_lock<std::mutex> lock(work_mutex_);
            auto ready = [&] { return shutdown_ || wake_seq_ != seen || !incoming_.empty(); };
            if (paused || !waiting.empty()) {
                work_cv_.wait_for(lock, std::chrono::milliseconds(10), ready);
            } else {
                work_cv_.wait(lock, ready);
            }
            continue;
        }

        int64_t t_decode = now_us();
        int rc;
        try {
            rc = llama_decode(ctx_, batch);
            if (rc == 1) {
                // No room in the KV cache: drop what idle slots keep and try once more (the state was restored).
                for (Slot *slot : slots_)
                    if (!slot->job && !slot->cache.empty()) {
                        llama_memory_seq_rm(mem, slot->id, -1, -1);
                        slot->cache.clear();
                    }
                rc = llama_decode(ctx_, batch);
            }
        } catch (const std::bad_alloc &) {
            rc = -100;
        } catch (...) {
            rc = -101;
        }
        t_decode = now_us() - t_decode;
        if (auto hook = g_after_decode.load(std::memory_order_acquire)) hook(rc, t_decode);
        if (rc == 2) {
            // Aborted (abort_decode): every generation in the batch stopped, or the engine stops. llama.cpp took the
            // aborted ubatch's cells out again; cells of an earlier ubatch of the same batch may remain, so each
            // sequence is trimmed back to what its slot records: the slot keeps the prompt decoded by earlier steps
            // for the next request on its conversation (or the prompt cache), exactly as if the batch never ran.
            // The next step drops the stopped generations.
            for (Slot *slot : slots_) {
                if (slot->batch_count == 0) continue;
                if (!llama_memory_seq_rm(mem, slot->id, (llama_pos)slot->cache.size(), -1)) release(*slot, true);
                slot->batch_index = -1;
                slot->batch_count = 0;
            }
            continue;
        }
        if (rc != 0) {
            char message[64];
            std::snprintf(message, sizeof message, rc == -100 ? "llama_decode failed (out of memory)"
                                                              : "llama_decode failed (%d)", rc);
            for (Slot *slot : slots_)
                if (slot->batch_count > 0) fail_slot(*slot, AFM_ERR_INTERNAL, message);
            continue;
        }

        // Commit the decoded tokens, then sample where there are logits.
        for (Slot *slot : slots_) {
            if (slot->batch_count == 0 || !slot->job) continue;
            Job &job = *slot->job;
            job.decode_steps++;
            job.us_decode += t_decode;
            try {
                if (job.n_prompt_done < job.prep.prompt.size()) {
                    auto first = job.prep.prompt.begin() + (std::ptrdiff_t)job.n_prompt_done;
                    slot->cache.insert(slot->cache.end(), first, first + slot->batch_count);
                    job.n_prompt_done += (size_t)slot->batch_count;
                } else {
                    slot->cache.push_back(job.next_token);
                }
            } catch (...) {
                // The slot's record of its KV cells is behind the cells themselves: drop both.
                fail_slot(*slot, AFM_ERR_INTERNAL, "out of memory while recording the decoded tokens");
            }
        }
        for (Slot *slot : slots_) {
            if (slot->batch_index < 0 || !slot->job) continue;
            // Keep the job alive through on_token: finishing releases the slot's reference, and the host may
            // reap the job as soon as its emitter delivered the terminal event.
            std::shared_ptr<Job> hold = slot->job;
            try {
                Job &job = *hold;
                if (job.stopped()) {
                    release(*slot, false);
                    continue;
                }
                int64_t t_sample = now_us();
                llama_token token = common_sampler_sample(job.prep.sampler, ctx_, slot->batch_index);
                common_sampler_accept(job.prep.sampler, token, true);
                on_token(*slot, token);
                job.us_sample += now_us() - t_sample;
            } catch (const BackendError &e) {
                fail_slot(*slot, e.code(), e.what());
            } catch (const std::bad_alloc &) {
                fail_slot(*slot, AFM_ERR_INTERNAL, "generation failed: out of memory");
            } catch (const std::exception &e) {
                char message[256];
                std::snprintf(message, sizeof message, "generation failed: %s", e.what());
                fail_slot(*slot, AFM_ERR_INTERNAL, message);
            } catch (...) {
                fail_slot(*slot, AFM_ERR_INTERNAL, "generation failed");
            }
        }
        } catch (...) {
            // A failure outside any one slot (moving queued jobs, assigning a slot, building the batch): end every
            // generation with ERROR rather than leave one without its terminal event, and go on.
            fail_all(waiting, "the local backend failed (out of memory?)");
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    llama_batch_free(batch);
    waiting.clear();
    for (Slot *slot : slots_) slot->job.reset();
}

}  // namespace afm_local
