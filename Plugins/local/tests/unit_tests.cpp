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

#include <dlfcn.h>
#include <execinfo.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <string>
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
                  std::string(e->name.data ? e->name.data : "", e->name.size), e->output_tokens};
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

afm_instance *create(const afm_backend_vtable *vt, int context_tokens, int parallel) {
    json settings = {{"Model", g_model}, {"ContextTokens", std::to_string(context_tokens)},
                     {"ParallelSequences", std::to_string(parallel)}};
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
    run("repetition_bounds_above_the_grammar_limit", test_repetition_bounds_above_the_grammar_limit);
    run("repetition_budget", test_repetition_budget);
    run("number_bounds_the_grammar_cannot_take", test_number_bounds_the_grammar_cannot_take);
    run("number_bounds_are_in_the_grammar", test_number_bounds_are_in_the_grammar);
    const afm_backend_vtable *vt = negotiate();
    if (!vt) {
        std::fprintf(stderr, "negotiation failed\n");
        return 1;
    }
    run("output_cap_is_the_advertised_budget", [&] { test_output_cap_is_the_advertised_budget(vt); });
    run("progress_while_queued_and_reading", [&] { test_progress_while_queued_and_reading(vt); });
    afm_instance *instance = create(vt, 2048, 2);
    if (!instance) return 1;
    run("capped_tool_call_is_not_closed", [&] { test_capped_tool_call_is_not_closed(vt, instance); });
    run("allocation_failures", [&] { test_allocation_failures(vt, instance); });
    vt->destroy(instance);
    run("tool_call_cut_by_a_stop_string", [&] {
        with_engine("unit#1", test_tool_call_cut_by_a_stop_string);
    });
    run("out_of_memory_in_the_final_tool_parse", [&] {
        with_engine("unit#2", test_out_of_memory_in_the_final_tool_parse);
    });
    std::fprintf(stderr, "%s: %d failure(s)\n", g_failures ? "FAILED" : "passed", g_failures);
    return g_failures ? 1 : 0;
}
