// SPDX-License-Identifier: Apache-2.0
// unit_tests.cpp: the local backend's own C++ tests, run by `make -C Plugins/local test` (and so by `make test`).
//
// Linked with the plugin's objects (not local.so, whose symbols are hidden), so a test can drive the ABI exactly as
// a host does and also reach the engine directly where the ABI cannot set something up (a stop string). Every test
// uses the real model (MODEL=...) and real llama.cpp.
//
// Fault injection: this program replaces the global operator new. While armed, the Nth allocation made by any
// thread that is not marked exempt (the test's own bookkeeping, the host callbacks) throws std::bad_alloc. The
// sweep arms it at every N over a generation, so each allocation the backend makes on the path (in generate, on
// the decode thread, in its catch handlers) fails once, and checks the ABI's promises every time: a refused
// generate sends no event, an accepted one gets exactly one terminal event, nothing terminates the process, and the
// instance still serves afterwards.
#include "local.h"

#include "common.h"

#include <nlohmann/json.hpp>

#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// ---------------------------------------------------------------------------------------------------------------
// Allocation fault injection
// ---------------------------------------------------------------------------------------------------------------

namespace {
std::atomic<long> g_countdown{0};      // 0: disarmed; N > 0: the Nth counted allocation from now throws
std::atomic<long> g_counted{0};        // counted allocations since the last reset (while counting)
std::atomic<bool> g_counting{false};
std::atomic<bool> g_sticky{false};     // with a countdown: from the Nth on, every counted allocation throws
thread_local int t_exempt = 0;         // > 0: this thread's allocations are not counted
// A window armed from inside the backend (g_before_final_tool_parse): only the arming thread's allocations count,
// and those of llama.cpp `common` are not passed over.
std::atomic<bool> g_window{false};
thread_local bool t_window = false;
std::atomic<long> g_injected{0};       // failures injected so far
// A cap on any one allocation (0: none): a larger one is refused (std::bad_alloc) and counted, so a test can show
// that hostile input never makes the backend ask for a huge block, whatever the machine's overcommit policy.
std::atomic<size_t> g_allocation_cap{0};
std::atomic<long> g_over_cap{0};

struct Exempt {
    Exempt() { t_exempt++; }
    ~Exempt() { t_exempt--; }
};

/** Whether the allocating code is llama.cpp `common` (chat templates, Jinja): its nlohmann::json values allocate
 *  in their noexcept destructors, so a failure there is std::terminate in any program, and that code is not this
 *  backend's to change. Such an allocation is passed over and the next one fails instead. */
bool inside_llama_common() {
    void *frames[24];
    int n = backtrace(frames, 24);
    for (int i = 2; i < n; i++) {
        Dl_info info;
        if (dladdr(frames[i], &info) && info.dli_fname && std::strstr(info.dli_fname, "libllama-common")) return true;
    }
    return false;
}

void *allocate(size_t n) {
    if (size_t cap = g_allocation_cap.load(std::memory_order_relaxed); cap && n > cap) {
        g_over_cap.fetch_add(1);
        throw std::bad_alloc();
    }
    if (!t_exempt && (!g_window.load(std::memory_order_relaxed) || t_window)) {
        if (g_counting.load(std::memory_order_relaxed)) g_counted.fetch_add(1, std::memory_order_relaxed);
        if (g_countdown.load(std::memory_order_relaxed) > 0 && g_countdown.fetch_sub(1) == 1) {
            t_exempt++;
            bool skip = !t_window && inside_llama_common();
            t_exempt--;
            if (skip || g_sticky.load(std::memory_order_relaxed)) g_countdown.store(1);  // the next one fails too
            if (!skip) {
                g_injected.fetch_add(1, std::memory_order_relaxed);
                throw std::bad_alloc();
            }
        }
    }
    void *p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
}  // namespace

void *operator new(size_t n) { return allocate(n); }
void *operator new[](size_t n) { return allocate(n); }
void *operator new(size_t n, const std::nothrow_t &) noexcept {
    try {
        return allocate(n);
    } catch (...) {
        return nullptr;
    }
}
void *operator new[](size_t n, const std::nothrow_t &) noexcept {
    try {
        return allocate(n);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }

namespace afm_local {
/** The prompt cache's insides a test needs (a friend of PromptCache): its counters' lock, and a directory scan. */
struct PromptCacheTestAccess {
    static std::mutex &ram_mutex(PromptCache &cache) { return cache.ram_mutex_; }
    static void scan(PromptCache &cache) { cache.scan(); }
};
}  // namespace afm_local

// ---------------------------------------------------------------------------------------------------------------
// A minimal host
// ---------------------------------------------------------------------------------------------------------------

namespace {

using json = nlohmann::json;
using namespace afm_local;

int g_failures = 0;
std::string g_model;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            Exempt exempt_;                                                                     \
            std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            std::fprintf(stderr, __VA_ARGS__);                                                  \
            std::fprintf(stderr, "\n");                                                         \
            g_failures++;                                                                       \
        }                                                                                       \
    } while (0)

void host_log(void *, int32_t level, afm_str message) {
    Exempt exempt;
    if (level >= AFM_LOG_ERROR || std::getenv("AFM_LOCAL_TEST_VERBOSE"))
        std::fprintf(stderr, "  [log %d] %.*s\n", level, (int)message.size, message.data);
}

const void *host_extension(void *, const char *) { return nullptr; }

afm_host_api g_host = {sizeof(afm_host_api), AFM_ABI_MAJOR, AFM_ABI_MINOR, 0, nullptr, host_log, host_extension};

struct Ev {
    int32_t type;
    int32_t index;
    int32_t code;
    std::string text;
    std::string name;
    int64_t output_tokens;
    int64_t input_tokens = -1;
    int64_t cached_tokens = -1;
};

/** One generation's events, as the host's sink receives them. */
struct Collector {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<Ev> events;
    int terminals = 0;
    int after_terminal = 0;
    std::atomic<int> emitting{0};
    bool overlapped = false;
    afm_event_sink sink{sizeof(afm_event_sink), 0, this, &Collector::emit};

    static int32_t emit(void *ctx, const afm_event *e) {
        Exempt exempt;
        auto *self = static_cast<Collector *>(ctx);
        if (self->emitting.fetch_add(1) != 0) self->overlapped = true;
        {
            std::lock_guard<std::mutex> lock(self->mutex);
            if (self->terminals) self->after_terminal++;
            Ev ev{e->type, e->index, e->code, std::string(e->text.data ? e->text.data : "", e->text.size),
                  std::string(e->name.data ? e->name.data : "", e->name.size), e->output_tokens,
                  e->input_tokens, e->cached_tokens};
            self->events.push_back(std::move(ev));
            if (e->type == AFM_EVENT_DONE || e->type == AFM_EVENT_ERROR) self->terminals++;
            // Under the lock: the test may destroy the collector as soon as it sees the terminal event.
            self->emitting.fetch_sub(1);
            self->cv.notify_all();
        }
        return 0;
    }

    bool wait(int seconds) {
        Exempt exempt;
        std::unique_lock<std::mutex> lock(mutex);
        return cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return terminals > 0; });
    }

    const Ev *terminal() {
        for (const auto &e : events)
            if (e.type == AFM_EVENT_DONE || e.type == AFM_EVENT_ERROR) return &e;
        return nullptr;
    }

    std::string text() {
        std::string t;
        for (const auto &e : events)
            if (e.type == AFM_EVENT_TEXT_DELTA) t += e.text;
        return t;
    }

    struct Call {
        std::string name, args;
        bool ended = false;
    };
    std::vector<Call> calls() {
        std::vector<Call> out;
        for (const auto &e : events) {
            if (e.type == AFM_EVENT_TOOL_CALL_BEGIN) {
                if ((size_t)e.index >= out.size()) out.resize((size_t)e.index + 1);
                out[(size_t)e.index].name = e.name;
            } else if (e.type == AFM_EVENT_TOOL_CALL_ARGUMENTS && (size_t)e.index < out.size()) {
                out[(size_t)e.index].args += e.text;
            } else if (e.type == AFM_EVENT_TOOL_CALL_END && (size_t)e.index < out.size()) {
                out[(size_t)e.index].ended = true;
            }
        }
        return out;
    }
};

afm_str span(const std::string &s) { return afm_str{s.data(), (uint64_t)s.size()}; }

const afm_backend_vtable *negotiate() {
    afm_backend_info info{};
    info.struct_size = sizeof info;
    afm_error error{};
    error.struct_size = sizeof error;
    if (afm_backend_negotiate(&g_host, &info, &error) != AFM_OK) return nullptr;
    return info.vtable;
}

afm_instance *create(const afm_backend_vtable *vt, int context_tokens, int parallel, const json &extra = json::object()) {
    json settings = {{"Model", g_model}, {"ContextTokens", std::to_string(context_tokens)},
                     {"ParallelSequences", std::to_string(parallel)}};
    for (auto it = extra.begin(); it != extra.end(); ++it) settings[it.key()] = it.value();
    std::string config = json{{"config_version", 1}, {"backend", "local"}, {"instance", "local#1"},
                              {"generation", 1}, {"state_dir", "/tmp/afm-local-unit"}, {"settings", settings}}
                             .dump();
    afm_instance *instance = nullptr;
    afm_error error{};
    error.struct_size = sizeof error;
    afm_status rc = vt->create(&g_host, span(config), &instance, &error);
    if (rc != AFM_OK) {
        std::fprintf(stderr, "create failed: %s\n", error.message);
        return nullptr;
    }
    return instance;
}

std::string model_id() { return model_id_from_path(g_model); }

// Loads an engine of its own (one sequence, 2,048 tokens) for a test that drives the engine below the ABI, and
// runs `test` on it; a failed load is a test failure.
void with_engine(const char *instance, void (*test)(Engine &)) {
    Settings s;
    s.instance = instance;
    s.model_path = g_model;
    s.model_id = model_id();
    s.context_tokens = 2048;
    s.threads = usable_cores();
    s.parallel = 1;
    LoadFailure failure;
    auto engine = Engine::load(s, failure);
    CHECK(engine != nullptr, "load: %s", failure.reason.c_str());
    if (engine) test(*engine);
}

const json kWeather = {{"name", "get_weather"},
                       {"description", "Get the current weather for a city"},
                       {"parameters",
                        {{"type", "object"},
                         {"properties",
                          {{"city", {{"type", "string"}}},
                           {"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
                         {"required", {"city", "unit"}},
                         {"additionalProperties", false}}}};

std::string request(const std::string &prompt, int max_output, bool tool = false, bool parallel = false) {
    json r = {{"request_version", 1},
              {"model", model_id()},
              {"system", json::array()},
              {"input", {{{"type", "message"}, {"role", "user"}, {"content", prompt}}}},
              {"max_output_tokens", max_output},
              {"temperature", 0}};
    if (tool) {
        r["tools"] = json::array({kWeather});
        r["tool_choice"] = {{"mode", "required"}};
        r["parallel_tool_calls"] = parallel;
    }
    return r.dump();
}

afm_status generate(const afm_backend_vtable *vt, afm_instance *instance, uint64_t id, const std::string &body,
                    Collector &c, afm_error *error = nullptr) {
    afm_error local{};
    local.struct_size = sizeof local;
    return vt->generate(instance, id, span(body), &c.sink, error ? error : &local);
}

/** The arguments of a call that was closed (TOOL_CALL_END) must parse as a JSON object. */
void check_closed_calls_parse(Collector &c, const char *what) {
    for (const auto &call : c.calls()) {
        if (!call.ended) continue;
        json args = json::parse(call.args, nullptr, false);
        CHECK(!args.is_discarded() && args.is_object(), "%s: a closed call's arguments do not parse: %s", what,
              call.args.c_str());
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------------------------

void test_negotiate_leaves_struct_size() {
    // A host built against a later minor passes a larger afm_backend_info; the callee leaves struct_size as set.
    struct {
        afm_backend_info info;
        uint64_t later_field;
    } bigger{};
    bigger.info.struct_size = sizeof bigger;
    bigger.later_field = 0x1234;
    afm_error error{};
    error.struct_size = sizeof error;
    afm_status rc = afm_backend_negotiate(&g_host, &bigger.info, &error);
    CHECK(rc == AFM_OK, "negotiate: %s", error.message);
    CHECK(bigger.info.struct_size == sizeof bigger, "struct_size became %u (the caller set %zu)",
          bigger.info.struct_size, sizeof bigger);
    CHECK(bigger.later_field == 0x1234, "negotiate wrote past the ABI 1.0 fields");
    CHECK(bigger.info.vtable != nullptr, "no vtable");
}

#ifndef AFM_UNIT_OLD  // (the helpers are new: building against older sources for a before/after comparison)
void test_helpers() {
    // An empty stop string holds nothing back (its size() - 1 used to wrap to SIZE_MAX).
    CHECK(partial_stop_length("abc<", {""}) == 0, "empty stop");
    CHECK(partial_stop_length("abc<|im", {"", "<|im_end|>"}) == 4, "partial stop");
    CHECK(partial_stop_length("", {"", "x"}) == 0, "empty text");
    // top_k from GGUF metadata (a float in some files): only whole numbers in range are taken.
    CHECK(top_k_from_metadata("40", 7) == 40, "40");
    CHECK(top_k_from_metadata("64.000000", 7) == 64, "64.0");
    CHECK(top_k_from_metadata("1e30", 7) == 7, "1e30");
    CHECK(top_k_from_metadata("nan", 7) == 7, "nan");
    CHECK(top_k_from_metadata("inf", 7) == 7, "inf");
    CHECK(top_k_from_metadata("-3", 7) == 7, "-3");
    CHECK(top_k_from_metadata("2.5", 7) == 7, "2.5");
    CHECK(top_k_from_metadata("", 7) == 7, "empty");
    // top_k beyond the vocabulary (a client's 2^31-1, a model's metadata) is the vocabulary; 0 stays "no cut".
    CHECK(sampling_top_k(INT32_MAX, 40, 49152) == 49152, "INT32_MAX");
    CHECK(sampling_top_k(std::nullopt, 100000, 49152) == 49152, "metadata 100000");
    CHECK(sampling_top_k(7, 40, 49152) == 7, "7");
    CHECK(sampling_top_k(std::nullopt, 40, 49152) == 40, "default");
    CHECK(sampling_top_k(std::nullopt, 0, 49152) == 0, "0");
    // The tool-call parser's total work stays linear in the output: simulate 100 kB growing by 4 bytes a token.
    uint64_t parsed = 0;
    size_t runs = 0;
    for (size_t size = 4; size <= 100000; size += 4) {
        if (tool_parse_due(parsed, size)) {
            parsed += size;
            runs++;
        }
    }
    CHECK(parsed <= kParseBudget * 100000, "parsed %llu bytes for a 100 kB output",
          (unsigned long long)parsed);
    CHECK(runs > 1000, "only %zu parser runs: streaming would stall", runs);
}
#else
void test_helpers() {}
#endif

void test_output_cap_is_the_advertised_budget(const afm_backend_vtable *vt) {
    // ContextTokens=256: describe advertises max_output_tokens 64; a request asking for more gets at most that.
    afm_instance *instance = create(vt, 256, 1);
    CHECK(instance, "create");
    if (!instance) return;
    Collector c;
    afm_status rc = generate(vt, instance, 1, request("Write a very long essay about the oceans.", 1000), c);
    CHECK(rc == AFM_OK, "generate");
    CHECK(c.wait(120), "no terminal event");
    const Ev *t = c.terminal();
    int64_t out = -1;
    for (const auto &e : c.events)
        if (e.type == AFM_EVENT_USAGE) out = e.output_tokens;
    CHECK(t && t->type == AFM_EVENT_DONE, "not DONE");
    std::fprintf(stderr, "  %lld output tokens, finish %d\n", (long long)out, t ? t->code : -1);
    CHECK(out > 0 && out <= 64, "%lld output tokens; describe advertises 64", (long long)out);
    vt->destroy(instance);
}

void test_capped_tool_call_is_not_closed(const afm_backend_vtable *vt, afm_instance *instance) {
    // The output cap cuts the call inside its arguments: the call must stay open (the host marks it
    // incomplete), never be closed with arguments that do not parse.
    for (int cap : {4, 6, 9, 12, 15}) {
        Collector c;
        afm_status rc = generate(vt, instance, 100 + (uint64_t)cap, request("What's the weather in Paris?", cap, true), c);
        CHECK(rc == AFM_OK, "generate");
        CHECK(c.wait(120), "no terminal event");
        const Ev *t = c.terminal();
        CHECK(t && t->type == AFM_EVENT_DONE && t->code == AFM_FINISH_LENGTH, "cap %d: not DONE length", cap);
        check_closed_calls_parse(c, "capped call");
    }
}

void test_tool_call_cut_by_a_stop_string(Engine &engine) {
    // A stop string of the chat format cuts the output inside the call's arguments ("} closes the last string
    // value). The generation must not complete (DONE stop/tool_calls) with arguments that do not parse.
    Request r = parse_request(span(request("What's the weather in Paris?", 96, true)));
    Prepared p = engine.prepare(r, true);
    p.stops = {"Paris", "celsius", "fahrenheit"};
    Collector c;
    auto job = std::make_shared<Job>(7, c.sink, std::move(p), &engine);
    CHECK(job->start(), "start");
    engine.submit(job);
    CHECK(c.wait(120), "no terminal event");
    job->join();
    const Ev *t = c.terminal();
    CHECK(t != nullptr, "no terminal");
    if (!t) return;
    auto calls = c.calls();
    CHECK(!calls.empty() || t->type == AFM_EVENT_ERROR, "the model made no call (output %s)", c.text().c_str());
    for (const auto &call : calls)
        std::fprintf(stderr, "  call %s(%s)%s; terminal %d/%d %s\n", call.name.c_str(), call.args.c_str(),
                     call.ended ? " ended" : "", t->type, t->code, t->text.c_str());
    if (t->type == AFM_EVENT_DONE) {
        CHECK(t->code != AFM_FINISH_TOOL_CALLS && t->code != AFM_FINISH_STOP,
              "a call cut by a stop string completed with finish %d", t->code);
        check_closed_calls_parse(c, "stop-cut call");
    } else {
        CHECK(t->code == AFM_ERR_TOOL_FAILED, "error %d: %s", t->code, t->text.c_str());
    }
    for (const auto &call : calls)
        CHECK(!call.ended || json::accept(call.args), "closed with arguments %s", call.args.c_str());
}

/** Runs `fn` with memory exhausted from its Nth allocation on (sticky injection), for every N up to its clean
 *  run's count: as in a runner at its address-space limit (RunnerMemoryLimitMB). It must throw, never terminate. */
void exhaust_memory_from_every_allocation(const char *what, const std::function<void()> &fn) {
    g_counted.store(0);
    g_counting.store(true);
    try {
        fn();
    } catch (...) {
    }
    g_counting.store(false);
    long total = g_counted.load(), threw = 0;
    for (long n = 1; n <= total + 1; n++) {
        g_sticky.store(true);
        g_countdown.store(n);
        try {
            fn();
        } catch (...) {
            threw++;
        }
        g_countdown.store(0);
        g_sticky.store(false);
    }
    std::fprintf(stderr, "  %s: %ld allocations in a clean run; exhausted from each: %ld threw\n", what, total, threw);
    CHECK(threw >= total, "%s: only %ld of %ld runs with exhausted memory failed", what, threw, total);
}

/** Output schemas and tool parameters reach the grammar as written: members in the document's order (the DOM
 *  parse sorts keys), strings re-escaped, number tokens untouched; and the pass stays allocation-safe. */
void test_schemas_keep_their_order() {
    const std::string schema =
        R"({"type":"object","properties":{"reasoning":{"type":"string","description":"a \"quoted\\ note\u0001"},)"
        R"("choice":{"enum":["b","a"]},"n":{"type":"number","maximum":1.50e2}},"required":["reasoning","choice","n"],)"
        R"("additionalProperties":false})";
    const std::string parameters = R"({"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}})";
    const std::string body = R"({"request_version":1,"model":")" + model_id() +
                             R"(","system":[],"input":[{"type":"message","role":"user","content":"Hi."}],)"
                             R"("tools":[{"name":"first"},{"name":"pick","parameters":)" + parameters +
                             R"(}],"output_format":{"type":"json_schema","name":"S","schema":)" + schema + "}}";
    Request r = parse_request(span(body));
    CHECK(r.output_schema == schema, "output schema: %s", r.output_schema.c_str());
    CHECK(r.tools.size() == 2, "tools: %zu", r.tools.size());
    CHECK(r.tools[0].parameters == R"({"type":"object","properties":{}})", "default parameters: %s",
          r.tools[0].parameters.c_str());
    CHECK(r.tools[1].parameters == parameters, "parameters: %s", r.tools[1].parameters.c_str());
    exhaust_memory_from_every_allocation("parse_request (schema)", [&] { parse_request(span(body)); });
}

