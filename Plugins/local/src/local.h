// SPDX-License-Identifier: Apache-2.0
// local.h: internal declarations of the `local` backend (llama.cpp). Nothing here crosses the ABI: the only
// exported symbol is afm_backend_negotiate (backend.cpp).
#pragma once

#include "afm_backend.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "chat.h"      // llama.cpp common: chat templates, tool-call parsing
#include "llama.h"
#include "prompt_cache.h"

#include <nlohmann/json_fwd.hpp>

struct ggml_threadpool;

struct common_sampler;

namespace afm_local {

constexpr const char *kBackendId = "local";
constexpr const char *kBackendVersion = "0.1.0";
// A 700-token conversation of SmolLM2-135M saves ~16 MiB of KV state (an 8B model's, ~90 MiB): 2 GiB keeps about a
// hundred of the small model's, or twenty of a large one's, and is a small part of the 24 GiB machines AFM targets.
constexpr int32_t kDefaultPromptCacheMiB = 2048;
constexpr int32_t kDefaultPromptCacheDiskMiB = 8192;

/** A failure with an AFM status code; thrown inside the backend, turned into afm_error at the boundary. */
class BackendError : public std::runtime_error {
public:
    BackendError(afm_status code, const std::string &message) : std::runtime_error(message), code_(code) {}
    afm_status code() const { return code_; }

private:
    afm_status code_;
};

/** Fills a caller-allocated afm_error within its struct_size. Returns `code`. */
afm_status fail(afm_error *error, afm_status code, const std::string &message);

// ---------------------------------------------------------------------------------------------------------------
// Logging (log.cpp): llama.cpp and ggml log lines go to the host's log (warnings and errors; everything with
// AFM_LOCAL_DEBUG=1). While a model loads, error lines are also captured so `describe` can say why it failed.
// ---------------------------------------------------------------------------------------------------------------

void log_install(const afm_host_api *host);
void log_line(int32_t level, const std::string &message);
void log_capture_begin();
std::string log_capture_end();

// ---------------------------------------------------------------------------------------------------------------
// Settings (settings.cpp): the backend config document.
// ---------------------------------------------------------------------------------------------------------------

struct Settings {
    std::string instance;         // "<id>#<generation>", for logs
    std::string model_path;       // Model: empty when not configured
    std::string model_id;         // ModelID, or derived from the file name
    int32_t context_tokens = 4096;
    int32_t threads = 0;          // resolved: the number of usable cores by default
    int32_t parallel = 4;
    // The prompt cache beyond the slots (prompt_cache.h): RAM bound (0: no RAM tier), disk directory ("" : no disk
    // tier) and disk bound, in MiB.
    int32_t prompt_cache_mib = kDefaultPromptCacheMiB;
    std::string prompt_cache_dir;
    int32_t prompt_cache_disk_mib = kDefaultPromptCacheDiskMiB;
};

/** Parses and validates the config document. Throws BackendError (invalid_request, incompatible). */
Settings parse_config(afm_str config_json);

/** "SmolLM2-135M-Instruct-Q4_1.gguf" -> "smollm2-135m-instruct". */
std::string model_id_from_path(const std::string &path);

int32_t usable_cores();

// ---------------------------------------------------------------------------------------------------------------
// Requests (request.cpp): the generation request document, mapped onto llama.cpp's chat messages.
// ---------------------------------------------------------------------------------------------------------------

enum class ToolMode { Auto, None, Required, Function };

/** The form the answer must take (the generation request's output_format, docs/backend-abi.md §8.2). */
enum class OutputKind { Text, JsonObject, JsonSchema };

struct Request {
    std::string model;
    std::vector<common_chat_msg> messages;   // system text first (joined), then the conversation
    std::vector<common_chat_tool> tools;
    ToolMode tool_mode = ToolMode::Auto;
    std::string tool_name;                   // ToolMode::Function
    bool parallel_tool_calls = true;
    int64_t max_output_tokens = -1;          // -1: the model's output budget
    std::optional<float> temperature;
    std::optional<float> top_p;
    std::optional<uint32_t> seed;            // the client's seed, modulo 2^32 (never llama.cpp's "random" value)
    std::optional<int32_t> top_k;            // >= 1
    OutputKind output = OutputKind::Text;    // output_format.type (ABI 1.1)
    std::string output_schema;               // OutputKind::JsonSchema: the normalized schema, property order kept
};

/** Parses and validates a generation request. Throws BackendError. */
Request parse_request(afm_str request_json);

// ---------------------------------------------------------------------------------------------------------------
// Schemas and grammars (grammar.cpp): what llama.cpp's grammar enforces of a schema, checked when a request is read.
// ---------------------------------------------------------------------------------------------------------------

/** llama.cpp's grammar parser (llama-grammar.cpp, MAX_REPETITION_THRESHOLD) refuses a repetition minimum above this
 *  and reads a maximum above it as "unbounded": a minLength/minItems above it is refused (output and tools), a
 *  maxLength/maxItems above it is refused for the output schema (the host checks the answer; a longer one would
 *  end `invalid_structured_output`) and left open for tools (whose arguments the host does not check). */
constexpr int64_t kMaxGrammarRepetition = 2000;

/** The sum of the length and count bounds over one request's schemas (output and every tool): llama.cpp spends
 *  about one grammar rule per unit of each bound, so without a cap a 16 MiB body of `maxLength: 2000` properties
 *  would make the grammar parser allocate millions of rules. 50,000 is 25 strings of 2,000 characters. Each bounded
 *  integer (output and tools) and bounded number (output) is charged too, by the size of its range rule
 *  (grammar.cpp, kRangeBytesPerUnit). */
constexpr int64_t kGrammarRepetitionBudget = 50000;

/** Checks one schema (the host's normalized output schema, or a tool's parameters) against the limits above and,
 *  for the output schema, that every bound of a `number` is a whole number within ±(2^53-1) (the ones
 *  output_schema_grammar enforces). `where` is its path in the request document; `budget` the repetitions used so
 *  far by the request's schemas, `visits` the schema nodes their walks expanded so far (both request-wide: each tool's
 *  parameters go into one grammar). Throws BackendError(invalid_request) naming the keyword's path. */
void check_schema_limits(const nlohmann::json &schema, const std::string &where, bool output, int64_t &budget,
                         int64_t &visits);

/** The GBNF grammar of the output schema: llama.cpp's json_schema_to_grammar, except that a `number` with bounds
 *  (whole numbers, checked by check_schema_limits) is written as the numbers in range: integers (optionally ".0")
 *  and, where no value of the fraction can cross a bound, decimal fractions; no exponent. Throws on failure. */
std::string output_schema_grammar(const std::string &schema_text);

// ---------------------------------------------------------------------------------------------------------------
// UTF-8 (utf8.cpp)
// ---------------------------------------------------------------------------------------------------------------

/** Turns a byte stream into pieces of valid UTF-8 that never split a character: an incomplete sequence at the
 *  end is held back until the next push; invalid bytes become U+FFFD. */
class Utf8Stream {
public:
    std::string push(std::string_view bytes);
    std::string finish();  // flushes a held-back incomplete sequence as U+FFFD

private:
    std::string pending_;
};

/** Length of the longest prefix of `s` that does not end inside an incomplete UTF-8 sequence. */
size_t utf8_complete_prefix(std::string_view s);

// ---------------------------------------------------------------------------------------------------------------
// Small pure helpers (engine.cpp), declared here for the plugin's unit tests.
// ---------------------------------------------------------------------------------------------------------------

/** The longest suffix of `text` that is a proper prefix of a non-empty stop string (held back while streaming:
 *  it may still become a stop). Empty stop strings are ignored. */
size_t partial_stop_length(std::string_view text, const std::vector<std::string> &stops);

/** `general.sampling.top_k` from GGUF metadata text: a whole number in 0..INT32_MAX, else `fallback` (the value
 *  is written as a float by some converters; NaN, infinities and out-of-range values are not converted). */
int32_t top_k_from_metadata(const char *text, int32_t fallback);

/** The top_k the sampler gets: the request's, else the model's default, never more than the vocabulary (llama.cpp's
 *  CPU sampler clamps by itself, but its backend top_k, ggml_top_k, asserts k <= n; 0 keeps "no cut"). */
int32_t sampling_top_k(std::optional<int32_t> requested, int32_t fallback, int32_t n_vocab);

/** Whether the tool-call parser should run now, given the bytes it parsed so far in this generation and the
 *  length of the text it would parse: the parser re-reads the whole output, so its runs are spaced out as the
 *  output grows and the total work stays within kParseBudget times the output length (O(new bytes) per token). */
bool tool_parse_due(uint64_t parsed_so_far, size_t text_size);
constexpr uint64_t kParseBudget = 256;

/** Test hook (tests/unit_tests.cpp): when set, called on the decode thread just before the final, strict parse of
 *  a tool output, so a test can make an allocation of that parse fail. Never set in the plugin. */
extern std::atomic<void (*)()> g_before_final_tool_parse;

/** Test hook (tests/unit_tests.cpp): when set, called on the decode thread after each step's llama_decode with its
 *  result (2: aborted, see Engine::abort_decode) and how long it took, in microseconds. Never set in the plugin. */
extern std::atomic<void (*)(int rc, int64_t us)> g_after_decode;

/** Test hook (tests/unit_tests.cpp): when set, called with each grammar llama.cpp's json_schema_to_grammar wrote for
 *  grammar.cpp (an integer range's, the output schema's) before it is used, so a test can stand in for a converter
 *  whose output is not what the rewrite expects. Never set in the plugin. */
extern std::atomic<void (*)(std::string &grammar)> g_converted_grammar;

/** Test hook (tests/unit_tests.cpp): when set, the token that output_schema_grammar's std::random_device is made
 *  with; one it refuses fails as a machine without a usable entropy source would. Never set in the plugin. */
extern std::atomic<const char *> g_random_device_token;

// ---------------------------------------------------------------------------------------------------------------
// Jobs (job.cpp): one accepted generation. The decode thread pushes events; the job's own emitter thread delivers
// them to the host's sink, so a slow client (a blocking emit) never stalls the batch of the other sequences.
// ---------------------------------------------------------------------------------------------------------------

struct Event {
    int32_t type = 0;
    int32_t index = 0;
    int32_t code = 0;
    std::string text;
    std::string name;
    int64_t input_tokens = -1;
    int64_t output_tokens = -1;
    int64_t reasoning_tokens = -1;
    int64_t cached_tokens = -1;
};

class Engine;

/** Everything the decode thread needs to run one request; built by Engine::prepare on the caller's thread. */
struct Prepared {
    std::vector<llama_token> prompt;
    common_sampler *sampler = nullptr;          // owned
    bool parse_tools = false;                   // run llama.cpp's chat parser over the output (tools offered)
    bool single_call = false;                   // parallel_tool_calls false
    common_chat_parser_params parser_params;
    std::set<llama_token> preserved_tokens;     // rendered as text (tool-call markers)
    std::vector<std::string> stops;             // additional stop strings of the chat format
    int64_t max_output = 0;
    Prepared() = default;
    Prepared(const Prepared &) = delete;
    Prepared &operator=(const Prepared &) = delete;
    Prepared(Prepared &&other) noexcept;
    Prepared &operator=(Prepared &&other) noexcept;
    ~Prepared();
};

struct ToolCallProgress {
    bool begun = false;
    bool ended = false;
    std::string id;
    std::string args_sent;
};

class Job {
public:
    Job(uint64_t request_id, const afm_event_sink &sink, Prepared prepared, Engine *engine);
    ~Job();

