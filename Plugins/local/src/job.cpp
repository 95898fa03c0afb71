// SPDX-License-Identifier: Apache-2.0
// job.cpp: one accepted generation and its emitter thread.
//
// The decode thread never calls the host's emit(): it queues events here, and each generation's own emitter
// thread delivers them. emit() may block while a client is slow (backpressure); that blocks only this thread. The
// decode thread stops scheduling a sequence whose queue holds kMaxQueuedEvents (the backpressure reaches the
// model for that sequence only) and keeps decoding the others.
//
// Cancellation: cancel() (or a non-zero emit return) makes the emitter send USAGE and DONE/CANCELLED at once,
// without waiting for the decode thread, which drops the sequence at its next step.
#include "local.h"

#include "sampling.h"

#include <algorithm>
#include <cstring>

namespace afm_local {

Prepared::Prepared(Prepared &&other) noexcept { *this = std::move(other); }

Prepared &Prepared::operator=(Prepared &&other) noexcept {
    if (this != &other) {
        if (sampler) common_sampler_free(sampler);
        prompt = std::move(other.prompt);
        sampler = other.sampler;
        other.sampler = nullptr;
        parse_tools = other.parse_tools;
        single_call = other.single_call;
        parser_params = std::move(other.parser_params);
        preserved_tokens = std::move(other.preserved_tokens);
        stops = std::move(other.stops);
        max_output = other.max_output;
    }
    return *this;
}

Prepared::~Prepared() {
    if (sampler) common_sampler_free(sampler);
}

Job::Job(uint64_t request_id, const afm_event_sink &sink, Prepared prepared, Engine *engine)
    : prep(std::move(prepared)), request_id_(request_id), sink_(sink), engine_(engine) {
    input_tokens.store((int64_t)prep.prompt.size());
}

Job::~Job() {
    if (thread_.joinable()) thread_.join();  // only reached on a failed start or at destroy
}

bool Job::start() {
    try {
        thread_ = std::thread([this] { run(); });
        return true;
    } catch (...) {
        return false;
    }
}

void Job::join() {
    if (thread_.joinable()) thread_.join();
}

void Job::cancel() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        cancel_requested_ = true;
    }
    cv_.notify_all();
}

void Job::push(Event event) {
    bool terminal = event.type == AFM_EVENT_DONE || event.type == AFM_EVENT_ERROR;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(event));
        if (terminal) terminal_queued_ = true;
    }
    cv_.notify_one();
}

void Job::abort(afm_status code, const char *message) noexcept {
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        if (terminal_queued_ || abort_requested_) return;
        abort_requested_ = true;
        abort_code_ = code;
        size_t n = message ? std::min(std::strlen(message), sizeof abort_message_ - 1) : 0;
        // Do not cut a UTF-8 character in half.
        while (n > 0 && message[n] != '\0' && ((unsigned char)message[n] & 0xC0) == 0x80) n--;
        if (n) std::memcpy(abort_message_, message, n);
        abort_message_[n] = '\0';
        stopped_.store(true, std::memory_order_release);  // the decode thread drops it at its next step
    } catch (...) {
        return;  // std::mutex::lock failing (system_error) leaves nothing else to do
    }
    cv_.notify_one();
}

size_t Job::queued() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.size();
}

int32_t Job::deliver(const Event &e) {
    afm_event event{};
    event.struct_size = (uint32_t)sizeof event;
    event.type = e.type;
    event.index = e.index;
    event.code = e.code;
    event.text = afm_str{e.text.empty() ? nullptr : e.text.data(), (uint64_t)e.text.size()};
    event.name = afm_str{e.name.empty() ? nullptr : e.name.data(), (uint64_t)e.name.size()};
    event.input_tokens = e.input_tokens;
    event.output_tokens = e.output_tokens;
    event.reasoning_tokens = e.reasoning_tokens;
    event.cached_tokens = e.cached_tokens;
    return sink_.emit(sink_.ctx, &event);
}

void Job::run() {
    bool cancelled = false;
    bool aborted = false;
    int32_t abort_code = AFM_ERR_INTERNAL;
    char abort_message[sizeof abort_message_] = {0};
    for (;;) {
        Event event;
        bool drained = false;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            cv_.wait(lock, [this] { return !queue_.empty() || cancel_requested_ || abort_requested_; });
            if (cancel_requested_) {
                cancelled = true;
                break;
            }
            if (queue_.empty()) {  // abort_requested_: what was queued is delivered, now the ERROR
                aborted = true;
                abort_code = abort_code_;
                std::memcpy(abort_message, abort_message_, sizeof abort_message);
                break;
            }
            event = std::move(queue_.front());
            queue_.pop_front();
            drained = queue_.size() == kMaxQueuedEvents / 2;
        }
        if (drained) engine_->wake();  // a paused (backpressured) sequence may continue
        bool terminal = event.type == AFM_EVENT_DONE || event.type == AFM_EVENT_ERROR;
        if (terminal) stopped_.store(true, std::memory_order_release);
        int32_t rc = deliver(event);
        if (terminal) break;
        if (rc != 0) {
            cancelled = true;  // the client is gone
            break;
        }
    }
    if (aborted) {
        // Built on the stack: this path must work when the allocation that failed was ours.
        stopped_.store(true, std::memory_order_release);
        engine_->wake();
        afm_event usage{};
        usage.struct_size = (uint32_t)sizeof usage;
        usage.type = AFM_EVENT_USAGE;
        usage.input_tokens = input_tokens.load();
        usage.output_tokens = output_tokens.load();
        usage.reasoning_tokens = 0;
        usage.cached_tokens = cached_tokens.load();
        (void)sink_.emit(sink_.ctx, &usage);
        afm_event error{};
        error.struct_size = (uint32_t)sizeof error;
        error.type = AFM_EVENT_ERROR;
        error.code = abort_code;
        error.text = afm_str{abort_message, (uint64_t)std::strlen(abort_message)};
        error.input_tokens = error.output_tokens = error.reasoning_tokens = error.cached_tokens = -1;
        (void)sink_.emit(sink_.ctx, &error);
    } else if (cancelled) {
        stopped_.store(true, std::memory_order_release);
        engine_->wake();  // let the decode thread free the slot now
        Event usage;
        usage.type = AFM_EVENT_USAGE;
        usage.input_tokens = input_tokens.load();
        usage.output_tokens = output_tokens.load();
        usage.reasoning_tokens = 0;
        usage.cached_tokens = cached_tokens.load();
        (void)deliver(usage);
        Event done;
        done.type = AFM_EVENT_DONE;
        done.code = AFM_FINISH_CANCELLED;
        (void)deliver(done);
    }
    finished_.store(true, std::memory_order_release);
}

}  // namespace afm_local