// --- Schemas the grammar cannot enforce, and bounded numbers --------------------------------------------------

/** A request document with an output schema (and optionally tools), for parse_request. */
std::string structured_request(const json &schema, const json &tools = json()) {
    json r = {{"request_version", 1},
              {"model", model_id()},
              {"system", json::array()},
              {"input", {{{"type", "message"}, {"role", "user"}, {"content", "Hi."}}}},
              {"output_format", {{"type", "json_schema"}, {"name", "S"}, {"schema", schema}}}};
    if (!tools.is_null()) r["tools"] = tools;
    return r.dump();
}

/** The message of the invalid_request that parsing `body` throws, or "" when it is accepted. */
std::string refusal(const std::string &body) {
    try {
        parse_request(span(body));
    } catch (const BackendError &e) {
        if (e.code() == AFM_ERR_INVALID_REQUEST) return e.what();
        return std::string("wrong code ") + std::to_string(e.code()) + ": " + e.what();
    }
    return "";
}

json object_of(const json &properties) {
    json required = json::array();
    for (auto &[name, _] : properties.items()) required.push_back(name);
    return {{"type", "object"}, {"properties", properties}, {"required", required}, {"additionalProperties", false}};
}

/** maxLength/maxItems above llama.cpp's 2000 were read by its grammar parser as unbounded, so a longer answer
 *  ended invalid_structured_output (500): the output schema's are refused, naming the keyword and the limit; a
 *  tool's stay open (the host does not check arguments). Minimums above 2000 are refused for both. */
void test_repetition_bounds_above_the_grammar_limit() {
    std::string m = refusal(structured_request(object_of({{"essay", {{"type", "string"}, {"maxLength", 2500}}}})));
    CHECK(m.find("output_format.schema.properties.essay.maxLength is 2500") != std::string::npos &&
              m.find("2000") != std::string::npos,
          "maxLength 2500: \"%s\"", m.c_str());
    m = refusal(structured_request(
        object_of({{"tags", {{"type", "array"}, {"items", {{"type", "string"}}}, {"maxItems", 2001}}}})));
    CHECK(m.find("output_format.schema.properties.tags.maxItems is 2001") != std::string::npos, "maxItems: \"%s\"",
          m.c_str());
    json nested = {{"type", "object"},
                   {"properties", {{"a", {{"$ref", "#/$defs/Row"}}}}},
                   {"$defs", {{"Row", object_of({{"note", {{"type", "string"}, {"minLength", 1}, {"maxLength", 9000}}}})}}}};
    m = refusal(structured_request(nested));
    CHECK(m.find("output_format.schema.$defs.Row.properties.note.maxLength is 9000") != std::string::npos,
          "in $defs: \"%s\"", m.c_str());
    m = refusal(structured_request(object_of({{"s", {{"type", "string"}, {"minLength", 2001}}}})));
    CHECK(m.find("properties.s.minLength is 2001") != std::string::npos, "minLength: \"%s\"", m.c_str());
    // At the limit: accepted.
    m = refusal(structured_request(object_of({{"essay", {{"type", "string"}, {"maxLength", 2000}}}})));
    CHECK(m.empty(), "maxLength 2000 refused: %s", m.c_str());
    // A tool's maxLength above the limit stays (open); its minLength does not.
    json tool = {{"name", "save"}, {"parameters", object_of({{"text", {{"type", "string"}, {"maxLength", 100000}}}})}};
    m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}), json::array({tool})));
    CHECK(m.empty(), "tool maxLength refused: %s", m.c_str());
    tool["parameters"]["properties"]["text"]["minLength"] = 5000;
    m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}), json::array({tool})));
    CHECK(m.find("tools[0].parameters.properties.text.minLength is 5000") != std::string::npos, "tool minLength: %s",
          m.c_str());
}

/** Each unit of a length or count bound becomes a grammar rule: thousands of `maxLength: 2000` properties made
 *  llama.cpp's grammar parser allocate millions of rules. The sum over the request's schemas is capped. */
void test_repetition_budget() {
    json properties = json::object();
    for (int i = 0; i < 25; i++) properties["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 2000}};
    std::string m = refusal(structured_request(object_of(properties)));
    CHECK(m.empty(), "25 x 2000 (the budget) refused: %s", m.c_str());
    properties["p25"] = {{"type", "string"}, {"maxLength", 1}};
    m = refusal(structured_request(object_of(properties)));
    // (The document's members are read in name order, so the property that goes over is p9.)
    CHECK(m.find("output_format.schema.properties.p9.maxLength: the length and count bounds") != std::string::npos &&
              m.find("50000") != std::string::npos,
          "over the budget: \"%s\"", m.c_str());
    // Tools count too, and an attack-sized body is refused before any grammar is built.
    json many = json::object();
    for (int i = 0; i < 5000; i++) many["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 2000}};
    json tool = {{"name", "t"}, {"parameters", object_of(many)}};
    auto t0 = std::chrono::steady_clock::now();
    m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}), json::array({tool})));
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(m.find("tools[0].parameters.properties.") != std::string::npos && m.find("50000") != std::string::npos,
          "tool over the budget: \"%s\"", m.c_str());
    std::fprintf(stderr, "  5,000 x maxLength 2000 in a tool: refused in %.2f s\n", seconds);
}

/** Bounds of a `number` that the grammar cannot write exactly are refused, naming the keyword; whole numbers are
 *  enforced (see number_bounds_are_in_the_grammar). */
void test_number_bounds_the_grammar_cannot_take() {
    std::string m = refusal(structured_request(object_of({{"p", {{"type", "number"}, {"maximum", 0.5}}}})));
    CHECK(m.find("output_format.schema.properties.p.maximum is 0.5") != std::string::npos, "0.5: \"%s\"", m.c_str());
    m = refusal(structured_request(object_of({{"p", {{"type", "number"}, {"exclusiveMinimum", 1e300}}}})));
    CHECK(m.find("properties.p.exclusiveMinimum") != std::string::npos, "1e300: \"%s\"", m.c_str());
    for (const char *text : {"0", "0.0", "1.0", "-100", "1e2", "9007199254740991"}) {
        json schema = object_of({{"p", {{"type", "number"}, {"minimum", json::parse(text)}}}});
        m = refusal(structured_request(schema));
        CHECK(m.empty(), "minimum %s refused: %s", text, m.c_str());
    }
    // Integers, and numbers fixed by enum, are not this check's business.
    m = refusal(structured_request(object_of({{"p", {{"type", "number"}, {"enum", {0.5}}, {"maximum", 0.5}}}})));
    CHECK(m.empty(), "enum refused: %s", m.c_str());
}

/** Whether the grammar takes `text` whole (each token of it in turn). */
bool grammar_accepts(const llama_vocab *vocab, const std::string &grammar, const std::string &text) {
    llama_sampler *sampler = llama_sampler_init_grammar(vocab, grammar.c_str(), "root");
    if (!sampler) return false;
    bool ok = true;
    for (llama_token token : common_tokenize(vocab, text, false, true)) {
        llama_token_data data{token, 0.0f, 0.0f};
        llama_token_data_array candidates{&data, 1, -1, false};
        llama_sampler_apply(sampler, &candidates);
        if (std::isinf(data.logit)) {
            ok = false;
            break;
        }
        llama_sampler_accept(sampler, token);
    }
    if (ok) {  // the end of generation must be allowed too
        llama_token eog = llama_vocab_eos(vocab);
        llama_token_data data{eog, 0.0f, 0.0f};
        llama_token_data_array candidates{&data, 1, -1, false};
        llama_sampler_apply(sampler, &candidates);
        ok = !std::isinf(data.logit);
    }
    llama_sampler_free(sampler);
    return ok;
}

/** llama.cpp's converter writes every `number` as an unbounded number, so a model could write 150 for
 *  `maximum: 100` and the host then failed the answer (500 invalid_structured_output). Whole-number bounds are now
 *  in the grammar: inclusive and exclusive, negative ranges, nullable, in arrays and definitions. */
void test_number_bounds_are_in_the_grammar() {
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *model = llama_model_load_from_file(g_model.c_str(), mp);
    CHECK(model != nullptr, "vocab of %s", g_model.c_str());
    if (!model) return;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    struct Case {
        json bounds;
        std::vector<const char *> in, out;
    };
    const std::vector<Case> cases = {
        {{{"minimum", 0}, {"maximum", 100}},
         {"0", "100", "99.5", "100.0", "0.25", "7", "42.125"},
         {"150", "100.5", "-1", "-0.5", "101", "1e3", "1000"}},
        {{{"exclusiveMinimum", 0}, {"maximum", 1.0}}, {"0.5", "1", "0.001", "1.0"}, {"0", "0.0", "-0.5", "1.5", "2"}},
        {{{"minimum", -10}, {"exclusiveMaximum", -2}}, {"-10", "-9.5", "-3", "-2.5", "-10.0"}, {"-2", "-1.5", "-10.5", "-11", "0", "3"}},
        {{{"minimum", 5}}, {"5", "5.5", "123456", "6"}, {"4.99", "4", "-5", "0"}},
        {{{"exclusiveMaximum", 0}}, {"-1", "-0.5", "-123.25"}, {"0", "0.5", "1"}},
    };
    for (const auto &c : cases) {
        json number = {{"type", "number"}};
        for (auto &[k, v] : c.bounds.items()) number[k] = v;
        json schema = object_of({{"x", number}});
        std::string grammar = output_schema_grammar(schema.dump());
        for (const char *v : c.in)
            CHECK(grammar_accepts(vocab, grammar, std::string(R"({"x": )") + v + "}"), "%s: %s refused",
                  c.bounds.dump().c_str(), v);
        for (const char *v : c.out)
            CHECK(!grammar_accepts(vocab, grammar, std::string(R"({"x": )") + v + "}"), "%s: %s allowed",
                  c.bounds.dump().c_str(), v);
    }
    // Nullable, in an array, behind a $ref: each bounded number has its own rule.
    json schema = {{"type", "object"},
                   {"properties",
                    {{"a", {{"type", {"number", "null"}}, {"minimum", 0}, {"maximum", 10}}},
                     {"b", {{"type", "array"}, {"items", {{"type", "number"}, {"minimum", 1}, {"maximum", 2}}}}},
                     {"c", {{"$ref", "#/$defs/C"}}}}},
                   {"required", {"a", "b", "c"}},
                   {"additionalProperties", false},
                   {"$defs", {{"C", {{"type", "number"}, {"maximum", -1}}}}}};
    std::string grammar = output_schema_grammar(schema.dump());
    CHECK(grammar_accepts(vocab, grammar, R"({"a": null, "b": [1.5, 2], "c": -3.5})"), "combined: valid refused");
    CHECK(grammar_accepts(vocab, grammar, R"({"a": 10, "b": [], "c": -1})"), "combined: valid refused");
    CHECK(!grammar_accepts(vocab, grammar, R"({"a": 11, "b": [], "c": -1})"), "combined: a 11 allowed");
    CHECK(!grammar_accepts(vocab, grammar, R"({"a": 1, "b": [2.5], "c": -1})"), "combined: b 2.5 allowed");
    CHECK(!grammar_accepts(vocab, grammar, R"({"a": 1, "b": [], "c": -0.5})"), "combined: c -0.5 allowed");
    // A string that looks like the marker is left alone.
    // (object_of's members are in name order: nlohmann::json sorts keys.)
    json tricky = object_of({{"s", {{"const", "afm-number-bound-value-0"}}}, {"n", {{"type", "number"}, {"maximum", 3}}}});
    grammar = output_schema_grammar(tricky.dump());
    CHECK(grammar_accepts(vocab, grammar, R"({"n": 2, "s": "afm-number-bound-value-0"})"), "marker-like const refused");
    CHECK(!grammar_accepts(vocab, grammar, R"({"n": 4, "s": "afm-number-bound-value-0"})"), "marker: n 4 allowed");
    llama_model_free(model);
}

/** A vocabulary-only model for grammar checks (nullptr after a failed CHECK). */
llama_model *vocab_model() {
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *model = llama_model_load_from_file(g_model.c_str(), mp);
    CHECK(model != nullptr, "vocab of %s", g_model.c_str());
    return model;
}

/** The marker that stands for a bounded number grew by one "x" per pass until the schema text no longer contained
 *  it: a description "afm-number-bound-xxx…" made the conversion quadratic in its length and every marker in the
 *  grammar as long as it (L = 1,000,000 with 100 bounded numbers: 60 s, a 200 MB grammar). The marker is now 128
 *  random bits, so the grammar does not carry the schema's text. */
void test_number_marker_is_not_derived_from_the_schema() {
    json properties = json::object();
    for (int i = 0; i < 5; i++) properties["p" + std::to_string(i)] = {{"type", "number"}, {"maximum", 3}};
    json schema = object_of(properties);
    schema["description"] = "afm-number-bound-" + std::string(20000, 'x');
    std::string grammar = output_schema_grammar(schema.dump());
    CHECK(grammar.find("afm-number-bound-xxxxxxxx") == std::string::npos && grammar.size() < 32 * 1024,
          "the grammar carries the description: %zu bytes", grammar.size());
    llama_model *model = vocab_model();
    if (!model) return;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    CHECK(grammar_accepts(vocab, grammar, R"({"p0": 1, "p1": 2.5, "p2": 3, "p3": -7, "p4": 0})"), "valid refused");
    CHECK(!grammar_accepts(vocab, grammar, R"({"p0": 1, "p1": 2.5, "p2": 3.5, "p3": -7, "p4": 0})"), "3.5 allowed");
    llama_model_free(model);
}

/** Number ranges were not charged to the grammar budget: 10,000 bounded numbers (888 KB, within the host's node
 *  cap) took 217 s and 2.8 GB to convert, 1,000 bounded integers made a 5.7 MB grammar. Each range now costs the
 *  budget by the size of its rule; a realistic schema still fits. */