    uint64_t request_id() const { return request_id_; }

    /** Starts the emitter thread. Returns false when it could not be started. */
    bool start();
    /** Joins the emitter thread (after it finished, or after cancel). */
    void join();

    /** [thread-safe] cancel(): the emitter ends the generation with DONE/CANCELLED at once. */
    void cancel();
    /** True once the generation must not be decoded any further (cancelled, client gone, or finished). */
    bool stopped() const { return stopped_.load(std::memory_order_acquire); }
    /** True once the emitter thread delivered the terminal event and returned (join does not block). */
    bool finished() const { return finished_.load(std::memory_order_acquire); }

    /** [decode thread] Queues an event. A terminal event closes the queue. May throw (allocation). */
    void push(Event event);
    size_t queued() const;

    /** [any thread] Ends the generation with ERROR `code` and `message` without allocating, so it can be called
     *  where an allocation just failed: the emitter delivers what is queued, then USAGE and the ERROR. Does
     *  nothing once a terminal event is queued. Never throws. */
    void abort(afm_status code, const char *message) noexcept;
    /** [generate] Marks a job that was queued but whose emitter could not be started: the decode thread drops
     *  it, and no event ever reaches the host's sink. */
    void discard() noexcept { stopped_.store(true, std::memory_order_release); }

