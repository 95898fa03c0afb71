// SPDX-License-Identifier: Apache-2.0
// log.cpp: routes llama.cpp/ggml log lines to the host's log, and captures error lines while a model loads.
#include "local.h"

#include "ggml.h"
#include "log.h"  // llama.cpp common logger

#include <cstdlib>
#include <cstring>

namespace afm_local {
namespace {

std::atomic<const afm_host_api *> g_host{nullptr};
std::once_flag g_install_once;
bool g_debug = false;

thread_local std::string t_line;                 // a log line being assembled from pieces
thread_local int t_line_level = GGML_LOG_LEVEL_INFO;
thread_local bool t_capturing = false;
thread_local std::string t_captured;

void host_log(int32_t level, const std::string &message) {
    const afm_host_api *host = g_host.load(std::memory_order_acquire);
    if (host && host->struct_size >= offsetof(afm_host_api, log) + sizeof host->log && host->log) {
        afm_str s{message.data(), (uint64_t)message.size()};
        host->log(host->host_ctx, level, s);
    }
}

void dispatch_line(int level, std::string line) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.empty()) return;
    // The first error line is the root cause; the lines after it repeat it from the callers' point of view.
    if (t_capturing && level == GGML_LOG_LEVEL_ERROR && t_captured.empty()) t_captured = line.substr(0, 400);
    // With per-slot contexts llama.cpp compares the whole KV size with the training context; the backend caps
    // every sequence at ContextTokens itself, so this warning would only mislead operators.
    if (line.find("possible training context overflow") != std::string::npos) level = GGML_LOG_LEVEL_DEBUG;
    // A decode the engine aborts on purpose (every generation in the batch stopped: Engine::abort_decode) makes
    // llama.cpp log errors (status 1 is GGML_STATUS_ABORTED, which only an abort callback gives; llama_decode's 2)
    // and the cells it took out again: expected, not worth an operator's attention. (A decode that fails otherwise,
    // with those cells, is reported by the backend itself.)
    if (line.find("ggml_backend_sched_graph_compute_async failed with error 1") != std::string::npos ||
        line.find("failed to compute graph, compute status: 1") != std::string::npos ||
        line.find("failed to decode, ret = 2") != std::string::npos ||
        line.find("removing memory module entries") != std::string::npos)
        level = GGML_LOG_LEVEL_DEBUG;
    int32_t afm_level;
    switch (level) {
    case GGML_LOG_LEVEL_ERROR: afm_level = AFM_LOG_ERROR; break;
    case GGML_LOG_LEVEL_WARN: afm_level = AFM_LOG_WARNING; break;
    case GGML_LOG_LEVEL_INFO: afm_level = AFM_LOG_INFO; break;
    default: afm_level = AFM_LOG_DEBUG; break;
    }
    if (afm_level >= AFM_LOG_WARNING || g_debug) host_log(afm_level, "llama.cpp: " + line);
}

void llama_log_callback(ggml_log_level level, const char *text, void *) noexcept {
    // Called from llama.cpp and ggml (C code among them): nothing may unwind out of here. A line that cannot be
    // assembled (out of memory) is dropped.
    if (!text) return;
    try {
        if (level != GGML_LOG_LEVEL_CONT) {
            if (!t_line.empty()) dispatch_line(t_line_level, std::move(t_line));
            t_line.clear();
            t_line_level = level;
        }
        t_line += text;
        size_t newline;
        while ((newline = t_line.find('\n')) != std::string::npos) {
            dispatch_line(t_line_level, t_line.substr(0, newline));
            t_line.erase(0, newline + 1);
        }
    } catch (...) {
        t_line.clear();
    }
}

}  // namespace

void log_install(const afm_host_api *host) {
    if (host) {
        const afm_host_api *expected = nullptr;
        g_host.compare_exchange_strong(expected, host, std::memory_order_acq_rel);
    }
    std::call_once(g_install_once, [] {
        const char *debug = std::getenv("AFM_LOCAL_DEBUG");
        g_debug = debug && std::strcmp(debug, "1") == 0;
        llama_log_set(llama_log_callback, nullptr);
        // common's own logger prints to stderr from a worker thread; keep it to errors unless debugging.
        common_log_set_verbosity_thold(g_debug ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR);
    });
}

void log_line(int32_t level, const std::string &message) {
    if (level == AFM_LOG_DEBUG && !g_debug) return;
    host_log(level, message);
}

void log_capture_begin() {
    t_capturing = true;
    t_captured.clear();
}

std::string log_capture_end() {
    t_capturing = false;
    std::string captured;
    captured.swap(t_captured);
    return captured;
}

}  // namespace afm_local