void test_number_ranges_count_against_the_budget() {
    json properties = json::object();
    for (int i = 0; i < 100; i++)
        properties["p" + std::to_string(i)] = {
            {"type", "number"}, {"minimum", -9007199254740989LL}, {"maximum", 9007199254740989LL}};
    std::string m = refusal(structured_request(object_of(properties)));
    CHECK(m.find("output_format.schema.properties.p") != std::string::npos && m.find("50000") != std::string::npos &&
              m.find("number") != std::string::npos,
          "100 numbers of ±2^53: \"%s\"", m.c_str());
    json many = json::object();
    for (int i = 0; i < 1000; i++)
        many["n" + std::to_string(i)] = {{"type", "integer"}, {"minimum", -1000000000000000LL}, {"maximum", 1000000000000000LL}};
    json tool = {{"name", "t"}, {"parameters", object_of(many)}};
    m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}), json::array({tool})));
    CHECK(m.find("tools[0].parameters.properties.n") != std::string::npos && m.find("50000") != std::string::npos,
          "1,000 integers of ±10^15 in a tool: \"%s\"", m.c_str());
    // 200 scores of 0..100 (numbers and integers) fit, and every one is in the grammar.
    json scores = json::object();
    std::string answer = "{";
    for (int i = 0; i < 100; i++) {
        std::string n = std::to_string(1000 + i);  // name order is document order
        scores["a" + n] = {{"type", "number"}, {"minimum", 0}, {"maximum", 100}};
        scores["b" + n] = {{"type", "integer"}, {"minimum", 0}, {"maximum", 100}};
    }
    for (int i = 0; i < 100; i++) answer += std::string(i ? ", " : "") + "\"a" + std::to_string(1000 + i) + "\": 99.5";
    for (int i = 0; i < 100; i++) answer += ", \"b" + std::to_string(1000 + i) + "\": 100";
    m = refusal(structured_request(object_of(scores)));
    CHECK(m.empty(), "200 ranges of 0..100 refused: %s", m.c_str());
    std::string grammar = output_schema_grammar(object_of(scores).dump());
    llama_model *model = vocab_model();
    if (!model) return;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    CHECK(grammar_accepts(vocab, grammar, answer + "}"), "200 scores: valid refused");
    std::string over = answer;
    over.replace(over.find("99.5"), 4, "100.5");
    CHECK(!grammar_accepts(vocab, grammar, over + "}"), "200 scores: 100.5 allowed");
    llama_model_free(model);
}

/** A definition nobody references is not in llama.cpp's grammar: its bounded number's marker was never found and
 *  a valid schema was refused ("a bounded number was lost"). */
void test_unreferenced_bounded_number() {
    json schema = json::parse(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"],)"
                              R"("additionalProperties":false,"$defs":{"unused":{"type":"number","maximum":3}}})");
    std::string grammar;
    try {
        grammar = output_schema_grammar(schema.dump());
    } catch (const std::exception &e) {
        CHECK(false, "unreferenced definition: %s", e.what());
        return;
    }
    llama_model *model = vocab_model();
    if (!model) return;
    CHECK(grammar_accepts(llama_model_get_vocab(model), grammar, R"({"a": "x"})"), "valid refused");
    llama_model_free(model);
}

/** Next to an exclusive bound a fraction of 16 digits rounded onto the bound as a double: exclusiveMaximum 2 let
 *  the model write 1.9999999999999999 (the double 2), which the host then refused (500). Such fractions keep to
 *  15 significant digits now; every value the grammar takes is inside the bounds as a double. */
void test_fractions_stay_off_exclusive_bounds() {
    llama_model *model = vocab_model();
    if (!model) return;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    struct Case {
        json bounds;
        std::vector<const char *> in, out;
    };
    const std::vector<Case> cases = {
        {{{"exclusiveMaximum", 2}}, {"1.99999999999999", "1.5", "0.9999999999999999", "-3.25"}, {"1.9999999999999999", "1.999999999999999"}},
        {{{"exclusiveMaximum", 100}}, {"99.9999999999999", "98.9999999999999999"}, {"99.9999999999999999", "99.99999999999999"}},
        {{{"exclusiveMinimum", -100}}, {"-99.9999999999999", "-98.9999999999999999"}, {"-99.9999999999999999", "-99.99999999999999"}},
        {{{"exclusiveMaximum", 4503599627370497LL}}, {"4503599627370496", "4503599627370495.5"}, {"4503599627370496.9", "4503599627370496.5"}},
        {{{"exclusiveMinimum", 1}, {"maximum", 5}}, {"1.00000000000001", "5", "4.9999999999999999"}, {"1.0000000000000001", "1", "5.5"}},
        {{{"exclusiveMinimum", -3}, {"exclusiveMaximum", -1}}, {"-2", "-1.00000000000001", "-2.99999999999999"}, {"-1.0000000000000001", "-2.9999999999999999", "-1", "-3"}},
    };
    for (const auto &c : cases) {
        json number = {{"type", "number"}};
        for (auto &[k, v] : c.bounds.items()) number[k] = v;
        std::string grammar = output_schema_grammar(object_of({{"x", number}}).dump());
        for (const char *v : c.in) {
            CHECK(grammar_accepts(vocab, grammar, std::string(R"({"x": )") + v + "}"), "%s: %s refused",
                  c.bounds.dump().c_str(), v);
            double d = std::strtod(v, nullptr);  // what the host reads
            bool inside = (!number.contains("exclusiveMaximum") || d < number["exclusiveMaximum"].get<double>()) &&
                          (!number.contains("exclusiveMinimum") || d > number["exclusiveMinimum"].get<double>()) &&
                          (!number.contains("maximum") || d <= number["maximum"].get<double>());
            CHECK(inside, "%s: %s (the double %.17g) is not inside", c.bounds.dump().c_str(), v, d);
        }
        for (const char *v : c.out)
            CHECK(!grammar_accepts(vocab, grammar, std::string(R"({"x": )") + v + "}"), "%s: %s allowed",
                  c.bounds.dump().c_str(), v);
    }
    llama_model_free(model);
}

/** (Session 9 #5.) The rewrite that puts a bounded number's range into the grammar went only into properties,
 *  items, anyOf and definitions: a bounded number under oneOf, allOf, prefixItems, tuple items or
 *  additionalProperties, behind a $ref to anywhere else, or in a `type` array with another type than null, was left
 *  to llama.cpp, which writes it as any number (or the other types were lost). Each is in the grammar now, and the
 *  budget charges each. */
void test_number_bounds_wherever_llama_cpp_builds_them() {
    llama_model *model = vocab_model();
    if (!model) return;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    const json n = {{"type", "number"}, {"minimum", 0}, {"maximum", 10}};
    struct Shape {
        const char *label;
        json x;  // the schema of property x
        std::vector<const char *> in, out;
        json root_extra = json::object();
    };
    const std::vector<Shape> shapes = {
        {"oneOf", {{"oneOf", {n, {{"type", "string"}}}}}, {"5.5", "\"s\""}, {"11", "-1"}},
        {"anyOf and oneOf (oneOf read)", {{"oneOf", {n}}, {"anyOf", {{{"type", "string"}}}}}, {"10"}, {"10.5", "\"s\""}},
        {"allOf", {{"type", "object"}, {"allOf", {object_of({{"v", n}})}}}, {"{\"v\": 3}"}, {"{\"v\": 30}"}},
        {"prefixItems", {{"type", "array"}, {"prefixItems", {n, n}}}, {"[1, 2.5]"}, {"[1, 12]", "[-3, 1]"}},
        {"tuple items", {{"type", "array"}, {"items", {n}}}, {"[3]"}, {"[-1]"}},
        {"additionalProperties", {{"type", "object"}, {"additionalProperties", n}}, {"{\"k\": 3}"}, {"{\"k\": 30}"}},
        {"type array with a string", {{"type", {"number", "string"}}, {"minimum", 0}, {"maximum", 10}},
         {"3", "\"abc\""}, {"11", "null"}},
        {"$ref elsewhere", {{"$ref", "#/x-numbers/1"}}, {"7"}, {"70"},
         {{"x-numbers", {{{"type", "string"}}, n}}}},
    };
    for (const auto &shape : shapes) {
        json schema = object_of({{"x", shape.x}});
        for (auto &[k, v] : shape.root_extra.items()) schema[k] = v;
        std::string grammar;
        try {
            grammar = output_schema_grammar(schema.dump());
        } catch (const std::exception &e) {
            CHECK(false, "%s: %s", shape.label, e.what());
            continue;
        }
        for (const char *v : shape.in)
            CHECK(grammar_accepts(vocab, grammar, std::string(R"({"x": )") + v + "}"), "%s: %s refused", shape.label, v);
        for (const char *v : shape.out)
            CHECK(!grammar_accepts(vocab, grammar, std::string(R"({"x": )") + v + "}"), "%s: %s allowed", shape.label,
                  v);
    }
    llama_model_free(model);
    // The budget charges each (100 ranges of ±2^53 are over it wherever they are).
    const json wide = {{"type", "number"}, {"minimum", -9007199254740989LL}, {"maximum", 9007199254740989LL}};
    json hundred = json::array();
    for (int i = 0; i < 100; i++) hundred.push_back(wide);
    const std::vector<std::pair<const char *, json>> budgets = {
        {"oneOf", {{"oneOf", hundred}}},
        {"allOf", {{"type", "object"}, {"allOf", {{{"type", "object"}, {"properties", {{"a", {{"anyOf", hundred}}}}}}}}}},
        {"prefixItems", {{"type", "array"}, {"prefixItems", hundred}}},
        {"tuple items", {{"type", "array"}, {"items", hundred}}},
        {"additionalProperties", {{"type", "object"}, {"additionalProperties", {{"oneOf", hundred}}}}},
    };
    for (const auto &[label, x] : budgets) {
        std::string m = refusal(structured_request(object_of({{"x", x}})));
        CHECK(m.find("output_format.schema.properties.x") != std::string::npos && m.find("50000") != std::string::npos,
              "100 ranges of ±2^53 under %s: \"%s\"", label, m.c_str());
    }
}

/** The budget's walk summed negative counts as they were (a tool's minLength of -9e18 cancelled every other
 *  bound; two overflowed int64), counted minLength on an integer (llama.cpp ignores it), and missed oneOf, allOf,
 *  additionalProperties, prefixItems, tuple items, $ref targets and `type` arrays, which llama.cpp expands. */
void test_repetition_budget_walks_what_llama_cpp_builds() {
    json strings = json::object();
    for (int i = 0; i < 26; i++) strings["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 2000}};
    json negative = {{"name", "n"},
                     {"parameters", object_of({{"a", {{"type", "string"}, {"minLength", -9000000000000000000LL}}}})}};
    std::string m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}),
                                               json::array({negative, {{"name", "s"}, {"parameters", object_of(strings)}}})));
    CHECK(m.find("50000") != std::string::npos, "negative counts cancelled the budget: \"%s\"", m.c_str());
    // llama.cpp reads minLength of strings only.
    json fits = json::object();
    for (int i = 0; i < 25; i++) fits["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 2000}};
    fits["z"] = {{"type", "integer"}, {"minLength", 2000}};
    m = refusal(structured_request(object_of(fits)));
    CHECK(m.empty(), "minLength of an integer counted: %s", m.c_str());
    // Every place llama.cpp builds a schema from counts.
    const json big = {{"type", "string"}, {"maxLength", 2000}};
    json s26 = json::array();
    for (int i = 0; i < 26; i++) s26.push_back(big);
    const std::vector<std::pair<const char *, json>> shapes = {
        {"oneOf", {{"oneOf", s26}}},
        {"allOf", {{"type", "string"}, {"allOf", s26}}},
        {"prefixItems", {{"type", "array"}, {"prefixItems", s26}}},
        {"tuple items", {{"type", "array"}, {"items", s26}}},
        {"additionalProperties", {{"type", "object"}, {"additionalProperties", {{"anyOf", s26}}}}},
        {"type array", {{"type", json::array({"string", "string", "string", "string", "string", "string", "string",
                                             "string", "string", "string", "string", "string", "string", "string",
                                             "string", "string", "string", "string", "string", "string", "string",
                                             "string", "string", "string", "string", "string"})},
                        {"maxLength", 2000}}},
        {"$ref", {{"type", "object"},
                  {"properties", {{"a", {{"$ref", "#/properties/b"}}}, {"b", {{"oneOf", s26}}}}}}},
    };
    for (const auto &[label, parameters] : shapes) {
        json tool = {{"name", "t"}, {"parameters", parameters}};
        m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}), json::array({tool})));
        CHECK(m.find("tools[0].parameters") != std::string::npos && m.find("50000") != std::string::npos,
              "26 x 2000 under %s: \"%s\"", label, m.c_str());
    }
    // Nested type arrays double at each level in llama.cpp: refused without walking 2^30 copies.
    json nested = {{"type", "string"}};
    for (int i = 0; i < 30; i++) nested = {{"type", {"object", "object"}}, {"properties", {{"x", nested}}}};
    json tool = {{"name", "t"}, {"parameters", nested}};
    m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}), json::array({tool})));
    CHECK(m.find("expand to more than") != std::string::npos, "2^30 copies: \"%s\"", m.c_str());
}

/** The expansion cap ("the request's schemas expand to more than 200000 schema nodes") counted per schema: each
 *  tool's parameters started at zero, so N tools of 2^15 type-array copies each (~131,000 nodes, under the cap alone)
 *  reached llama.cpp's tool grammar builder as N x 131,000 nodes. (Review s8: written, not yet run.) */
void test_expansion_cap_is_per_request() {
    json nested = {{"type", "string"}};
    for (int i = 0; i < 15; i++) nested = {{"type", {"object", "object"}}, {"properties", {{"x", nested}}}};
    json one = json::array({{{"name", "t0"}, {"parameters", nested}}});
    std::string m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}), one));
    CHECK(m.empty(), "one tool of 2^15 copies is under the cap: \"%s\"", m.c_str());
    json two = json::array({{{"name", "t0"}, {"parameters", nested}}, {{"name", "t1"}, {"parameters", nested}}});
    m = refusal(structured_request(object_of({{"ok", {{"type", "boolean"}}}}), two));
    CHECK(m.find("expand to more than") != std::string::npos, "two tools of 2^15 copies each: \"%s\"", m.c_str());
}

void test_parse_with_memory_exhausted() {
    // A valid request, an invalid (truncated) one whose partial tree the parser discards, and the create config.
    std::string valid = request("Hi.", 2, true);
    std::string truncated = valid.substr(0, valid.size() - 2);
    std::string config = json{{"config_version", 1}, {"backend", "local"}, {"instance", "local#1"},
                              {"settings", {{"Model", g_model}, {"ContextTokens", "512"}}}}
                             .dump();
    exhaust_memory_from_every_allocation("parse_request", [&] { parse_request(span(valid)); });
    exhaust_memory_from_every_allocation("parse_request (invalid)", [&] { parse_request(span(truncated)); });
    exhaust_memory_from_every_allocation("parse_config", [&] { parse_config(span(config)); });
}

std::atomic<long> g_final_parse_n{0};

void test_out_of_memory_in_the_final_tool_parse(Engine &engine) {
    // The Nth allocation of the final (strict) parse of a complete call fails, llama.cpp's own included: that is
    // running out of memory (ERROR internal), never a call "cut by a stop string" (ERROR tool_failed) nor a
    // complete call left open.
    g_before_final_tool_parse.store(+[] {
        t_window = true;
        g_window.store(true);
        g_countdown.store(g_final_parse_n.load());
    });
    for (long n : {1, 2, 3}) {
        g_final_parse_n.store(n);
        g_injected.store(0);
        Request r = parse_request(span(request("What's the weather in Paris?", 96, true)));
        Prepared p = engine.prepare(r, true);
        Collector c;
        auto job = std::make_shared<Job>(20 + (uint64_t)n, c.sink, std::move(p), &engine);
        CHECK(job->start(), "start");
        engine.submit(job);
        CHECK(c.wait(120), "no terminal event");
        job->join();
        g_countdown.store(0);
        g_window.store(false);
        const Ev *t = c.terminal();
        CHECK(t != nullptr, "no terminal");
        if (!t) continue;
        std::fprintf(stderr, "  N=%ld: %ld injected; terminal %d/%d %s\n", n, g_injected.load(), t->type, t->code,
                     t->text.c_str());
        CHECK(g_injected.load() == 1, "N=%ld: the final parse did not run (%ld failures injected)", n,
              g_injected.load());
        CHECK(t->type == AFM_EVENT_ERROR && t->code == AFM_ERR_INTERNAL, "N=%ld: terminal %d/%d %s", n, t->type,
              t->code, t->text.c_str());
    }
    g_before_final_tool_parse.store(nullptr);
}

/** USAGE events that arrived before the first output (text or call) and before the terminal event. */
int progress_events(Collector &c) {
    std::lock_guard<std::mutex> lock(c.mutex);
    int n = 0;
    for (const auto &e : c.events) {
        if (e.type == AFM_EVENT_USAGE) n++;
        else break;
    }
    return n;
}

void test_progress_while_queued_and_reading(const afm_backend_vtable *vt) {
    // Progress every step (1 ms interval) makes the count independent of the machine's speed.
    setenv("AFM_LOCAL_PROGRESS_MS", "1", 1);
    afm_instance *instance = create(vt, 4096, 1);
    unsetenv("AFM_LOCAL_PROGRESS_MS");
    CHECK(instance, "create");
    if (!instance) return;
    // A ~2,000-token prompt is read in 512-token steps: the host hears from it after each.
    std::string long_prompt;
    for (int i = 0; i < 200; i++) long_prompt += "lorem ipsum dolor sit amet ";
    Collector reading;
    CHECK(generate(vt, instance, 1, request(long_prompt, 1), reading) == AFM_OK, "generate");
    CHECK(reading.wait(600), "no terminal event");
    int n = progress_events(reading);
    std::fprintf(stderr, "  %d progress events while reading the prompt\n", n);
    CHECK(n >= 2, "%d USAGE events before the output of a ~2,000-token prompt", n);
    // One slot: the second request waits while the first writes 48 tokens, and is heard from meanwhile.
    Collector first, second;
    CHECK(generate(vt, instance, 2, request("Write a very long essay about the oceans.", 48), first) == AFM_OK, "gen 1");
    CHECK(generate(vt, instance, 3, request("Say hi.", 2), second) == AFM_OK, "gen 2");
    CHECK(second.wait(600) && first.wait(600), "no terminal event");
    n = progress_events(second);
    std::fprintf(stderr, "  %d progress events while queued\n", n);
    CHECK(n >= 10, "%d USAGE events while queued behind 48 tokens", n);
    vt->destroy(instance);
}

/** Runs `body` under fault injection at N = 1 … `dense`, the last `dense` allocations of a clean run, and
 *  strided points in between (`max_runs` in all), and checks the ABI's promises each time. */