    // Usage so far, kept current by the decode thread, read by the emitter for a cancelled generation.
    std::atomic<int64_t> input_tokens{0};
    std::atomic<int64_t> output_tokens{0};
    std::atomic<int64_t> cached_tokens{0};

    // Decode-thread state (touched only by the decode thread).
    Prepared prep;
    size_t n_prompt_done = 0;      // prompt tokens already in the slot's KV cache
    int64_t n_generated = 0;
    llama_token next_token = -1;   // sampled, to be decoded next step
    std::string raw;               // all generated text (bytes)
    size_t raw_sent = 0;           // raw-text mode: bytes of `raw` already passed on
    Utf8Stream utf8;
    std::string content_sent;      // tool mode: content already passed on
    std::vector<ToolCallProgress> calls;
    bool done = false;             // the decode thread queued the terminal event
    bool stop_cut = false;         // a stop string of the chat format ended the output
    int64_t last_progress_us = 0;  // when the decode thread last sent a progress USAGE (queued / reading the prompt)
    uint64_t parsed_bytes = 0;     // tool mode: bytes the output parser read so far (tool_parse_due)
    int64_t t_start_us = 0;        // submitted
    int64_t t_first_us = 0;        // first output token sampled
    int32_t decode_steps = 0;
    int64_t us_decode = 0;         // time in llama_decode for steps this job took part in (debug figures)
    int64_t us_sample = 0;

private:
    void run();
    int32_t deliver(const Event &event);

