// SPDX-License-Identifier: Apache-2.0
// utf8.cpp: streaming UTF-8 validation, so TEXT_DELTA events never split a character.
#include "local.h"

namespace afm_local {

namespace {

const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

/** Length of the sequence a lead byte announces (0: not a lead byte). */
int sequence_length(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/** Whether bytes[1..n) are valid continuation bytes for this lead (rejects overlongs and surrogates). */
bool valid_continuation(const unsigned char *s, int available, int n, bool *incomplete) {
    *incomplete = false;
    for (int i = 1; i < n; i++) {
        if (i >= available) {
            *incomplete = true;
            return true;
        }
        unsigned char c = s[i];
        unsigned char lo = 0x80, hi = 0xBF;
        if (i == 1) {
            if (s[0] == 0xE0) lo = 0xA0;
            else if (s[0] == 0xED) hi = 0x9F;
            else if (s[0] == 0xF0) lo = 0x90;
            else if (s[0] == 0xF4) hi = 0x8F;
        }
        if (c < lo || c > hi) return false;
    }
    return true;
}

}  // namespace

size_t utf8_complete_prefix(std::string_view s) {
    // Walk back at most 3 bytes to find a lead byte whose sequence runs past the end.
    size_t n = s.size();
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        int len = sequence_length(c);
        if (len > (int)back) return n - back;  // the sequence is incomplete
        return n;
    }
    return n;
}

std::string Utf8Stream::push(std::string_view bytes) {
    pending_.append(bytes.data(), bytes.size());
    std::string out;
    out.reserve(pending_.size());
    const unsigned char *s = (const unsigned char *)pending_.data();
    size_t n = pending_.size(), i = 0;
    while (i < n) {
        int len = sequence_length(s[i]);
        if (len == 1) {
            out += (char)s[i++];
            continue;
        }
        bool incomplete = false;
        if (len == 0 || !valid_continuation(s + i, (int)(n - i), len, &incomplete)) {
            out += kReplacement;
            i++;
            continue;
        }
        if (incomplete) break;  // hold the tail until the next push
        out.append((const char *)s + i, (size_t)len);
        i += (size_t)len;
    }
    pending_.erase(0, i);
    return out;
}

std::string Utf8Stream::finish() {
    std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
    pending_.clear();
    return out;
}

}  // namespace afm_local