void sweep(const char *what, const afm_backend_vtable *vt, afm_instance *instance, const std::string &body,
           bool count_generate_thread, long dense, long max_runs) {
    static uint64_t next_id = 1000;
    // A clean run, counting allocations.
    long total;
    {
        Collector c;
        g_counted.store(0);
        g_counting.store(true);
        afm_status rc;
        {
            std::optional<Exempt> exempt;
            if (!count_generate_thread) exempt.emplace();
            rc = generate(vt, instance, next_id++, body, c);
        }
        bool ended = c.wait(120);
        g_counting.store(false);
        total = g_counted.load();
        CHECK(rc == AFM_OK && ended, "%s: clean run failed", what);
        if (rc != AFM_OK) return;
    }
    // Every N at both ends (the first allocations, and the last ones: registering, queueing, finishing), strided
    // in between.
    std::vector<long> points;
    for (long n = 1; n <= std::min(dense, total); n++) points.push_back(n);
    long tail_from = std::max(dense + 1, total + 5 - dense);
    long middle = std::max<long>(0, max_runs - 2 * dense);
    if (middle > 0 && tail_from > dense + 1) {
        long stride = std::max<long>(1, (tail_from - dense) / middle);
        for (long n = dense + 1; n < tail_from; n += stride) points.push_back(n);
    }
    for (long n = tail_from; n <= total + 5; n++) points.push_back(n);
    long runs = 0, accepted = 0, refused = 0, errors = 0, done = 0;
    for (long n : points) {
        runs++;
        Collector c;
        afm_error error{};
        error.struct_size = sizeof error;
        g_countdown.store(n);
        afm_status rc;
        {
            std::optional<Exempt> exempt;
            if (!count_generate_thread) exempt.emplace();
            rc = generate(vt, instance, next_id++, body, c, &error);
        }
        if (rc == AFM_OK) {
            accepted++;
            bool ended = c.wait(60);
            g_countdown.store(0);
            CHECK(ended, "%s: N=%ld: accepted, but no terminal event in 60 s", what, n);
            if (!ended) return;
            const Ev *t = c.terminal();
            if (t->type == AFM_EVENT_ERROR) errors++;
            else done++;
            if (t->type == AFM_EVENT_DONE && t->code != AFM_FINISH_LENGTH) check_closed_calls_parse(c, what);
        } else {
            g_countdown.store(0);
            refused++;
            Exempt exempt;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            std::lock_guard<std::mutex> lock(c.mutex);
            CHECK(c.events.empty(), "%s: N=%ld: refused (%d %s) but %zu events were sent", what, n, rc,
                  error.message, c.events.size());
        }
        std::lock_guard<std::mutex> lock(c.mutex);
        CHECK(c.terminals <= 1 && c.after_terminal == 0 && !c.overlapped, "%s: N=%ld: %d terminals, %d after",
              what, n, c.terminals, c.after_terminal);
    }
    g_countdown.store(0);
    std::fprintf(stderr, "  %s: %ld allocations in a clean run; %ld runs: %ld refused, %ld DONE, %ld ERROR\n", what,
                 total, runs, refused, done, errors);
    // The instance still serves.
    Collector c;
    afm_status rc = generate(vt, instance, next_id++, request("Say hello.", 8), c);
    CHECK(rc == AFM_OK && c.wait(120), "%s: the instance does not serve after the sweep", what);
    const Ev *t = c.terminal();
    CHECK(t && t->type == AFM_EVENT_DONE, "%s: after the sweep: %s", what, t ? t->text.c_str() : "no terminal");
}

// ---------------------------------------------------------------------------------------------------------------
// The prompt cache (prompt_cache.cpp): RAM and disk tiers, on the real model
// ---------------------------------------------------------------------------------------------------------------

/** A conversation of some 250 tokens about `topic`, ending in a user turn. */
json conversation(const std::string &topic, int turns = 4) {
    json input = json::array();
    for (int t = 0; t < turns; t++) {
        input.push_back({{"type", "message"}, {"role", "user"},
                         {"content", "Tell me something about " + topic + ", part " + std::to_string(t) +
                                         ", in two short sentences please."}});
        input.push_back({{"type", "message"}, {"role", "assistant"},
                         {"content", "Here is part " + std::to_string(t) + " about " + topic +
                                         ": it is well known and often discussed. Many people find it interesting."}});
    }
    input.push_back({{"type", "message"}, {"role", "user"}, {"content", "Summarise " + topic + " in one line."}});
    return input;
}

std::string conversation_request(const json &input, int max_output = 12) {
    return json{{"request_version", 1}, {"model", model_id()}, {"system", json::array()}, {"input", input},
                {"max_output_tokens", max_output}, {"temperature", 0}}
        .dump();
}

struct Answer {
    bool ok = false;
    std::string text;
    int64_t input = -1, cached = -1;
};

Answer ask(const afm_backend_vtable *vt, afm_instance *instance, uint64_t id, const std::string &body) {
    Collector c;
    Answer a;
    if (generate(vt, instance, id, body, c) != AFM_OK) return a;
    if (!c.wait(300)) return a;
    const Ev *t = c.terminal();
    a.ok = t && t->type == AFM_EVENT_DONE;
    a.text = c.text();
    for (const auto &e : c.events)
        if (e.type == AFM_EVENT_USAGE) {
            a.input = e.input_tokens;
            a.cached = e.cached_tokens;
        }
    return a;
}

/** The prompt_cache object of the instance's describe document. */
json cache_stats(const afm_backend_vtable *vt, afm_instance *instance) {
    std::string text;
    afm_writer writer{sizeof(afm_writer), 0, &text, [](void *ctx, afm_str b) {
                          Exempt exempt;
                          static_cast<std::string *>(ctx)->append(b.data, b.size);
                      }};
    afm_error error{};
    error.struct_size = sizeof error;
    if (vt->describe(instance, &writer, &error) != AFM_OK) return json();
    json doc = json::parse(text, nullptr, false);
    return doc.is_object() && doc.contains("prompt_cache") ? doc["prompt_cache"] : json();
}

uint64_t stat_u64(const json &stats, const char *key) {
    return stats.is_object() && stats.contains(key) && stats[key].is_number_unsigned() ? stats[key].get<uint64_t>() : 0;
}

std::string make_temp_dir() {
    char templ[] = "/tmp/afm-prompt-cache-XXXXXX";
    const char *dir = mkdtemp(templ);
    return dir ? dir : "";
}

/** The entry files (*.kv) under `dir`, one level of subdirectories down (`<fingerprint>-<layout>/`). */
std::vector<std::string> cache_files(const std::string &dir) {
    std::vector<std::string> out;
    if (DIR *d = opendir(dir.c_str())) {
        while (struct dirent *e = readdir(d)) {
            std::string sub = e->d_name;
            if (sub == "." || sub == "..") continue;
            if (DIR *s = opendir((dir + "/" + sub).c_str())) {
                while (struct dirent *f = readdir(s)) {
                    std::string name = f->d_name;
                    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".kv") == 0) out.push_back(dir + "/" + sub + "/" + name);
                }
                closedir(s);
            }
        }
        closedir(d);
    }
    return out;
}