    const uint64_t request_id_;
    const afm_event_sink sink_;
    Engine *const engine_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Event> queue_;
    bool cancel_requested_ = false;  // guarded by mutex_
    bool terminal_queued_ = false;   // guarded by mutex_
    bool abort_requested_ = false;   // guarded by mutex_
    int32_t abort_code_ = 0;         // guarded by mutex_
    char abort_message_[256] = {0};  // guarded by mutex_ (fixed: filled where allocation may fail)
    std::atomic<bool> stopped_{false};
    std::atomic<bool> finished_{false};
    std::thread thread_;
};

// ---------------------------------------------------------------------------------------------------------------
// Engine (engine.cpp): the model, one llama_context with N sequences, and the decode thread.
// ---------------------------------------------------------------------------------------------------------------

struct LoadFailure {
    std::string reason;
    std::string reason_code;
};

class Engine {
public:
    /** Loads the model and starts the decode thread. On failure returns nullptr and fills `failure`. */
    static std::unique_ptr<Engine> load(const Settings &settings, LoadFailure &failure);
    ~Engine();

    const Settings &settings() const { return settings_; }
    int32_t context_tokens() const { return settings_.context_tokens; }
    int32_t max_input_tokens() const { return settings_.context_tokens - settings_.context_tokens / 4; }
    int32_t max_output_tokens() const { return settings_.context_tokens / 4; }

    /** The output cap of one request: its max_output_tokens (the model's budget when absent), never more than the
     *  budget `describe` advertises nor the room the prompt leaves in the context. */
    int64_t output_cap(int64_t requested, int64_t prompt_tokens) const;

    /** Templates and tokenizes a request; with `for_generation` also checks budgets and builds the sampler.
     *  [thread-safe] Throws BackendError. */
    Prepared prepare(const Request &request, bool for_generation);