long rss_kib() {
    long pages = 0, resident = 0;
    if (FILE *f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// Every llama_decode of the decode thread (g_after_decode): its result, how long it took, and when it returned.
struct DecodeRecord {
    int rc;
    int64_t us;
    std::chrono::steady_clock::time_point end;
};
std::mutex g_decode_mutex;
std::condition_variable g_decode_cv;
std::vector<DecodeRecord> g_decodes;

void record_decode(int rc, int64_t us) {
    Exempt exempt;
    {
        std::lock_guard<std::mutex> lock(g_decode_mutex);
        g_decodes.push_back({rc, us, std::chrono::steady_clock::now()});
    }
    g_decode_cv.notify_all();
}

/** Waits until a decode that returned after `after` is recorded; returns it (rc -1000 on a timeout). */
DecodeRecord decode_after(std::chrono::steady_clock::time_point after, int seconds) {
    Exempt exempt;
    std::unique_lock<std::mutex> lock(g_decode_mutex);
    DecodeRecord found{-1000, 0, after};
    g_decode_cv.wait_for(lock, std::chrono::seconds(seconds), [&] {
        for (const auto &d : g_decodes)
            if (d.end > after) {
                found = d;
                return true;
            }
        return false;
    });
    return found;
}

std::string long_text(const std::string &topic, int sentences) {
    std::string text = "Here are my notes about " + topic + ". Read them all, then answer the question at the end.\n";
    for (int i = 0; i < sentences; i++)
        text += "Note " + std::to_string(i) + ": the " + topic + " of region " + std::to_string(i * 7 % 101) +
                " are " + (i % 3 ? "long and old" : "short and young") + ".\n";
    return text + "Which region has the oldest " + topic + "?";
}

void test_cancel_interrupts_a_prompt_batch(const afm_backend_vtable *vt) {
    // A cancel while the decode thread computes a 512-token batch of a long prompt: the batch is aborted (llama.cpp's
    // abort callback) rather than computed to its end for nobody, so the cores are free soon after the cancel, not up
    // to a batch later. The same conversation then answers exactly as on an instance where nothing was cancelled (the
    // aborted batch's KV cells left with it; what the first batch decoded is kept and reused). The figures compare
    // with this run's own uncancelled batch and prompt: no absolute bound.
    const std::string body = request(long_text("mountains", 100), 8);
    using clock = std::chrono::steady_clock;
    auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    g_after_decode.store(record_decode, std::memory_order_release);
    {
        Exempt exempt;
        std::lock_guard<std::mutex> lock(g_decode_mutex);
        g_decodes.clear();
    }

    afm_instance *instance = create(vt, 4096, 1);
    CHECK(instance, "create");
    if (!instance) return;
    Collector cancelled;
    auto t_submit = clock::now();
    CHECK(generate(vt, instance, 1, body, cancelled) == AFM_OK, "generate");
    DecodeRecord batch1 = decode_after(t_submit, 600);  // the prompt's first 512 tokens
    const double batch_ms = batch1.us / 1000.0;
    CHECK(batch1.rc == 0 && batch_ms > 0, "first batch: %d", batch1.rc);
    // A tenth of a batch into the second one.
    std::this_thread::sleep_for(std::chrono::microseconds(batch1.us / 10));
    auto t_cancel = clock::now();
    vt->cancel(instance, 1);
    CHECK(cancelled.wait(60), "no terminal event after the cancel");
    const double ack_ms = ms(clock::now() - t_cancel);
    {
        const Ev *t = cancelled.terminal();
        CHECK(t && t->type == AFM_EVENT_DONE && t->code == AFM_FINISH_CANCELLED, "not DONE/cancelled");
    }
    DecodeRecord freed = decode_after(t_cancel, 600);
    const double freed_ms = ms(freed.end - t_cancel);
    CHECK(freed.rc != -1000, "the decode thread never returned");
    CHECK(freed_ms < batch_ms / 2, "the batch ran on %.1f ms after the cancel (a batch takes %.0f ms)", freed_ms,
          batch_ms);

    // The same conversation again: it reuses what the first batch decoded.
    Answer after = ask(vt, instance, 2, body);
    CHECK(after.ok && after.cached >= 512, "after the cancel: ok %d, %lld cached tokens", after.ok,
          (long long)after.cached);
    vt->destroy(instance);
    g_after_decode.store(nullptr, std::memory_order_release);

    // The reference: the same request, never cancelled, on a fresh instance (its batches split the prompt at the
    // same places).
    instance = create(vt, 4096, 1);
    CHECK(instance, "create");
    if (!instance) return;
    auto t0 = clock::now();
    Answer reference = ask(vt, instance, 1, body);
    const double full_ms = ms(clock::now() - t0);
    vt->destroy(instance);
    CHECK(reference.ok && reference.input > 1500, "reference: ok %d, %lld tokens", reference.ok,
          (long long)reference.input);
    std::fprintf(stderr,
                 "  %lld-token prompt: uncancelled %.0f ms (8 output tokens), first 512-token batch %.0f ms; cancelled "
                 "%.0f ms into the second batch: terminal event after %.1f ms, decode thread free after %.1f ms "
                 "(llama_decode returned %d)\n",
                 (long long)reference.input, full_ms, batch_ms, batch_ms / 10, ack_ms, freed_ms, freed.rc);
    CHECK(!after.text.empty() && after.text == reference.text, "answers differ: \"%s\" vs \"%s\"", after.text.c_str(),
          reference.text.c_str());
}

void test_prompt_cache_restores_an_evicted_conversation(const afm_backend_vtable *vt) {
    // Two slots: five other conversations take them over; the first comes back from the RAM tier, with the same
    // greedy answer as an instance without a prompt cache gives after the same five.
    const char *others[] = {"volcanoes", "the moon", "bread baking", "chess openings", "tides"};
    std::string first = conversation_request(conversation("rivers"));
    Answer with_cache, without_cache;
    for (int cached = 1; cached >= 0; cached--) {
        afm_instance *instance = create(vt, 2048, 2, {{"PromptCacheMiB", cached ? "256" : "0"}});
        CHECK(instance != nullptr, "create");
        if (!instance) return;
        uint64_t id = 100;
        Answer a = ask(vt, instance, id++, first);
        CHECK(a.ok && a.input > 200, "first turn: ok %d, %lld input tokens", a.ok, (long long)a.input);
        for (const char *topic : others) {
            Answer o = ask(vt, instance, id++, conversation_request(conversation(topic)));
            CHECK(o.ok, "conversation about %s", topic);
        }
        Answer again = ask(vt, instance, id++, first);
        CHECK(again.ok, "the conversation again");
        json stats = cache_stats(vt, instance);
        if (cached) {
            with_cache = again;
            CHECK(again.cached >= again.input - 1 && again.cached > 0, "cached_tokens %lld of %lld: not restored",
                  (long long)again.cached, (long long)again.input);
            CHECK(stat_u64(stats, "hits") >= 1, "hits: %s", stats.dump().c_str());
            CHECK(stat_u64(stats, "ram_entries") >= 1 && stat_u64(stats, "ram_bytes") > 0, "%s", stats.dump().c_str());
            CHECK(stat_u64(stats, "ram_bytes") <= (uint64_t)256 << 20, "%s", stats.dump().c_str());
            CHECK(stat_u64(stats, "misses") >= 5, "the five others missed: %s", stats.dump().c_str());
        } else {
            without_cache = again;
            // Only the system prompt the conversations share stays in a slot.
            CHECK(again.cached < 64, "without a prompt cache, %lld cached tokens", (long long)again.cached);
            CHECK(stat_u64(stats, "ram_limit_bytes") == 0 && !stats.contains("hits"), "%s", stats.dump().c_str());
        }
        vt->destroy(instance);
    }
    CHECK(!with_cache.text.empty() && with_cache.text == without_cache.text, "answers differ: \"%s\" vs \"%s\"",
          with_cache.text.c_str(), without_cache.text.c_str());
}

void test_prompt_cache_disk_tier(const afm_backend_vtable *vt) {
    // An instance writes its conversation to the disk tier; the next instance (a restart, a reload) restores it;
    // a damaged or truncated entry is deleted, never loaded, and the answer is the same.
    std::string dir = make_temp_dir();
    CHECK(!dir.empty(), "mkdtemp");
    json settings = {{"PromptCacheDir", dir}, {"PromptCacheDiskMiB", "512"}};
    std::string body = conversation_request(conversation("glaciers"));

    afm_instance *one = create(vt, 2048, 1, settings);
    CHECK(one != nullptr, "create");
    if (!one) return;
    Answer first = ask(vt, one, 1, body);
    CHECK(first.ok && first.cached == 0, "first: ok %d cached %lld", first.ok, (long long)first.cached);
    vt->destroy(one);  // finishes the background write
    auto files = cache_files(dir);
    CHECK(files.size() == 1, "%zu entry files after the first instance", files.size());
    if (files.size() != 1) return;

    afm_instance *two = create(vt, 2048, 1, settings);
    CHECK(two != nullptr, "create");
    if (!two) return;
    Answer restored = ask(vt, two, 2, body);
    json stats = cache_stats(vt, two);
    CHECK(restored.ok && restored.cached >= restored.input - 1, "restart: cached %lld of %lld",
          (long long)restored.cached, (long long)restored.input);
    CHECK(restored.text == first.text, "\"%s\" vs \"%s\"", restored.text.c_str(), first.text.c_str());
    CHECK(stat_u64(stats, "disk_hits") == 1 && stat_u64(stats, "disk_entries") >= 1, "%s", stats.dump().c_str());
    vt->destroy(two);

    // Damage the state of the entry (one byte near the end) and leave a truncated copy under another name.
    files = cache_files(dir);
    CHECK(files.size() == 1, "%zu entry files after the second instance", files.size());
    if (files.size() != 1) return;
    std::string truncated = files[0].substr(0, files[0].size() - 3) + "1.kv";
    {
        FILE *f = std::fopen(files[0].c_str(), "r+b");
        CHECK(f != nullptr, "open %s", files[0].c_str());
        if (!f) return;
        std::fseek(f, -100, SEEK_END);
        int byte = std::fgetc(f);
        std::fseek(f, -100, SEEK_END);
        std::fputc(byte ^ 0x5a, f);
        std::fclose(f);
        struct stat st;
        stat(files[0].c_str(), &st);
        std::string copy = "cp '" + files[0] + "' '" + truncated + "' && truncate -s " + std::to_string(st.st_size / 2) +
                           " '" + truncated + "'";
        CHECK(std::system(copy.c_str()) == 0, "%s", copy.c_str());
    }
    afm_instance *three = create(vt, 2048, 1, settings);
    CHECK(three != nullptr, "create");
    if (!three) return;
    struct stat st;
    CHECK(stat(truncated.c_str(), &st) != 0, "the truncated entry was not deleted at start-up");
    Answer recomputed = ask(vt, three, 3, body);
    stats = cache_stats(vt, three);
    CHECK(recomputed.ok && recomputed.cached == 0, "a damaged entry was loaded: cached %lld", (long long)recomputed.cached);
    CHECK(recomputed.text == first.text, "\"%s\" vs \"%s\"", recomputed.text.c_str(), first.text.c_str());
    CHECK(stat_u64(stats, "discarded") == 2 && stat_u64(stats, "disk_hits") == 0, "%s", stats.dump().c_str());
    vt->destroy(three);
    std::string rm = "rm -rf '" + dir + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_memory_bound(const afm_backend_vtable *vt) {
    // 50 conversations through 2 slots and a 12 MiB RAM tier (~4 of them): the cache stays within its bound, evicts
    // the least recently used, and the process does not grow beyond the bound.
    const uint64_t limit = (uint64_t)12 << 20;
    afm_instance *instance = create(vt, 2048, 2, {{"PromptCacheMiB", "12"}});
    CHECK(instance != nullptr, "create");
    if (!instance) return;
    long baseline = 0;
    uint64_t most = 0;
    for (int i = 0; i < 50; i++) {
        Answer a = ask(vt, instance, 500 + (uint64_t)i, conversation_request(conversation("topic number " + std::to_string(i), 2), 2));
        CHECK(a.ok, "conversation %d", i);
        json stats = cache_stats(vt, instance);
        most = std::max(most, stat_u64(stats, "ram_bytes"));
        CHECK(stat_u64(stats, "ram_bytes") <= limit, "conversation %d: %s", i, stats.dump().c_str());
        if (i == 9) baseline = rss_kib();  // the slots' KV pages and the allocator's arenas are warm by now
    }
    json stats = cache_stats(vt, instance);
    long grown = rss_kib() - baseline;
    CHECK(stat_u64(stats, "evictions") >= 30 && stat_u64(stats, "ram_entries") >= 2, "%s", stats.dump().c_str());
    CHECK(grown <= (long)(limit >> 10) + 32 * 1024, "RSS grew by %ld KiB over 40 conversations", grown);
    std::fprintf(stderr, "  memory bound: cache at most %.1f MiB of %.0f MiB; RSS +%.1f MiB over conversations 10-50; %s\n",
                 most / 1048576.0, limit / 1048576.0, grown / 1024.0, stats.dump().c_str());
    vt->destroy(instance);
}

// The PromptCache object alone (no model): fake states of known sizes, files crafted as damage or an attacker
// would leave them, two instances sharing a directory.

std::vector<llama_token> fake_tokens(int seed, size_t n) {
    std::vector<llama_token> t(n);
    for (size_t i = 0; i < n; i++) t[i] = (llama_token)(seed * 1000 + (int)i);
    return t;
}

std::shared_ptr<std::vector<uint8_t>> fake_state(size_t bytes, int seed) {
    auto state = std::make_shared<std::vector<uint8_t>>(bytes);
    for (size_t i = 0; i < bytes; i++) (*state)[i] = (uint8_t)(i * 31 + (size_t)seed);
    return state;
}

/** The files of `dir` (one directory, not recursive) whose names end in `suffix`, with their sizes. */
std::vector<std::pair<std::string, uint64_t>> files_in(const std::string &dir, const char *suffix) {
    std::vector<std::pair<std::string, uint64_t>> out;
    const size_t n = std::strlen(suffix);
    if (DIR *d = opendir(dir.c_str())) {
        while (struct dirent *e = readdir(d)) {
            std::string name = e->d_name;
            struct stat st;
            if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0 && stat((dir + "/" + name).c_str(), &st) == 0)
                out.emplace_back(dir + "/" + name, (uint64_t)st.st_size);
        }
        closedir(d);
    }
    return out;
}

uint64_t total_bytes(const std::vector<std::pair<std::string, uint64_t>> &files) {
    uint64_t sum = 0;
    for (const auto &f : files) sum += f.second;
    return sum;
}

/** Writes an entry file with `header` (its hash recomputed) and `tokens`, then sets its length to `file_size`
 *  (sparse: a file that claims hundreds of GiB takes no disk). */
bool craft_entry(const std::string &path, PromptCacheFileHeader header, const std::vector<llama_token> &tokens,
                 uint64_t file_size) {
    header.tokens_hash = hash64(tokens.data(), tokens.size() * sizeof(llama_token), 0x544b);
    header.header_hash = prompt_cache_header_hash(header);
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return false;
    bool ok = write(fd, &header, sizeof header) == (ssize_t)sizeof header &&
              write(fd, tokens.data(), tokens.size() * sizeof(llama_token)) == (ssize_t)(tokens.size() * sizeof(llama_token)) &&
              ftruncate(fd, (off_t)file_size) == 0;
    return close(fd) == 0 && ok;
}

std::vector<llama_token> extended(std::vector<llama_token> tokens, int more) {
    for (int i = 0; i < more; i++) tokens.push_back(7);
    return tokens;
}

void test_prompt_cache_rejects_crafted_entries() {
    // Length fields that would make a reader allocate hundreds of MiB or GiB, in files of exactly the size they
    // claim (sparse) and with valid checksums: each is deleted at start-up or when found, never read into memory,
    // and no single allocation exceeds 32 MiB meanwhile. A genuine entry beside them still restores.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const uint64_t disk_limit = (uint64_t)1 << 41;  // PromptCacheDiskMiB=2097152: the bound is not what saves us
    const auto genuine = fake_tokens(1, 100);
    std::string dir;
    {
        PromptCache writer(0, root, disk_limit, 0xfeed, "n1", "test", 4096);
        writer.save(genuine, fake_state(64 << 10, 1), false);
        writer.flush();
        dir = writer.directory();
    }
    auto files = files_in(dir, ".kv");
    CHECK(files.size() == 1, "%zu entries written", files.size());
    if (files.size() != 1) return;
    PromptCacheFileHeader h{};
    {
        FILE *f = std::fopen(files[0].first.c_str(), "rb");
        CHECK(f && std::fread(&h, sizeof h, 1, f) == 1, "read the header");
        if (f) std::fclose(f);
    }
    struct Crafted {
        const char *what;
        uint64_t n_tokens, state_bytes;
        std::vector<llama_token> tokens;
    };
    std::vector<Crafted> crafted = {
        {"a 512 GiB state", 40, (uint64_t)1 << 39, fake_tokens(2, 40)},
        {"16 Mi tokens", (uint64_t)1 << 24, 4096, fake_tokens(3, 40)},
        {"a 200 MiB state for 40 tokens", 40, (uint64_t)200 << 20, fake_tokens(4, 40)},
    };
    for (size_t i = 0; i < crafted.size(); i++) {
        PromptCacheFileHeader c = h;
        c.n_tokens = crafted[i].n_tokens;
        c.state_bytes = crafted[i].state_bytes;
        uint64_t size = sizeof c + c.n_tokens * sizeof(llama_token) + c.state_bytes;
        std::string path = dir + "/crafted" + std::to_string(i) + ".kv";
        CHECK(craft_entry(path, c, crafted[i].tokens, size), "craft %s", crafted[i].what);
    }
    g_over_cap = 0;
    g_allocation_cap = (size_t)32 << 20;
    try {
        PromptCache reader(0, root, disk_limit, 0xfeed, "n1", "test", 4096);
        reader.set_state_size(1000, 1000);  // what the warm-up decode measures (SmolLM2's is ~23 KiB per token)
        for (const auto &c : crafted) {
            PromptCache::Match match = reader.find(extended(c.tokens, 5));
            std::shared_ptr<const std::vector<uint8_t>> state;
            CHECK(match.length == 0 || !reader.take(match, state), "%s was loaded", c.what);
        }
        PromptCache::Match match = reader.find(extended(genuine, 5));
        std::shared_ptr<const std::vector<uint8_t>> state;
        CHECK(match.length == genuine.size() && reader.take(match, state) && state && state->size() == 64 << 10,
              "the genuine entry beside them does not restore (match %zu)", match.length);
        PromptCacheStats st = reader.stats();
        CHECK(st.discarded == crafted.size() && st.disk_entries == 1, "discarded %llu, %llu entries",
              (unsigned long long)st.discarded, (unsigned long long)st.disk_entries);
    } catch (const std::exception &e) {
        CHECK(false, "reading crafted entries threw: %s", e.what());
    }
    g_allocation_cap = 0;
    CHECK(g_over_cap == 0, "%ld allocations above 32 MiB while reading crafted entries", g_over_cap.load());
    files = files_in(dir, ".kv");
    CHECK(files.size() == 1, "%zu entry files left (the crafted ones must be deleted)", files.size());
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_disk_bound_across_instances() {
    // Two instances of one model share a directory (a generation draining after a reload and its successor; two
    // daemons): writing at once, the files on disk stay within PromptCacheDiskMiB, every file verifies, no
    // temporary file is left, and one that a dead writer left behind is removed. The RAM tier keeps its bound too.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const size_t limit = 1 << 20, state = 150 << 10;
    std::string dir;
    {
        PromptCache a(0, root, limit, 0xbeef, "n1", "a", 4096), b(0, root, limit, 0xbeef, "n1", "b", 4096);
        CHECK(a.directory() == b.directory() && !a.directory().empty(), "%s vs %s", a.directory().c_str(),
              b.directory().c_str());
        dir = a.directory();
        auto writes = [&](PromptCache &cache, int seed) {
            Exempt exempt;
            for (int i = 0; i < 10; i++) cache.save(fake_tokens(seed + i, 64), fake_state(state, seed + i), false);
            cache.save(fake_tokens(999, 64), fake_state(state, 999), false);  // both write this one
        };
        std::thread ta(writes, std::ref(a), 100), tb(writes, std::ref(b), 200);
        ta.join();
        tb.join();
        a.flush();
        b.flush();
        auto on_disk = files_in(dir, ".kv");
        CHECK(total_bytes(on_disk) <= limit, "%zu files, %llu bytes on disk: over the %zu-byte bound", on_disk.size(),
              (unsigned long long)total_bytes(on_disk), limit);
        CHECK(a.stats().disk_bytes <= limit && b.stats().disk_bytes <= limit, "the indexes exceed the bound");
        CHECK(files_in(dir, ".tmp").empty(), "temporary files left behind");
        CHECK(on_disk.size() >= 4, "only %zu entries kept", on_disk.size());
    }
    // What a writer killed mid-write leaves: its process (pid 999999999, beyond pid_max) is gone, and it is older
    // than any write takes (its age is what tells: review s7 #5).
    std::string stale = dir + "/0123456789abcdef-000064.kv.999999999.0x1.tmp";
    {
        FILE *f = std::fopen(stale.c_str(), "wb");
        CHECK(f != nullptr, "create %s", stale.c_str());
        if (f) {
            std::vector<char> junk(100 << 10, 'x');
            std::fwrite(junk.data(), 1, junk.size(), f);
            std::fclose(f);
        }
        struct timespec old[2];
        clock_gettime(CLOCK_REALTIME, &old[0]);
        old[0].tv_sec -= 3600;
        old[1] = old[0];
        CHECK(utimensat(AT_FDCWD, stale.c_str(), old, 0) == 0, "utimensat");
    }
    {
        PromptCache c(0, root, limit, 0xbeef, "n1", "c", 4096);
        PromptCacheStats st = c.stats();
        auto on_disk = files_in(dir, ".kv");
        CHECK(st.discarded == 0 && st.disk_entries == on_disk.size() && st.disk_bytes == total_bytes(on_disk),
              "a third instance: %llu discarded, %llu entries (%zu files), %llu bytes", (unsigned long long)st.discarded,
              (unsigned long long)st.disk_entries, on_disk.size(), (unsigned long long)st.disk_bytes);
        struct stat sb;
        CHECK(stat(stale.c_str(), &sb) != 0, "the dead writer's temporary file was not removed");
    }
    {
        PromptCache ram(limit, "", 0, 0, "n1", "ram", 4096);
        for (int i = 0; i < 20; i++) {
            ram.save(fake_tokens(300 + i, 64), fake_state(state, i), true);
            CHECK(ram.stats().ram_bytes <= limit, "RAM tier at %llu bytes after %d states",
                  (unsigned long long)ram.stats().ram_bytes, i + 1);
        }
        PromptCacheStats st = ram.stats();
        CHECK(st.ram_entries == limit / state && st.evictions == 20 - limit / state, "%llu entries, %llu evictions",
              (unsigned long long)st.ram_entries, (unsigned long long)st.evictions);
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_fingerprint_sees_a_replaced_model() {
    // An update of the same size whose changes lie outside the sampled regions (1 MiB + 64 KiB + 1 is between the
    // first MiB and the first 64 KiB sample of a 4 MiB file), installed as packages do (write, then rename over):
    // another model, another fingerprint.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    std::string path = root + "/model.gguf", next = root + "/model.gguf.new";
    std::vector<char> bytes(4 << 20, 'a');
    auto write = [&](const std::string &to) {
        FILE *f = std::fopen(to.c_str(), "wb");
        CHECK(f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size(), "write %s", to.c_str());
        if (f) std::fclose(f);
    };
    write(path);
    uint64_t before = model_fingerprint(path);
    bytes[(1 << 20) + (64 << 10) + 1] = 'b';
    write(next);
    CHECK(std::rename(next.c_str(), path.c_str()) == 0, "rename");
    uint64_t after = model_fingerprint(path);
    CHECK(before != 0 && after != 0 && before != after, "fingerprints %llx and %llx", (unsigned long long)before,
          (unsigned long long)after);
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_never_reads_another_models_entries() {
    // Another model (another fingerprint) or another layout has its own directory; a file copied from one into the
    // other does not verify (its header names the other model) and is deleted.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const auto tokens = fake_tokens(5, 64);
    std::string first;
    {
        PromptCache smol(0, root, 8 << 20, 0x1111, "n1", "smol", 4096);
        smol.save(tokens, fake_state(32 << 10, 5), false);
        smol.flush();
        first = smol.directory();
    }
    auto files = files_in(first, ".kv");
    CHECK(files.size() == 1, "%zu entries", files.size());
    if (files.size() != 1) return;
    std::string other;
    {
        PromptCache gemma(0, root, 8 << 20, 0x2222, "n1", "gemma", 4096);
        PromptCache layout(0, root, 8 << 20, 0x1111, "n4", "layout", 4096);
        other = gemma.directory();
        CHECK(other != first && layout.directory() != first && layout.directory() != other, "%s %s %s", first.c_str(),
              other.c_str(), layout.directory().c_str());
        CHECK(gemma.find(extended(tokens, 3)).length == 0 && layout.find(extended(tokens, 3)).length == 0,
              "another model or layout found the entry");
    }
    std::string copy = "cp '" + files[0].first + "' '" + other + "/'";
    CHECK(std::system(copy.c_str()) == 0, "%s", copy.c_str());
    {
        PromptCache gemma(0, root, 8 << 20, 0x2222, "n1", "gemma", 4096);
        CHECK(gemma.find(extended(tokens, 3)).length == 0, "another model's entry was found");
        CHECK(gemma.stats().discarded == 1 && files_in(other, ".kv").empty(), "the copied entry was kept");
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

/** Lowers the descriptor limit so that only `spare` more descriptors open (the next open fails with EMFILE, as a busy
 *  daemon's would); restores it when it goes. */
struct FdLimit {
    struct rlimit saved {};
    explicit FdLimit(int spare) {
        getrlimit(RLIMIT_NOFILE, &saved);
        int lowest = dup(0);  // open() returns the lowest free descriptor: the limit is counted from it
        if (lowest >= 0) close(lowest);
        struct rlimit lower = saved;
        lower.rlim_cur = (rlim_t)(lowest + spare);
        setrlimit(RLIMIT_NOFILE, &lower);
    }
    ~FdLimit() { setrlimit(RLIMIT_NOFILE, &saved); }
};

void test_prompt_cache_keeps_entries_through_transient_errors() {
    // Only damage deletes an entry (review F2, F11). A file that cannot be opened now (out of descriptors, as with
    // EMFILE or ENFILE) or a state that cannot be allocated now is a miss, and the entry restores once that passes.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const auto tokens = fake_tokens(6, 80);
    const size_t bytes = 200 << 10;
    std::string dir;
    {
        PromptCache writer(0, root, 8 << 20, 0xabcd, "n1", "writer", 4096);
        writer.save(tokens, fake_state(bytes, 6), false);
        writer.flush();
        dir = writer.directory();
    }
    CHECK(files_in(dir, ".kv").size() == 1, "%zu entries written", files_in(dir, ".kv").size());
    try {
        std::unique_ptr<PromptCache> reader;
        {
            FdLimit limit(2);  // the directory opens at start-up (held, and once more to list it), the entry does not
            reader = std::make_unique<PromptCache>(0, root, 8 << 20, 0xabcd, "n1", "reader", 4096);
        }
        CHECK(files_in(dir, ".kv").size() == 1 && reader->stats().discarded == 0,
              "an entry that could not be opened at start-up was deleted");
        PromptCache::Match match = reader->find(extended(tokens, 4));
        CHECK(match.length == tokens.size(), "the entry is not found once descriptors are back (match %zu)",
              match.length);
        std::shared_ptr<const std::vector<uint8_t>> state;
        bool taken = true;
        {
            FdLimit limit(0);  // nor when it is taken
            taken = match.length > 0 && reader->take(match, state);
        }
        CHECK(!taken && files_in(dir, ".kv").size() == 1 && reader->stats().discarded == 0,
              "an entry that could not be opened when taken was deleted (taken %d)", taken);
        g_allocation_cap = (size_t)64 << 10;  // its state cannot be allocated now
        try {
            taken = match.length > 0 && reader->take(match, state);
            CHECK(!taken, "taken with its state unallocatable");
        } catch (...) {
            CHECK(false, "take() threw when the state could not be allocated (a miss, not a failed request)");
        }
        g_allocation_cap = 0;
        const auto prompt = extended(tokens, 4);
        g_countdown = 1;  // the next allocation fails: inside find()
        try {
            PromptCache::Match none = reader->find(prompt);
            (void)none;
        } catch (...) {
            CHECK(false, "find() threw when out of memory (a miss, not a failed request)");
        }
        g_countdown = 0;
        CHECK(files_in(dir, ".kv").size() == 1 && reader->stats().discarded == 0, "the entry was deleted");
        taken = match.length > 0 && reader->take(match, state);
        CHECK(taken && state && state->size() == bytes, "the entry does not restore once the errors passed");
    } catch (const std::exception &e) {
        g_allocation_cap = 0;
        g_countdown = 0;
        CHECK(false, "threw: %s", e.what());
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_keeps_entries_beyond_its_bounds() {
    // An entry longer than this instance's context (written by an instance with a larger ContextTokens) is valid: it
    // is not offered here, it stays on disk (counted in the bound), and an instance that can hold it restores it
    // (review F3: it was deleted as damaged).
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const auto tokens = fake_tokens(7, 300);
    std::string dir;
    {
        PromptCache big(0, root, 8 << 20, 0x3333, "n1", "big", 4096);
        big.save(tokens, fake_state(100 << 10, 7), false);
        big.flush();
        dir = big.directory();
    }
    {
        PromptCache small(0, root, 8 << 20, 0x3333, "n1", "small", 256);
        std::vector<llama_token> prompt(tokens.begin(), tokens.begin() + 200);
        PromptCache::Match match = small.find(prompt);
        CHECK(match.length == 0, "an entry of %zu tokens offered to an instance of 256", tokens.size());
        PromptCacheStats st = small.stats();
        CHECK(st.discarded == 0 && files_in(dir, ".kv").size() == 1, "deleted: %llu discarded, %zu files",
              (unsigned long long)st.discarded, files_in(dir, ".kv").size());
    }
    {
        PromptCache again(0, root, 8 << 20, 0x3333, "n1", "again", 4096);
        PromptCache::Match match = again.find(extended(tokens, 3));
        std::shared_ptr<const std::vector<uint8_t>> state;
        CHECK(match.length == tokens.size() && again.take(match, state) && state && state->size() == 100 << 10,
              "the entry does not restore in an instance that holds it (match %zu)", match.length);
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_counts_a_state_once() {
    // A state kept in RAM and queued for disk is one block of memory: counted once, so a state over half the RAM
    // bound stays in RAM (review F4: it evicted itself) and the RAM figure is the memory the cache holds.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const size_t bytes = 600 << 10;
    const auto tokens = fake_tokens(8, 64);
    {
        PromptCache cache((size_t)1 << 20, root, 8 << 20, 0x4444, "n1", "once", 4096);
        cache.save(tokens, fake_state(bytes, 8), true);
        PromptCacheStats st = cache.stats();
        CHECK(st.ram_entries == 1 && st.ram_bytes == bytes, "after saving: %llu entries, %llu bytes",
              (unsigned long long)st.ram_entries, (unsigned long long)st.ram_bytes);
        cache.flush();
        st = cache.stats();
        CHECK(st.ram_entries == 1 && st.ram_bytes == bytes && st.disk_entries == 1,
              "after writing: %llu entries, %llu bytes, %llu on disk", (unsigned long long)st.ram_entries,
              (unsigned long long)st.ram_bytes, (unsigned long long)st.disk_entries);
        PromptCache::Match match = cache.find(extended(tokens, 2));
        CHECK(match.ram && match.length == tokens.size(), "not found in RAM (ram %d, length %zu)", match.ram,
              match.length);
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_writer_yields_to_decoding() {
    // The disk writer hashes and copies a whole state per answer while the next one decodes: it must run only on
    // idle CPU (SCHED_IDLE), or it stalls llama.cpp's threads at their per-step barrier (bench-interleaved: 16
    // conversations' second-turn TTFT ratio 0.124-0.133 with the disk tier, 0.105 without).
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    {
        PromptCache cache((size_t)1 << 20, root, 8 << 20, 0x4545, "n1", "idle", 4096);
        CHECK(cache.disk_enabled(), "the disk tier is off in %s", root.c_str());
        cache.save(fake_tokens(9, 64), fake_state(4096, 9), false);
        cache.flush();
        CHECK(cache.writes_at_idle_priority() == 1, "the prompt cache's disk writer wrote %llu of 1 states at "
              "SCHED_IDLE", (unsigned long long)cache.writes_at_idle_priority());
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_destroy_is_not_held_up_by_an_idle_writer() {
    // Review s8: the destructor writes what is queued (a restart finds it) and joins the writer; at SCHED_IDLE,
    // with every core busy (another instance decoding during a reload), the writer got ~0.3 % of a core and an
    // unload waited minutes. Destroying now lifts the writer to the normal priority. The bound is a deadline (the
    // unload must not hang): measured at load ~15, 0.71 s with the fix, 18.9 s without.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    std::atomic<bool> spin{true};
    std::vector<std::thread> spinners;
    for (unsigned i = 0; i < std::max(2u, std::thread::hardware_concurrency()); i++)
        spinners.emplace_back([&] {
            while (spin.load(std::memory_order_relaxed)) {
            }
        });
    double seconds = 0;
    {
        auto cache = std::make_unique<PromptCache>((size_t)512 << 20, root, (size_t)1 << 30, 0x4646, "n1", "stop", 4096);
        for (int i = 0; i < 4; i++) cache->save(fake_tokens(20 + i, 64), fake_state((size_t)48 << 20, 20 + i), false);
        auto t0 = std::chrono::steady_clock::now();
        cache.reset();
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    spin.store(false);
    for (auto &t : spinners) t.join();
    std::fprintf(stderr, "  destroyed with 4 x 48 MB queued and every core busy in %.2f s\n", seconds);
    CHECK(seconds < 8, "destroying the cache took %.1f s: the idle writer held it up", seconds);
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_refused_restore_keeps_the_entry() {
    // llama.cpp may refuse a state for want of free cells (one KV stream shared by every sequence): the entry is not
    // damaged, so it stays (review F5: a RAM entry taken whole was lost, a disk entry deleted).
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const auto in_ram = fake_tokens(12, 64), on_disk = fake_tokens(13, 64);
    {
        PromptCache cache((size_t)4 << 20, root, 8 << 20, 0x8888, "n1", "refused", 4096);
        cache.save(in_ram, fake_state(50 << 10, 12), true);
        cache.save(on_disk, fake_state(50 << 10, 13), false);
        cache.flush();
        PromptCache::Match match = cache.find(extended(in_ram, 2));
        PromptCache::State state;
        CHECK(match.ram && cache.take(match, state) && state, "the RAM entry is not taken");
        CHECK(cache.stats().ram_entries == 0, "taken whole, it left the RAM tier");
        cache.restore_refused(match, state);
        PromptCache::Match again = cache.find(extended(in_ram, 2));
        PromptCache::State back;
        CHECK(again.ram && again.length == in_ram.size() && cache.take(again, back) && back == state,
              "the refused RAM entry is gone (ram %d, length %zu)", again.ram, again.length);
        PromptCache::Match file = cache.find(extended(on_disk, 2));
        CHECK(!file.ram && file.length == on_disk.size() && cache.take(file, state) && state, "the disk entry");
        cache.restore_refused(file, state);
        PromptCacheStats st = cache.stats();
        CHECK(cache.find(extended(on_disk, 2)).length == on_disk.size() && st.discarded == 0 && st.disk_entries == 2,
              "the refused disk entry is gone (%llu discarded)", (unsigned long long)st.discarded);
    }
    // What the engine asks before restoring: a worthwhile share of the entry, not a shared opening.
    CHECK(PromptCache::worth_restoring(700, 700, 30) && PromptCache::worth_restoring(600, 700, 0),
          "a conversation coming back is worth restoring");
    CHECK(!PromptCache::worth_restoring(46, 700, 30) && !PromptCache::worth_restoring(100, 700, 0) &&
              !PromptCache::worth_restoring(40, 40, 30),
          "a short shared prefix of a long entry, or a small gain, is not");
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_take_rechecks_tokens() {
    // The file a match names is read again when it is taken: if it holds other tokens by then (replaced under the
    // same name), its state is not restored for this prompt (review F10).
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const auto first = fake_tokens(9, 50), second = fake_tokens(10, 50);
    {
        PromptCache cache(0, root, 8 << 20, 0x5555, "n1", "recheck", 4096);
        cache.save(first, fake_state(40 << 10, 9), false);
        cache.save(second, fake_state(40 << 10, 10), false);
        cache.flush();
        auto files = files_in(cache.directory(), ".kv");
        CHECK(files.size() == 2, "%zu entries", files.size());
        if (files.size() != 2) return;
        PromptCache::Match match = cache.find(extended(first, 2));
        CHECK(match.length == first.size(), "match %zu", match.length);
        // Which file holds which tokens: their token counts are equal, the first token tells them apart.
        auto first_token = [](const std::string &path) {
            PromptCacheFileHeader h{};
            llama_token t = -1;
            FILE *f = std::fopen(path.c_str(), "rb");
            if (f && (std::fread(&h, sizeof h, 1, f) != 1 || std::fread(&t, sizeof t, 1, f) != 1)) t = -1;
            if (f) std::fclose(f);
            return t;
        };
        std::string of_first = first_token(files[0].first) == first[0] ? files[0].first : files[1].first;
        std::string of_second = of_first == files[0].first ? files[1].first : files[0].first;
        CHECK(std::rename(of_second.c_str(), of_first.c_str()) == 0, "rename");
        std::shared_ptr<const std::vector<uint8_t>> state;
        bool taken = match.length > 0 && cache.take(match, state);
        CHECK(!taken || (state && !state->empty() && (*state)[0] == 9),
              "another conversation's state was restored for this prompt");
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_refuses_unsafe_files_and_directories() {
    // A FIFO named like an entry must not block the reader (review F9: open() waited for a writer, on the decode
    // thread); a directory other users may write to is refused (they could plant or swap entries).
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    std::string dir;
    {
        PromptCache first(0, root, 8 << 20, 0x6666, "n1", "first", 4096);
        dir = first.directory();
    }
    std::string fifo = dir + "/0123456789abcdef-000010.kv";
    CHECK(mkfifo(fifo.c_str(), 0600) == 0, "mkfifo %s", fifo.c_str());
    auto opened = std::async(std::launch::async, [&] {
        Exempt exempt;
        PromptCache second(0, root, 8 << 20, 0x6666, "n1", "second", 4096);
        return second.stats().disk_entries;
    });
    bool in_time = opened.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    CHECK(in_time, "opening a cache directory with a FIFO in it blocked");
    if (!in_time) {  // unblock it: a writer opens and closes the FIFO
        int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) close(fd);
    }
    uint64_t entries = opened.get();
    CHECK(entries == 0, "a FIFO counted as %llu entries", (unsigned long long)entries);
    CHECK(chmod(dir.c_str(), 0770) == 0, "chmod");
    {
        PromptCache shared(0, root, 8 << 20, 0x6666, "n1", "shared", 4096);
        CHECK(shared.directory().empty(), "a group-writable directory was used: %s", shared.directory().c_str());
    }
    CHECK(chmod(dir.c_str(), 0700) == 0 && chmod(root.c_str(), 0777) == 0, "chmod");
    {
        PromptCache open_root(0, root, 8 << 20, 0x6666, "n1", "open", 4096);
        CHECK(open_root.directory().empty(), "a directory under a world-writable one was used: %s",
              open_root.directory().c_str());
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_survives_a_removed_directory() {
    // Deleting the cache directory while the daemon runs (afmd.8 says it is safe) recreates it at the next write
    // (review F13: the disk tier wrote nothing until a reload); a temporary file left by a writer that is long gone
    // is removed even when its process ID is in use again (review F8).
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const auto tokens = fake_tokens(11, 64);
    {
        PromptCache cache(0, root, 8 << 20, 0x7777, "n1", "removed", 4096);
        std::string rm = "rm -rf '" + cache.directory() + "'";
        CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
        cache.save(tokens, fake_state(30 << 10, 11), false);
        cache.flush();
        PromptCacheStats st = cache.stats();
        CHECK(files_in(cache.directory(), ".kv").size() == 1 && st.dropped_writes == 0 && st.disk_entries == 1,
              "after the directory was removed: %zu files, %llu dropped writes", files_in(cache.directory(), ".kv").size(),
              (unsigned long long)st.dropped_writes);
        // Our own process ID, two hours old: a PID reused by a live process, not a write in progress.
        char name[128];
        std::snprintf(name, sizeof name, "/0123456789abcdef-000064.kv.%d.0x1.tmp", (int)getpid());
        std::string stale = cache.directory() + name;
        FILE *f = std::fopen(stale.c_str(), "wb");
        CHECK(f != nullptr, "create %s", stale.c_str());
        if (f) std::fclose(f);
        struct timespec old[2];
        clock_gettime(CLOCK_REALTIME, &old[0]);
        old[0].tv_sec -= 7200;
        old[1] = old[0];
        CHECK(utimensat(AT_FDCWD, stale.c_str(), old, 0) == 0, "utimensat");
        PromptCache other(0, root, 8 << 20, 0x7777, "n1", "other", 4096);
        struct stat sb;
        CHECK(stat(stale.c_str(), &sb) != 0, "a two-hour-old temporary file of a live PID was kept");
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

/** Copies the one entry a cache of (fingerprint, layout) writes for `tokens` with a state of `fill` bytes into
 *  `into`, owned by `uid`: an entry that verifies there, as another user able to compute the names would plant it. */
bool plant_entry(const std::string &into, uint64_t fingerprint, const std::string &layout,
                 const std::vector<llama_token> &tokens, uint8_t fill, uid_t uid) {
    std::string scratch = make_temp_dir();
    if (scratch.empty()) return false;
    bool ok = false;
    {
        PromptCache writer(0, scratch, 8 << 20, fingerprint, layout, "planter", 4096);
        writer.save(tokens, std::make_shared<std::vector<uint8_t>>(4096, fill), false);
        writer.flush();
        auto files = files_in(writer.directory(), ".kv");
        if (files.size() == 1) {
            std::string name = files[0].first.substr(files[0].first.rfind('/'));
            std::string copy = "cp '" + files[0].first + "' '" + into + name + "'";
            ok = std::system(copy.c_str()) == 0 && (uid == geteuid() || chown((into + name).c_str(), uid, uid) == 0);
        }
    }
    std::string rm = "rm -rf '" + scratch + "'";
    return std::system(rm.c_str()) == 0 && ok;
}

void test_prompt_cache_writes_a_state_once() {
    // (Review s7 #2.) A state queued for disk and not written yet is on its way: needs() says so and save() does not
    // queue it again (the engine copied it out of llama.cpp and queued it twice).
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    {
        PromptCache cache(0, root, 256 << 20, 0x9999, "n1", "once", 4096);
        cache.save(fake_tokens(14, 64), fake_state(32 << 20, 14), false);  // keeps the writer busy a while
        const auto tokens = fake_tokens(15, 64);
        cache.save(tokens, fake_state(8 << 10, 15), false);
        CHECK(!cache.needs(tokens, false) && !cache.needs(std::vector<llama_token>(tokens.begin(), tokens.begin() + 40), false),
              "a state queued for disk is needed again");
        cache.save(tokens, fake_state(8 << 10, 15), false);
        cache.flush();
        PromptCacheStats st = cache.stats();
        CHECK(st.disk_writes == 2 && st.disk_entries == 2, "%llu writes for 2 states", (unsigned long long)st.disk_writes);
        CHECK(cache.needs(fake_tokens(16, 64), false), "a state not saved is not needed");
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_keeps_prefixes_of_a_state_it_cannot_keep() {
    // (Review s7 #3.) A state that extends RAM entries but does not fit (larger than the bound) leaves them be: they
    // were erased first, and then neither was kept.
    PromptCache cache(1 << 20, "", 0, 0, "n1", "prefixes", 4096);
    const auto prefix = fake_tokens(17, 40);
    cache.save(prefix, fake_state(100 << 10, 17), true);
    cache.save(extended(prefix, 30), fake_state(2 << 20, 18), true);
    PromptCache::Match match = cache.find(extended(prefix, 40));
    CHECK(match.ram && match.length == prefix.size(), "the prefix entry is gone (match %zu)", match.length);
    cache.save(extended(prefix, 30), fake_state(200 << 10, 19), true);  // one that fits replaces it
    match = cache.find(extended(prefix, 40));
    PromptCacheStats st = cache.stats();
    CHECK(match.ram && match.length == prefix.size() + 30 && st.ram_entries == 1 && st.ram_bytes == 200 << 10,
          "match %zu, %llu entries, %llu bytes", match.length, (unsigned long long)st.ram_entries,
          (unsigned long long)st.ram_bytes);
}

void test_prompt_cache_long_layouts_do_not_share_a_directory() {
    // (Review s7 #4.) Two llama.cpp builds whose keys differ only after 64 characters have their own directories.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    {
        const std::string base = "n1-llama" + std::string(80, 'a');
        PromptCache x(0, root, 8 << 20, 0xaaaa, base + "x", "x", 4096), y(0, root, 8 << 20, 0xaaaa, base + "y", "y", 4096);
        CHECK(!x.directory().empty() && !y.directory().empty() && x.directory() != y.directory(), "%s and %s",
              x.directory().c_str(), y.directory().c_str());
        const std::string huge(600, 'z');  // longer than a file name may be: still a directory of its own
        PromptCache z(0, root, 8 << 20, 0xaaaa, huge, "z", 4096);
        CHECK(!z.directory().empty() && z.directory() != x.directory(), "a 600-character layout: %s", z.directory().c_str());
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_keeps_recent_temporary_files_of_other_hosts() {
    // (Review s7 #5.) A temporary file whose process ID is not running here may be a write in progress in another
    // container sharing the volume: only its age says it is abandoned.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    std::string dir;
    {
        PromptCache first(0, root, 8 << 20, 0xbbbb, "n1", "first", 4096);
        dir = first.directory();
    }
    std::string temp = dir + "/0123456789abcdef-000064.kv.999999999.0x1.tmp";
    FILE *f = std::fopen(temp.c_str(), "wb");
    CHECK(f != nullptr, "create %s", temp.c_str());
    if (f) std::fclose(f);
    {
        PromptCache second(0, root, 8 << 20, 0xbbbb, "n1", "second", 4096);
        struct stat sb;
        CHECK(stat(temp.c_str(), &sb) == 0, "a fresh temporary file of a process not running here was removed");
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_does_not_rescan_for_foreign_files() {
    // (Review s7 #6.) A socket named like an entry (open() fails with ENXIO) is a foreign file: left alone, and the
    // directory is not read again at every find() because of it (the decode thread did that).
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const auto tokens = fake_tokens(20, 64);
    {
        PromptCache cache(0, root, 8 << 20, 0xcccc, "n1", "socket", 4096);
        std::string dir = cache.directory();
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un addr {};
        addr.sun_family = AF_UNIX;
        std::string path = dir + "/0123456789abcdef-000010.kv";
        std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
        CHECK(s >= 0 && bind(s, (struct sockaddr *)&addr, sizeof addr) == 0, "bind %s", path.c_str());
        CHECK(cache.find(extended(tokens, 3)).length == 0, "nothing to find yet");  // indexes the directory
        // An entry appears without the directory's mtime changing: only a rescan would see it.
        struct stat before;
        CHECK(stat(dir.c_str(), &before) == 0 && plant_entry(dir, 0xcccc, "n1", tokens, 0x11, geteuid()), "plant");
        struct timespec times[2] = {before.st_atim, before.st_mtim};
        CHECK(utimensat(AT_FDCWD, dir.c_str(), times, 0) == 0, "utimensat");
        CHECK(cache.find(extended(tokens, 3)).length == 0, "the directory was read again though it did not change");
        if (s >= 0) close(s);
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_refuses_untrusted_parents() {
    // (Review s7 #1.) Every directory from / down to PromptCacheDir must be owned by root or the daemon's user and
    // writable by no one else unless sticky: whoever may rename things in one of them may swap the cache for their
    // own. Only the cache's own directory was judged, and its parent only for its mode. (The tests run as root: uid
    // 4242 is "another user".)
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const std::string cache = root + "/cache";
    auto disk_tier = [&](const std::string &dir) {
        PromptCache c(0, dir, 8 << 20, 0xdddd, "n1", "parents", 4096);
        return c.directory();
    };
    CHECK(chmod(root.c_str(), 0777) == 0, "chmod");
    CHECK(disk_tier(cache).empty(), "a cache inside a world-writable, non-sticky directory was used");
    CHECK(chmod(root.c_str(), 01777) == 0, "chmod");
    CHECK(!disk_tier(cache).empty(), "a cache inside a sticky directory (as /tmp) was refused");
    CHECK(chmod(root.c_str(), 0755) == 0 && chown(root.c_str(), 4242, 4242) == 0, "chown");
    CHECK(disk_tier(cache).empty(), "a cache inside a directory of another user was used");
    CHECK(chown(root.c_str(), 0, 0) == 0 && chown(cache.c_str(), 4242, 4242) == 0, "chown");
    CHECK(disk_tier(cache).empty(), "a PromptCacheDir of another user was used");
    CHECK(chown(cache.c_str(), 0, 0) == 0, "chown");
    // A symbolic link is followed when root or we own it (systemd's CacheDirectory= with DynamicUser= is one), and
    // its target is judged like the rest; ".." is the physical parent.
    CHECK(symlink("cache", (root + "/link").c_str()) == 0, "symlink");
    std::string through = disk_tier(root + "/link/../link");
    CHECK(!through.empty(), "a cache reached through our own symbolic link was refused");
    CHECK(lchown((root + "/link").c_str(), 4242, 4242) == 0 && chmod(root.c_str(), 01777) == 0, "lchown");
    CHECK(disk_tier(root + "/link").empty(), "a symbolic link of another user in a sticky directory was followed");
    CHECK(chmod(cache.c_str(), 0777) == 0 && symlink(cache.c_str(), (root + "/mine").c_str()) == 0, "chmod");
    CHECK(disk_tier(root + "/mine").empty(), "a world-writable directory reached through a link was used");
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_ignores_entries_of_other_users() {
    // (Review s7 #1.) An entry is a regular file the daemon's user owns: one another user owns (root reads it
    // regardless of its mode) or a link to one is foreign: never restored, left alone, not counted.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    const auto tokens = fake_tokens(21, 64), linked = fake_tokens(22, 64);
    {
        PromptCache cache(0, root, 8 << 20, 0xeeee, "n1", "owners", 4096);
        std::string dir = cache.directory();
        CHECK(plant_entry(dir, 0xeeee, "n1", tokens, 0x22, 4242), "plant");
        std::string elsewhere = make_temp_dir();
        CHECK(plant_entry(elsewhere, 0xeeee, "n1", linked, 0x33, geteuid()), "plant");
        auto files = files_in(elsewhere, ".kv");
        CHECK(files.size() == 1, "%zu planted", files.size());
        if (files.size() == 1) {
            std::string name = files[0].first.substr(files[0].first.rfind('/'));
            CHECK(symlink(files[0].first.c_str(), (dir + name).c_str()) == 0, "symlink");
        }
        PromptCache::Match match = cache.find(extended(tokens, 3));
        CHECK(match.length == 0, "an entry owned by another user was offered (%zu tokens)", match.length);
        match = cache.find(extended(linked, 3));
        CHECK(match.length == 0, "a link to an entry was followed (%zu tokens)", match.length);
        PromptCache again(0, root, 8 << 20, 0xeeee, "n1", "again", 4096);
        PromptCacheStats st = again.stats();
        CHECK(again.find(extended(tokens, 3)).length == 0 && st.disk_entries == 0 && st.discarded == 0 &&
                  files_in(dir, ".kv").size() == 2,
              "at start-up: %llu entries, %llu discarded", (unsigned long long)st.disk_entries,
              (unsigned long long)st.discarded);
        std::string rm = "rm -rf '" + elsewhere + "'";
        CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_keeps_to_the_directory_it_judged() {
    // (Review s7 #1.) The directory is judged once and held open: another put at its path afterwards is never read
    // or written (every operation went by path), and one made again after a removal (review F13) is judged again
    // (it was made through whatever link stood there).
    std::string root = make_temp_dir(), other = make_temp_dir();
    CHECK(!root.empty() && !other.empty(), "mkdtemp");
    const auto planted = fake_tokens(23, 64), mine = fake_tokens(24, 64), later = fake_tokens(25, 64);
    {
        PromptCache cache(0, root, 8 << 20, 0xf0f0, "n1", "swap", 4096);
        std::string dir = cache.directory();
        CHECK(cache.find(extended(planted, 3)).length == 0, "nothing yet");
        CHECK(rename(dir.c_str(), (dir + ".old").c_str()) == 0 && mkdir(dir.c_str(), 0700) == 0, "swap");
        CHECK(plant_entry(dir, 0xf0f0, "n1", planted, 0x44, geteuid()), "plant");
        CHECK(cache.find(extended(planted, 3)).length == 0, "an entry of a directory swapped in was offered");
        cache.save(mine, fake_state(16 << 10, 24), false);
        cache.flush();
        CHECK(files_in(dir, ".kv").size() == 1 && files_in(dir + ".old", ".kv").size() == 1,
              "written into the directory swapped in (%zu there, %zu in ours)", files_in(dir, ".kv").size(),
              files_in(dir + ".old", ".kv").size());
        // Removed, and a link to another's directory put in its place: the next write judges what it would make.
        std::string rm = "rm -rf '" + dir + ".old' '" + dir + "'";
        CHECK(std::system(rm.c_str()) == 0 && chmod(other.c_str(), 0777) == 0 && symlink(other.c_str(), dir.c_str()) == 0,
              "replace");
        cache.save(later, fake_state(16 << 10, 25), false);
        cache.flush();
        PromptCacheStats st = cache.stats();
        CHECK(files_in(other, ".kv").empty() && st.dropped_writes == 1, "written through a link (%zu files, %llu dropped)",
              files_in(other, ".kv").size(), (unsigned long long)st.dropped_writes);
    }
    std::string rm = "rm -rf '" + root + "' '" + other + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_evicts_what_frees_memory() {
    // (Review s7, leftover.) Evicting a RAM entry whose state a queued write holds too frees nothing until the write is
    // done: it went first anyway (least recently used), and the next entry after it, to make room for one new state.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    {
        const size_t mib = 1 << 20;
        PromptCache cache(100 * mib, root, 512 * mib, 0xf1f1, "n1", "evict", 4096);
        const auto on_disk = fake_tokens(26, 80), queued = fake_tokens(27, 64), busy = fake_tokens(28, 64),
                   newest = fake_tokens(29, 64);
        const std::vector<llama_token> in_ram(on_disk.begin(), on_disk.begin() + 60);  // on disk already: RAM only
        // Every state is made first: what follows takes microseconds, the busy write far longer.
        auto busy_state = fake_state(60 * mib, 28), queued_state = fake_state(10 * mib, 27),
             in_ram_state = fake_state(10 * mib, 26), newest_state = fake_state(25 * mib, 29);
        cache.save(on_disk, fake_state(64 << 10, 26), false);
        cache.flush();
        cache.save(busy, busy_state, false);         // keeps the writer busy
        cache.save(queued, queued_state, true);      // in RAM, and queued behind it
        cache.save(in_ram, in_ram_state, true);      // in RAM only (its extension is on disk)
        cache.save(newest, newest_state, true);      // 105 MiB held: one 10 MiB entry must go
        const uint64_t written = cache.stats().disk_writes;
        CHECK(written == 1, "the premise failed: the busy write finished first (%llu writes)", (unsigned long long)written);
        PromptCache::Match match = cache.find(extended(queued, 2));
        CHECK(match.ram && match.length == queued.size(), "the queued entry was evicted, freeing nothing (match %zu)",
              match.length);
        PromptCacheStats st = cache.stats();
        CHECK(st.evictions == 1 && st.ram_entries == 2 && st.ram_bytes <= 100 * mib,
              "%llu evictions, %llu entries, %llu bytes", (unsigned long long)st.evictions,
              (unsigned long long)st.ram_entries, (unsigned long long)st.ram_bytes);
        cache.flush();
    }
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

// A scan held in the middle of its listing (g_during_cache_scan): armed (1), held (2), let go (3).
std::mutex g_scan_mutex;
std::condition_variable g_scan_cv;
int g_scan_phase = 0;

void hold_the_scan(const char *) {
    Exempt exempt;
    std::unique_lock<std::mutex> lock(g_scan_mutex);
    if (g_scan_phase != 1) return;  // only the first scan after arming is held
    g_scan_phase = 2;
    g_scan_cv.notify_all();
    g_scan_cv.wait(lock, [] { return g_scan_phase == 3; });
}

void test_prompt_cache_scans_without_the_lock() {
    // (Session 9 #2.) After each write the writer lists the cache directory again (another instance's files count in
    // the bound), reading every new entry's header; it did so holding disk_mutex_, which the decode thread takes for
    // every lookup, so a large directory held up decoding. The listing is now done without the lock and merged under
    // it. The writer's scan is held mid-listing (a hook, not timing); meanwhile another instance writes an entry and
    // this one is looked up from another thread: the lookup finishes, and once the scan is let go both entries are
    // indexed. (The wait for the lookup only turns a hang into a failure.)
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    {
        const auto mine = fake_tokens(40, 64), theirs = fake_tokens(41, 64);
        PromptCache cache((size_t)8 << 20, root, (size_t)64 << 20, 0x5c5c, "n1", "scan", 4096);
        CHECK(cache.disk_enabled(), "the disk tier is off in %s", root.c_str());
        const std::string dir = cache.directory();
        for (int i = 0; i < 500; i++) {  // a large directory (names the cache passes over)
            std::string path = dir + "/note-" + std::to_string(i) + ".txt";
            if (FILE *f = std::fopen(path.c_str(), "wb")) std::fclose(f);
        }
        {
            std::lock_guard<std::mutex> lock(g_scan_mutex);
            g_scan_phase = 1;
        }
        g_during_cache_scan.store(&hold_the_scan, std::memory_order_release);
        cache.save(mine, fake_state(64 << 10, 40), false);  // written, then the directory scanned: held there
        bool held;
        {
            std::unique_lock<std::mutex> lock(g_scan_mutex);
            held = g_scan_cv.wait_for(lock, std::chrono::seconds(120), [] { return g_scan_phase == 2; });
        }
        CHECK(held, "the writer never scanned the directory");
        {
            PromptCache other(0, root, (size_t)64 << 20, 0x5c5c, "n1", "scan-other", 4096);
            other.save(theirs, fake_state(64 << 10, 41), false);
            other.flush();
        }
        auto lookup = std::async(std::launch::async, [&] {
            Exempt exempt;
            PromptCache::Match match = cache.find(extended(theirs, 3));
            bool needed = cache.needs(mine, false);
            return std::make_pair(match.length, needed);
        });
        bool done = lookup.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
        CHECK(done, "a lookup waited for the writer's directory scan (disk_mutex_ held while listing)");
        {
            std::lock_guard<std::mutex> lock(g_scan_mutex);
            g_scan_phase = 3;
        }
        g_scan_cv.notify_all();
        auto [found, needed] = lookup.get();
        (void)needed;
        cache.flush();
        g_during_cache_scan.store(nullptr, std::memory_order_release);
        CHECK(found == theirs.size(), "the other instance's entry, written during the scan, was not found (%zu)", found);
        PromptCache::Match match = cache.find(extended(mine, 3));
        CHECK(match.length == mine.size() && !match.ram, "this instance's entry is not indexed (match %zu)",
              match.length);
        PromptCacheStats st = cache.stats();
        auto on_disk = files_in(dir, ".kv");
        CHECK(st.disk_entries == 2 && on_disk.size() == 2 && st.disk_bytes == total_bytes(on_disk) &&
                  st.disk_writes == 1 && st.discarded == 0,
              "%llu entries (%zu files), %llu bytes (%llu on disk), %llu writes, %llu discarded",
              (unsigned long long)st.disk_entries, on_disk.size(), (unsigned long long)st.disk_bytes,
              (unsigned long long)total_bytes(on_disk), (unsigned long long)st.disk_writes,
              (unsigned long long)st.discarded);
        CHECK(!cache.needs(mine, false) && !cache.needs(theirs, false), "an indexed entry is needed again");
    }
    g_during_cache_scan.store(nullptr, std::memory_order_release);
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

// A scan held once it has handled one name (g_during_cache_scan), until let go.
std::string g_hold_name;  // guarded by g_scan_mutex

void hold_after_the_name(const char *name) {
    Exempt exempt;
    std::unique_lock<std::mutex> lock(g_scan_mutex);
    if (g_scan_phase != 1 || g_hold_name != name) return;  // only the first scan to reach it is held
    g_scan_phase = 2;
    g_scan_cv.notify_all();
    g_scan_cv.wait(lock, [] { return g_scan_phase == 3; });
}

void hold_scans_after(const std::string &name) {
    {
        Exempt exempt;
        std::lock_guard<std::mutex> lock(g_scan_mutex);
        g_hold_name = name;
        g_scan_phase = 1;
    }
    g_during_cache_scan.store(&hold_after_the_name, std::memory_order_release);
}

bool scan_is_held(int seconds) {
    Exempt exempt;
    std::unique_lock<std::mutex> lock(g_scan_mutex);
    return g_scan_cv.wait_for(lock, std::chrono::seconds(seconds), [] { return g_scan_phase == 2; });
}

void let_the_scan_go() {
    {
        std::lock_guard<std::mutex> lock(g_scan_mutex);
        g_scan_phase = 3;
    }
    g_scan_cv.notify_all();
}

std::string base_name(const std::string &path) { return path.substr(path.find_last_of('/') + 1); }

void test_prompt_cache_scan_does_not_bring_back_removed_entries() {
    // (Session 9 #4.) A scan lists an entry another instance wrote; before it merges, a second scan (a lookup on
    // the decode thread) indexes that entry and it is removed (here: discarded, as after a refused restore). The
    // first scan's merge added it back from its listing: an entry in the index with no file (counted in the disk
    // bound, offered to lookups). Names removed since a listing began are not taken from it.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    {
        const auto theirs = fake_tokens(50, 64);
        PromptCache cache((size_t)8 << 20, root, (size_t)64 << 20, 0x5c5c, "n1", "removed", 4096);
        CHECK(cache.disk_enabled(), "the disk tier is off in %s", root.c_str());
        const std::string dir = cache.directory();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the directory's mtime ticks coarsely
        {
            PromptCache other(0, root, (size_t)64 << 20, 0x5c5c, "n1", "removed-other", 4096);
            other.save(theirs, fake_state(64 << 10, 50), false);
            other.flush();
        }
        auto files = files_in(dir, ".kv");
        CHECK(files.size() == 1, "%zu entries written", files.size());
        if (files.size() != 1) return;
        hold_scans_after(base_name(files[0].first));
        auto first = std::async(std::launch::async, [&] {
            Exempt exempt;
            PromptCacheTestAccess::scan(cache);
        });
        CHECK(scan_is_held(120), "the first scan never listed the entry");
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        if (FILE *f = std::fopen((dir + "/note.txt").c_str(), "wb")) std::fclose(f);  // the directory changes
        PromptCache::Match match = cache.find(extended(theirs, 3));  // scans again, and finds the entry
        CHECK(match.length == theirs.size() && !match.ram, "the second scan did not index the entry (%zu)",
              match.length);
        cache.discard(match);
        CHECK(files_in(dir, ".kv").empty(), "the entry was not removed");
        let_the_scan_go();
        CHECK(first.wait_for(std::chrono::seconds(60)) == std::future_status::ready, "the first scan never ended");
        g_during_cache_scan.store(nullptr, std::memory_order_release);
        PromptCacheStats st = cache.stats();
        CHECK(st.disk_entries == 0 && st.disk_bytes == 0, "after the first scan merged: %llu entries, %llu bytes "
              "indexed, no file", (unsigned long long)st.disk_entries, (unsigned long long)st.disk_bytes);
    }
    g_during_cache_scan.store(nullptr, std::memory_order_release);
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_listing_does_not_take_the_counters_lock() {
    // (Session 9 #5.) The listing runs at the idle priority (the writer's) and without disk_mutex_; at a damaged
    // entry it took ram_mutex_ to count the discard, which the decode thread takes for every lookup and save: an
    // idle thread preempted while holding it would stall decoding. The listing counts its discards itself and the
    // merge adds them. Here the counters' lock is held while a scan lists a damaged entry: the listing gets past it.
    std::string root = make_temp_dir();
    CHECK(!root.empty(), "mkdtemp");
    {
        PromptCache cache((size_t)8 << 20, root, (size_t)64 << 20, 0x5c5c, "n1", "damaged", 4096);
        CHECK(cache.disk_enabled(), "the disk tier is off in %s", root.c_str());
        const std::string dir = cache.directory();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the directory's mtime ticks coarsely
        {
            PromptCache other(0, root, (size_t)64 << 20, 0x5c5c, "n1", "damaged-other", 4096);
            other.save(fake_tokens(60, 64), fake_state(64 << 10, 60), false);
            other.flush();
        }
        auto files = files_in(dir, ".kv");
        CHECK(files.size() == 1, "%zu entries written", files.size());
        if (files.size() != 1) return;
        CHECK(truncate(files[0].first.c_str(), (off_t)files[0].second - 1) == 0, "truncate");  // damaged
        hold_scans_after(base_name(files[0].first));
        std::unique_lock<std::mutex> counters(PromptCacheTestAccess::ram_mutex(cache));
        auto scan = std::async(std::launch::async, [&] {
            Exempt exempt;
            PromptCacheTestAccess::scan(cache);
        });
        bool passed = scan_is_held(20);
        CHECK(passed, "the listing waited for ram_mutex_ at a damaged entry");
        counters.unlock();
        let_the_scan_go();
        CHECK(scan.wait_for(std::chrono::seconds(60)) == std::future_status::ready, "the scan never ended");
        g_during_cache_scan.store(nullptr, std::memory_order_release);
        PromptCacheStats st = cache.stats();
        CHECK(st.discarded == 1 && st.disk_entries == 0 && files_in(dir, ".kv").empty(),
              "%llu discarded, %llu entries", (unsigned long long)st.discarded, (unsigned long long)st.disk_entries);
    }
    g_during_cache_scan.store(nullptr, std::memory_order_release);
    std::string rm = "rm -rf '" + root + "'";
    CHECK(std::system(rm.c_str()) == 0, "%s", rm.c_str());
}

void test_prompt_cache_restores_only_worthwhile_matches(const afm_backend_vtable *vt) {
    // A new conversation sharing only its first exchange with a long cached one (about 100 of 700 tokens) is not
    // worth restoring the whole entry for (review F7: a whole state, possibly hundreds of MiB, was copied on the
    // decode thread to save a few dozen tokens); the long conversation itself still comes back whole.
    afm_instance *instance = create(vt, 2048, 1, {{"PromptCacheMiB", "256"}});
    CHECK(instance != nullptr, "create");
    if (!instance) return;
    std::string long_one = conversation_request(conversation("rivers", 12));
    Answer a = ask(vt, instance, 900, long_one);
    CHECK(a.ok && a.input > 500, "the long conversation: ok %d, %lld input tokens", a.ok, (long long)a.input);
    Answer other = ask(vt, instance, 901, conversation_request(conversation("volcanoes")));  // takes the slot
    CHECK(other.ok, "another conversation");
    uint64_t hits = stat_u64(cache_stats(vt, instance), "hits");
    Answer b = ask(vt, instance, 902, conversation_request(conversation("rivers", 1)));
    json stats = cache_stats(vt, instance);
    CHECK(b.ok && stat_u64(stats, "hits") == hits, "a %lld-token prompt restored a %lld-token entry (cached %lld): %s",
          (long long)b.input, (long long)a.input, (long long)b.cached, stats.dump().c_str());
    Answer again = ask(vt, instance, 903, long_one);
    CHECK(again.ok && again.cached >= again.input - 1, "the long conversation again: cached %lld of %lld",
          (long long)again.cached, (long long)again.input);
    vt->destroy(instance);
}

/** (Session 9 #7.) An array of anything (no `items`, no `prefixItems`) in an output schema with a bounded number:
 *  the rewrite of bounded numbers read `prefixItems` regardless and threw, and the request was refused as invalid. */
void test_array_without_items(Engine &engine) {
    const json schemas[] = {json{{"type", "array"}},
                            object_of({{"list", {{"type", "array"}}}, {"n", {{"type", "number"}, {"maximum", 3}}}})};
    llama_model *model = vocab_model();
    for (const auto &schema : schemas) {
        std::string grammar;
        try {
            grammar = output_schema_grammar(schema.dump());
        } catch (const std::exception &e) {
            CHECK(false, "%s: %s", schema.dump().c_str(), e.what());
        }
        try {
            Request r = parse_request(span(structured_request(schema)));
            Prepared p = engine.prepare(r, true);
            CHECK(p.sampler != nullptr, "no sampler");
        } catch (const BackendError &e) {
            CHECK(false, "prepare %s: code %d: %s", schema.dump().c_str(), (int)e.code(), e.what());
        }
        if (!model || grammar.empty()) continue;
        const llama_vocab *vocab = llama_model_get_vocab(model);
        if (schema.contains("properties")) {
            CHECK(grammar_accepts(vocab, grammar, R"({"list": [1, "a", {"b": null}], "n": 2.5})"), "%s", grammar.c_str());
            CHECK(!grammar_accepts(vocab, grammar, R"({"list": [], "n": 4})"), "n above its maximum: %s", grammar.c_str());
        } else {
            CHECK(grammar_accepts(vocab, grammar, R"([1, "a", [true]])"), "%s", grammar.c_str());
        }
    }
    if (model) llama_model_free(model);
}

/** A grammar llama.cpp's converter wrote that the bounded-number rewrite cannot use (no root rule for a range, a
 *  marker it did not keep as written) is the server's fault: reported as `internal` (5xx), not `invalid_request`
 *  (400, the client's fault). The converter is stood in for by a hook (g_converted_grammar) after the request was
 *  read (its check converts ranges too). */
void test_grammar_rewrite_faults_are_server_faults(Engine &engine) {
    const json schema = object_of({{"x", {{"type", "number"}, {"maximum", 3}}}});
    void (*const breakers[])(std::string &) = {
        // A range without its root rule.
        +[](std::string &g) {
            if (g.find("afm-") == std::string::npos) g = "integer ::= [0-9]+\n";
        },
        // The output's marker literal changed.
        +[](std::string &g) {
            size_t at = g.find("value-0");
            if (at != std::string::npos && g.find("afm-") != std::string::npos) g[at + 6] = 'z';
        },
    };
    const char *names[] = {"no root rule for a range", "a mangled marker"};
    for (int i = 0; i < 2; i++) {
        Request r = parse_request(span(structured_request(schema)));
        g_converted_grammar.store(breakers[i], std::memory_order_release);
        int direct = 0, prepared = 0;
        std::string message;
        try {
            output_schema_grammar(schema.dump());
        } catch (const BackendError &e) {
            direct = e.code();
        } catch (const std::exception &e) {
            direct = -1;
        }
        try {
            Prepared p = engine.prepare(r, true);
        } catch (const BackendError &e) {
            prepared = e.code();
            message = e.what();
        }
        g_converted_grammar.store(nullptr, std::memory_order_release);
        CHECK(direct == AFM_ERR_INTERNAL, "%s: output_schema_grammar: code %d", names[i], direct);
        CHECK(prepared == AFM_ERR_INTERNAL, "%s: prepare: code %d (%s)", names[i], prepared, message.c_str());
    }
    Prepared p = engine.prepare(parse_request(span(structured_request(schema))), true);
    CHECK(p.sampler != nullptr, "the engine does not serve afterwards");
}

/** (Session 9 #4.) std::random_device failing (no entropy source: a seccomp filter, an exhausted descriptor table)
 *  while drawing the bounded-number marker was reported as invalid_request (400, the client's fault): it is the
 *  server's (internal, 5xx). */
void test_random_failure_is_a_server_fault(const afm_backend_vtable *vt, afm_instance *instance) {
    const std::string schema = object_of({{"x", {{"type", "number"}, {"maximum", 3}}}}).dump();
    g_random_device_token.store("afm-no-such-entropy-source", std::memory_order_release);
    int code = 0;
    try {
        output_schema_grammar(schema);
    } catch (const BackendError &e) {
        code = e.code();
    } catch (const std::exception &e) {
        code = -1;
    }
    CHECK(code == AFM_ERR_INTERNAL, "output_schema_grammar: code %d", code);
    Collector c;
    afm_error error{};
    error.struct_size = sizeof error;
    afm_status rc = generate(vt, instance, 950, structured_request(json::parse(schema)), c, &error);
    g_random_device_token.store(nullptr, std::memory_order_release);
    if (rc == AFM_OK) c.wait(300);
    CHECK(rc == AFM_ERR_INTERNAL, "generate: code %d (%s)", (int)rc, error.message);
    Answer a = ask(vt, instance, 951, structured_request(json::parse(schema)));
    CHECK(a.ok, "the instance does not serve afterwards");
}

void test_allocation_failures(const afm_backend_vtable *vt, afm_instance *instance) {
    // generate itself (parse, template, tokenize, sampler, registering, queueing, the emitter thread).
    long scale = std::getenv("SWEEP_RUNS") ? std::atol(std::getenv("SWEEP_RUNS")) : 40;
    sweep("generate", vt, instance, request("Hi.", 2), true, scale, 3 * scale);
    // The decode thread and the emitters (prompt, sampling, events, finishing), text and tools.
    sweep("decode", vt, instance, request("Hi.", 2), false, scale, 3 * scale);
    // (A tool generation makes ~200,000 allocations, mostly the output parser's: strided.)
    sweep("decode+tools", vt, instance, request("What's the weather in Paris?", 8, true), false, scale / 8, scale / 2);
}

}  // namespace

int main(int argc, char **argv) {
    const char *model = std::getenv("MODEL");
    if (argc > 1) model = argv[1];
    if (!model || !*model) {
        std::fprintf(stderr, "usage: MODEL=<gguf> %s\n", argv[0]);
        return 2;
    }
    g_model = model;
    {
        void *frames[4];
        backtrace(frames, 4);  // loads libgcc's unwinder now, not in the middle of an injected failure
    }
    std::string only = std::getenv("ONLY") ? std::getenv("ONLY") : "";
    auto run = [&](const char *name, const std::function<void()> &fn) {
        if (!only.empty()) {  // ONLY=a,b: the tests whose names contain a or b
            bool selected = false;
            size_t start = 0;
            while (start <= only.size()) {
                size_t comma = only.find(',', start);
                std::string part = only.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
                if (!part.empty() && std::string(name).find(part) != std::string::npos) selected = true;
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
            if (!selected) return;
        }
        int before = g_failures;
        auto t0 = std::chrono::steady_clock::now();
        fn();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "%s %s (%.1f s)\n", g_failures == before ? "ok  " : "FAIL", name, s);
    };

    run("negotiate_leaves_struct_size", test_negotiate_leaves_struct_size);
    run("helpers", test_helpers);
    run("parse_with_memory_exhausted", test_parse_with_memory_exhausted);
    run("schemas_keep_their_order", test_schemas_keep_their_order);
    run("prompt_cache_rejects_crafted_entries", test_prompt_cache_rejects_crafted_entries);
    run("prompt_cache_disk_bound_across_instances", test_prompt_cache_disk_bound_across_instances);
    run("prompt_cache_never_reads_another_models_entries", test_prompt_cache_never_reads_another_models_entries);
    run("prompt_cache_fingerprint_sees_a_replaced_model", test_prompt_cache_fingerprint_sees_a_replaced_model);
    run("prompt_cache_keeps_entries_through_transient_errors", test_prompt_cache_keeps_entries_through_transient_errors);
    run("prompt_cache_keeps_entries_beyond_its_bounds", test_prompt_cache_keeps_entries_beyond_its_bounds);
    run("prompt_cache_counts_a_state_once", test_prompt_cache_counts_a_state_once);
    run("prompt_cache_writer_yields_to_decoding", test_prompt_cache_writer_yields_to_decoding);
    run("prompt_cache_destroy_is_not_held_up_by_an_idle_writer", test_prompt_cache_destroy_is_not_held_up_by_an_idle_writer);
    run("prompt_cache_take_rechecks_tokens", test_prompt_cache_take_rechecks_tokens);
    run("prompt_cache_refused_restore_keeps_the_entry", test_prompt_cache_refused_restore_keeps_the_entry);
    run("prompt_cache_refuses_unsafe_files_and_directories", test_prompt_cache_refuses_unsafe_files_and_directories);
    run("prompt_cache_survives_a_removed_directory", test_prompt_cache_survives_a_removed_directory);
    run("prompt_cache_writes_a_state_once", test_prompt_cache_writes_a_state_once);
    run("prompt_cache_keeps_prefixes_of_a_state_it_cannot_keep", test_prompt_cache_keeps_prefixes_of_a_state_it_cannot_keep);
    run("prompt_cache_long_layouts_do_not_share_a_directory", test_prompt_cache_long_layouts_do_not_share_a_directory);
    run("prompt_cache_keeps_recent_temporary_files_of_other_hosts", test_prompt_cache_keeps_recent_temporary_files_of_other_hosts);
    run("prompt_cache_does_not_rescan_for_foreign_files", test_prompt_cache_does_not_rescan_for_foreign_files);
    run("prompt_cache_refuses_untrusted_parents", test_prompt_cache_refuses_untrusted_parents);
    run("prompt_cache_ignores_entries_of_other_users", test_prompt_cache_ignores_entries_of_other_users);
    run("prompt_cache_keeps_to_the_directory_it_judged", test_prompt_cache_keeps_to_the_directory_it_judged);
    run("prompt_cache_evicts_what_frees_memory", test_prompt_cache_evicts_what_frees_memory);
    run("prompt_cache_scans_without_the_lock", test_prompt_cache_scans_without_the_lock);
    run("prompt_cache_scan_does_not_bring_back_removed_entries", test_prompt_cache_scan_does_not_bring_back_removed_entries);
    run("prompt_cache_listing_does_not_take_the_counters_lock", test_prompt_cache_listing_does_not_take_the_counters_lock);
    run("repetition_bounds_above_the_grammar_limit", test_repetition_bounds_above_the_grammar_limit);
    run("repetition_budget", test_repetition_budget);
    run("number_bounds_the_grammar_cannot_take", test_number_bounds_the_grammar_cannot_take);
    run("number_bounds_are_in_the_grammar", test_number_bounds_are_in_the_grammar);
    run("number_marker_is_not_derived_from_the_schema", test_number_marker_is_not_derived_from_the_schema);
    run("number_ranges_count_against_the_budget", test_number_ranges_count_against_the_budget);
    run("unreferenced_bounded_number", test_unreferenced_bounded_number);
    run("fractions_stay_off_exclusive_bounds", test_fractions_stay_off_exclusive_bounds);
    run("number_bounds_wherever_llama_cpp_builds_them", test_number_bounds_wherever_llama_cpp_builds_them);
    run("repetition_budget_walks_what_llama_cpp_builds", test_repetition_budget_walks_what_llama_cpp_builds);
    run("expansion_cap_is_per_request", test_expansion_cap_is_per_request);
    const afm_backend_vtable *vt = negotiate();
    if (!vt) {
        std::fprintf(stderr, "negotiation failed\n");
        return 1;
    }
    run("output_cap_is_the_advertised_budget", [&] { test_output_cap_is_the_advertised_budget(vt); });
    run("progress_while_queued_and_reading", [&] { test_progress_while_queued_and_reading(vt); });
    run("cancel_interrupts_a_prompt_batch", [&] { test_cancel_interrupts_a_prompt_batch(vt); });
    run("prompt_cache_restores_an_evicted_conversation", [&] { test_prompt_cache_restores_an_evicted_conversation(vt); });
    run("prompt_cache_disk_tier", [&] { test_prompt_cache_disk_tier(vt); });
    run("prompt_cache_memory_bound", [&] { test_prompt_cache_memory_bound(vt); });
    run("prompt_cache_restores_only_worthwhile_matches", [&] { test_prompt_cache_restores_only_worthwhile_matches(vt); });
    afm_instance *instance = create(vt, 2048, 2);
    if (!instance) return 1;
    run("capped_tool_call_is_not_closed", [&] { test_capped_tool_call_is_not_closed(vt, instance); });
    run("random_failure_is_a_server_fault", [&] { test_random_failure_is_a_server_fault(vt, instance); });
    run("allocation_failures", [&] { test_allocation_failures(vt, instance); });
    vt->destroy(instance);
    run("tool_call_cut_by_a_stop_string", [&] {
        with_engine("unit#1", test_tool_call_cut_by_a_stop_string);
    });
    run("out_of_memory_in_the_final_tool_parse", [&] {
        with_engine("unit#2", test_out_of_memory_in_the_final_tool_parse);
    });
    run("array_without_items", [&] { with_engine("unit#3", test_array_without_items); });
    run("grammar_rewrite_faults_are_server_faults", [&] {
        with_engine("unit#4", test_grammar_rewrite_faults_are_server_faults);
    });
    std::fprintf(stderr, "%s: %d failure(s)\n", g_failures ? "FAILED" : "passed", g_failures);
    return g_failures ? 1 : 0;
}