    /** Queues a job for the decode thread. [thread-safe] Never blocks on decoding. May throw (allocation); the
     *  job is then not queued. */
    void submit(std::shared_ptr<Job> job);

    /** Wakes the decode thread (a cancel, a drained event queue). [thread-safe] */
    void wake();

    /** Stops and joins the decode thread; queued and running jobs are dropped (their emitters must be done or
     *  cancelled). Idempotent; the destructor calls it. */
    void stop();

    const llama_vocab *vocab() const { return vocab_; }

    /** The prompt cache, or nullptr when both tiers are off. Its stats() may be read from any thread. */
    PromptCache *prompt_cache() const { return cache_.get(); }

private:
    Engine() = default;
    struct Slot;
    void run(std::promise<int> warmed);
    void loop();
    /** llama.cpp's abort callback (llama_set_abort_callback): ggml asks it after every node of the graph it computes,
     *  on the decode thread (ggml's thread 0 is the caller). True ends the running llama_decode at once (it returns
     *  2): when the engine stops, or when every generation in the batch was stopped meanwhile (cancelled, its client
     *  gone, a deadline), so a long prompt batch does not keep the cores busy for nobody. */
    static bool abort_decode(void *engine) noexcept;
    void step_assign(std::deque<std::shared_ptr<Job>> &waiting);
    void assign(Slot &slot, const std::shared_ptr<Job> &job);
    void on_token(Slot &slot, llama_token token);
    void emit_text(Job &job, std::string_view bytes);
    void process_tools(Slot &slot, bool final, int32_t reason);
    void finish(Slot &slot, int32_t reason);
    void send_progress(Job &job, int64_t now) noexcept;
    /** Ends the slot's generation with ERROR (noexcept: called from catch handlers, where allocating may fail
     *  again) and drops its sequence from the KV cache. */
    void fail_slot(Slot &slot, afm_status code, const char *message) noexcept;
    /** Ends every generation the decode thread knows of with ERROR (a failure outside any one slot). */
    void fail_all(std::deque<std::shared_ptr<Job>> &waiting, const char *message) noexcept;
    void release(Slot &slot, bool clear_cache) noexcept;
    /** Copies the slot's sequence state into the prompt cache (RAM when `ram`, and the disk tier) unless it holds
     *  it already. Never throws: a state that cannot be kept is not. */
    void stash(Slot &slot, bool ram) noexcept;

    Settings settings_;
    llama_model *model_ = nullptr;
    llama_context *ctx_ = nullptr;
    const llama_vocab *vocab_ = nullptr;
    common_chat_templates_ptr templates_;
    std::mutex template_mutex_;
    struct SamplingDefaults {
        int32_t top_k = 40;
        float top_p = 0.95f;
        float min_p = 0.05f;
        float temp = 0.80f;
    } defaults_;
    int32_t n_batch_ = 512;

    bool kv_unified_ = false;
    bool native_tools_ = false;  // the chat template renders tool calls itself (else: the generic format below)
    bool default_template_ = false;  // the GGUF has no chat template: llama.cpp's ChatML default is used
    ggml_threadpool *threadpool_ = nullptr;
    void (*threadpool_free_)(ggml_threadpool *) = nullptr;

    std::unique_ptr<PromptCache> cache_;

    std::vector<Slot *> slots_;
    std::vector<Slot *> readers_;                 // decode thread: slots reading their prompt this step (reserved)
    int64_t progress_interval_us_ = 250000;       // a quiet generation sends a progress USAGE this often
    std::thread thread_;
    std::mutex work_mutex_;
    std::condition_variable work_cv_;
    std::deque<std::shared_ptr<Job>> incoming_;  // guarded by work_mutex_
    uint64_t wake_seq_ = 0;                       // guarded by work_mutex_
    bool shutdown_ = false;                       // guarded by work_mutex_
    std::atomic<bool> stopping_{false};           // stop() began: a running decode aborts (abort_decode)
};

constexpr size_t kMaxQueuedEvents = 64;  // a slot whose client lags further behind pauses (per-slot backpressure)

}  // namespace afm_local
