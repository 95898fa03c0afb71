// SPDX-License-Identifier: Apache-2.0
// prompt_cache.cpp: saved sequence states in RAM and on disk (prompt_cache.h). The engine (engine.cpp) decides
// when to save and restore; this file keeps the entries, their bounds, the files and their checksums.
#include "prompt_cache.h"
#include "local.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace afm_local {

namespace {

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t fmix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

inline uint64_t mix(uint64_t h, uint64_t w) {
    h ^= rotl(w * 0x87c37b91114253d5ULL, 31) * 0x4cf5ad432745937fULL;
    return rotl(h, 27) * 5 + 0x52dce729;
}

constexpr char kMagic[8] = {'A', 'F', 'M', 'K', 'V', 'C', '1', '\0'};
constexpr uint32_t kFormat = 1;
using FileHeader = PromptCacheFileHeader;

/** Reads `size` bytes: 1 done, 0 the file ended first (it is shorter than its header says: damage), -1 a read error
 *  (EIO and the like: nothing is known about the entry). */
int read_all(int fd, void *dst, size_t size) {
    auto *p = static_cast<uint8_t *>(dst);
    while (size > 0) {
        ssize_t n = ::read(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) return 0;
        p += n;
        size -= (size_t)n;
    }
    return 1;
}

bool write_all(int fd, const void *src, size_t size) {
    auto *p = static_cast<const uint8_t *>(src);
    while (size > 0) {
        ssize_t n = ::write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= (size_t)n;
    }
    return true;
}

std::string error_text(int error) { return std::string("(") + std::strerror(error) + ")"; }

/** Why a directory on the way to the cache may not be trusted ("" when it may), judged on its descriptor's stat.
 *  Entries are restored into the model's memory, so no one but root and the daemon's user may be able to put a name
 *  where the cache looks. As OpenSSH's StrictModes judges the directories above ~/.ssh (safe_path()), each must be
 *  owned by root or us and writable by no one else; one writable by others may still be sticky (/tmp, /var/tmp):
 *  others may add names there but not rename or remove ours, and a name they add is refused for its owner (or, as
 *  a symbolic link, for the link's owner) at the next step. */
std::string untrusted(const struct stat &st) {
    if (!S_ISDIR(st.st_mode)) return "is not a directory";
    if (st.st_uid != 0 && st.st_uid != ::geteuid()) return "is owned by uid " + std::to_string(st.st_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) return "is writable by group or others";
    return "";
}

/** A descriptor closed when it goes out of scope (unless released). */
struct Fd {
    int fd = -1;
    Fd() = default;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() { reset(-1); }
    void reset(int f) {
        if (fd >= 0) ::close(fd);
        fd = f;
    }
    int release() {
        int f = fd;
        fd = -1;
        return f;
    }
};

/** The components of `path` ("" and "." dropped). */
std::vector<std::string> components(const std::string &path) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start < path.size()) {
        size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        if (end > start && path.compare(start, end - start, ".") != 0) out.push_back(path.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

/** Opens the absolute directory `path` for the cache: from / down, each component relative to the one before with
 *  O_NOFOLLOW, and each judged (untrusted()) on the descriptor it opened, so what is judged is what is used and
 *  nothing can be swapped in between. A missing component is made (mode 0700) when `create`. A symbolic link is
 *  followed (its target walked the same way) when root or we own it: it is in a directory judged already, where only
 *  its owner or the directory's owner could have put it. At most two descriptors are open at a time. Returns the
 *  descriptor, or -1 with `why` ("<directory> <reason>"). */
int open_trusted(const std::string &path, bool create, std::string &why) {
    std::vector<std::string> walked;  // the directories from / to the current one (for messages and "..")
    auto shown = [&] {
        std::string s;
        for (const auto &name : walked) s += "/" + name;
        return s.empty() ? std::string("/") : s;
    };
    Fd current;
    auto judge = [&]() -> bool {
        struct stat st;
        why = ::fstat(current.fd, &st) != 0 ? "cannot be examined " + error_text(errno) : untrusted(st);
        if (!why.empty()) why = shown() + " " + why;
        return why.empty();
    };
    auto start_at_root = [&]() -> bool {
        walked.clear();
        current.reset(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (current.fd < 0) {
            why = "/ cannot be opened " + error_text(errno);
            return false;
        }
        return judge();
    };
    if (path.empty() || path[0] != '/') {
        why = path + " is not an absolute path";
        return -1;
    }
    if (!start_at_root()) return -1;
    std::vector<std::string> rest = components(path);
    std::reverse(rest.begin(), rest.end());  // the next component last
    int links = 0;
    while (!rest.empty()) {
        const std::string name = rest.back();
        rest.pop_back();
        if (name == "..") {  // the physical parent (of / itself: /), already judged on the way down
            if (walked.empty()) continue;
            Fd parent(::openat(current.fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (parent.fd < 0) {
                why = shown() + "/.. cannot be opened " + error_text(errno);
                return -1;
            }
            current.reset(parent.release());
            walked.pop_back();
            if (!judge()) return -1;
            continue;
        }
        const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
        Fd next(::openat(current.fd, name.c_str(), flags));
        if (next.fd < 0 && errno == ENOENT && create) {
            if (::mkdirat(current.fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
                why = shown() + (walked.empty() ? "" : "/") + name + " cannot be created " + error_text(errno);
                return -1;
            }
            next.reset(::openat(current.fd, name.c_str(), flags));
        }
        if (next.fd < 0) {
            const int error = errno;
            const std::string at = shown() + (walked.empty() ? "" : "/") + name;
            struct stat st;
            if ((error == ELOOP || error == ENOTDIR) &&
                ::fstatat(current.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
                if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
                    why = at + " is a symbolic link owned by uid " + std::to_string(st.st_uid);
                    return -1;
                }
                char target[PATH_MAX];
                ssize_t n = ::readlinkat(current.fd, name.c_str(), target, sizeof target - 1);
                if (n <= 0 || ++links > 40) {
                    why = at + (n <= 0 ? " cannot be read " + error_text(errno) : " has too many symbolic links");
                    return -1;
                }
                target[n] = '\0';
                std::vector<std::string> more = components(target);
                rest.insert(rest.end(), more.rbegin(), more.rend());
                if (target[0] == '/' && !start_at_root()) return -1;
                continue;
            }
            why = at + (error == ENOTDIR ? " is not a directory" : " cannot be opened " + error_text(error));
            return -1;
        }
        current.reset(next.release());
        walked.push_back(name);
        if (!judge()) return -1;
    }
    return current.release();
}

int64_t mtime_ns(const struct stat &st) { return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec; }

/** Whether `name` (in the directory `dir`) is a temporary file of write_file ("<entry>.kv.<pid>.<tag>.tmp") that no
 *  write will finish: it is older than any write takes. Only its age tells: its process ID says nothing when the
 *  directory is shared with another host or container (a PID not running here may be a write in progress there),
 *  nor when the ID is reused. */
bool is_abandoned_temp(int dir, const std::string &name) {
    if (name.size() < 8 || name.compare(name.size() - 4, 4, ".tmp") != 0) return false;
    if (name.find(".kv.") == std::string::npos) return false;
    struct stat st;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    constexpr int64_t kAbandonedAfterNs = (int64_t)600 * 1000000000;  // a write of even a GiB takes seconds
    return ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - mtime_ns(st) > kAbandonedAfterNs;
}

size_t common_prefix(const std::vector<llama_token> &a, const std::vector<llama_token> &b) {
    size_t n = std::min(a.size(), b.size()), i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

bool is_prefix(const std::vector<llama_token> &a, const std::vector<llama_token> &of) {
    return a.size() <= of.size() && std::equal(a.begin(), a.end(), of.begin());
}

}  // namespace

std::atomic<void (*)(const char *)> g_during_cache_scan{nullptr};

uint64_t prompt_cache_header_hash(const PromptCacheFileHeader &h) {
    return hash64(&h, offsetof(PromptCacheFileHeader, header_hash), 0x4846);
}

uint64_t hash64(const void *data, size_t size, uint64_t seed) {
    const auto *p = static_cast<const uint8_t *>(data);
    uint64_t a = seed ^ 0x9E3779B97F4A7C15ULL, b = seed + 0x632BE59BD9B4E019ULL, c = ~seed, d = seed * 3 + 1;
    size_t n = size;
    while (n >= 32) {
        uint64_t w[4];
        std::memcpy(w, p, 32);
        a = mix(a, w[0]);
        b = mix(b, w[1]);
        c = mix(c, w[2]);
        d = mix(d, w[3]);
        p += 32;
        n -= 32;
    }
    uint64_t h = rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18);
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        h = mix(h, w);
        p += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p, n);
    h = mix(h, tail ^ ((uint64_t)n << 56));
    return fmix(h ^ (uint64_t)size);
}

uint64_t model_fingerprint(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        return 0;
    }
    const uint64_t size = (uint64_t)st.st_size;
    uint64_t h = hash64(&size, sizeof size, 0x4d4f44454c);
    // The samples below cannot tell a same-size update of a model (a fine-tune's changed tensors) from the model it
    // replaced; the file's identity can: an update is a new file (new inode) or a rewrite (new mtime). A copy of an
    // unchanged model then starts a cold directory, which costs only warm-up.
    const uint64_t identity[4] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_mtim.tv_sec,
                                  (uint64_t)st.st_mtim.tv_nsec};
    h = hash64(identity, sizeof identity, h);
    std::vector<uint8_t> buffer(1 << 20);
    auto sample = [&](uint64_t offset, size_t length) {
        length = (size_t)std::min<uint64_t>(length, size > offset ? size - offset : 0);
        if (length == 0) return true;
        ssize_t n = ::pread(fd, buffer.data(), length, (off_t)offset);
        if (n != (ssize_t)length) return false;
        h = hash64(buffer.data(), length, h);
        return true;
    };
    bool ok = sample(0, 1 << 20) && sample(size > (1 << 20) ? size - (1 << 20) : 0, 1 << 20);
    for (int i = 1; ok && i <= 16; i++) ok = sample(size / 17 * (uint64_t)i, 1 << 16);
    ::close(fd);
    return ok ? (h ? h : 1) : 0;
}

PromptCache::PromptCache(size_t ram_limit, const std::string &dir, size_t disk_limit, uint64_t fingerprint,
                         const std::string &layout, const std::string &instance, size_t max_tokens)
    : ram_limit_(ram_limit), disk_limit_(disk_limit), instance_(instance), max_tokens_(max_tokens) {
    counters_.ram_limit = ram_limit;
    counters_.disk_limit = disk_limit;
    if (!dir.empty() && disk_limit > 0) {
        // "/<fingerprint>-<layout>", the layout whole (two llama.cpp builds whose keys differ late must not share a
        // directory): hashed when it would make too long a name, or one that is not a single path component.
        char hex[24];
        std::snprintf(hex, sizeof hex, "/%016" PRIx64 "-", fingerprint);
        std::string name = hex + layout;
        if (layout.empty() || layout.size() > 128 || layout.find('/') != std::string::npos) {
            std::snprintf(hex, sizeof hex, "%016" PRIx64, hash64(layout.data(), layout.size(), 0x4c41594f));
            name = std::string(name, 0, 18) + "h" + hex;
        }
        fingerprint_ = hash64(name.data(), name.size(), fingerprint);
        root_ = dir;
        while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
        name_ = name.substr(1);
        const std::string path = root_ == "/" ? name : root_ + name;
        std::string why;
        auto handle = open_directory(why);
        if (!handle) {
            log_line(AFM_LOG_WARNING, instance_ + ": prompt cache directory " + path + " refused: " + why +
                                          "; the disk tier is off");
        } else {
            dir_ = path;
            {
                std::lock_guard<std::mutex> lock(disk_mutex_);
                directory_ = std::move(handle);
            }
            scan();
            std::lock_guard<std::mutex> lock(disk_mutex_);
            evict_disk_locked();
        }
    }
    counters_.disk = !dir_.empty();
    if (!dir_.empty()) writer_ = std::thread([this] { writer_loop(); });
}

PromptCache::~PromptCache() {
    {
        std::lock_guard<std::mutex> lock(write_mutex_);
        stopping_.store(true);  // the writer finishes what is queued first: a restart finds it
    }
    if (writer_.joinable()) {
        // A write under way at SCHED_IDLE finishes at the normal priority (writer_priority() sees the flag from now
        // on): with both cores decoding for another instance, an idle writer would hold up this unload for minutes.
        sched_param param{};
        param.sched_priority = 0;
        pthread_setschedparam(writer_.native_handle(), SCHED_OTHER, &param);
    }
    write_cv_.notify_all();
    if (writer_.joinable()) writer_.join();
}

PromptCache::Directory::~Directory() {
    if (fd >= 0) ::close(fd);
}

std::shared_ptr<const PromptCache::Directory> PromptCache::open_directory(std::string &why) const {
    auto handle = std::make_shared<Directory>();
    Fd root(open_trusted(root_, true, why));
    if (root.fd < 0) return nullptr;
    // This model's directory: ours alone (the one above may be a sticky one others write in too).
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    Fd own(::openat(root.fd, name_.c_str(), flags));
    if (own.fd < 0 && errno == ENOENT) {
        if (::mkdirat(root.fd, name_.c_str(), 0700) != 0 && errno != EEXIST) {
            why = name_ + " cannot be created " + error_text(errno);
            return nullptr;
        }
        own.reset(::openat(root.fd, name_.c_str(), flags));
    }
    struct stat st;
    if (own.fd < 0) {
        why = errno == ELOOP || errno == ENOTDIR ? "it is not a directory" : "it cannot be opened " + error_text(errno);
    } else if (::fstat(own.fd, &st) != 0) {
        why = "it cannot be examined " + error_text(errno);
    } else if (st.st_uid != ::geteuid()) {
        why = "it is owned by uid " + std::to_string(st.st_uid);
    } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        why = "it is writable by group or others";
    } else {
        handle->fd = own.release();
        return handle;
    }
    return nullptr;
}

std::shared_ptr<const PromptCache::Directory> PromptCache::directory_handle() const {
    std::lock_guard<std::mutex> lock(disk_mutex_);
    return directory_;
}

void PromptCache::set_state_size(uint64_t base, uint64_t per_token) {
    state_base_.store(base);
    state_per_token_.store(per_token);
    std::lock_guard<std::mutex> lock(disk_mutex_);
    dir_mtime_ = -1;  // the entries set aside at start-up are judged again, with this bound, at the next scan
}

uint64_t PromptCache::max_state_bytes(uint64_t n_tokens) const {
    // A state grows linearly with its tokens (llama.cpp writes a fixed header per layer, then each cell's rows), and
    // the directory's key fixes the model and layout, so every instance measures the same: twice that plus 1 MiB
    // leaves room for whatever llama.cpp adds without admitting a blown-up field. Beyond it is damage. (0: not
    // measured yet.)
    const uint64_t per_token = state_per_token_.load();
    if (per_token == 0) return 0;
    return 2 * (state_base_.load() + per_token * n_tokens) + ((uint64_t)1 << 20);
}

PromptCache::Read PromptCache::read_entry(int dir, const std::string &name, std::vector<llama_token> &tokens,
                                          std::vector<uint8_t> *state, uint64_t &file_bytes, int64_t &mtime) const noexcept {
    // O_NONBLOCK: a FIFO named like an entry would block open() (on the decode thread) until someone writes to it;
    // O_NOFOLLOW: an entry is a file in our directory, never a link to elsewhere.
    int fd = ::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        // What no entry of ours gives (a link, a socket, a file we may not read, a directory): a foreign file, left
        // alone. Were it "unavailable", every find() would read the directory again for it (on the decode thread).
        if (errno == ENOENT) return Read::gone;
        if (errno == ELOOP || errno == ENXIO || errno == EACCES || errno == EISDIR) return Read::foreign;
        return Read::unavailable;
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st;
    if (::fstat(fd, &st) != 0) return Read::unavailable;
    // Ours, or foreign: a file another user owns was not written by this daemon (root may open it regardless).
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) return Read::foreign;
    try {
        FileHeader h;
        int r = read_all(fd, &h, sizeof h);
        if (r <= 0) return r < 0 ? Read::unavailable : Read::damaged;
        if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.format != kFormat || h.header_size != sizeof h ||
            h.header_hash != prompt_cache_header_hash(h) || h.fingerprint != fingerprint_)
            return Read::damaged;
        // Every length is checked before anything is allocated: a checksum is no defence against a crafted header
        // (it is not secret), a bound is. Lengths no instance writes are damage; a valid entry longer than this
        // instance's context or larger than the memory it may use for one is another instance's: it stays.
        if (h.n_tokens == 0 || h.n_tokens > kMaxEntryTokens || h.state_bytes == 0) return Read::damaged;
        uint64_t expected = sizeof h + h.n_tokens * sizeof(llama_token) + h.state_bytes;
        if (h.state_bytes > (uint64_t)st.st_size || (uint64_t)st.st_size != expected)
            return Read::damaged;  // truncated, or something appended
        const uint64_t most = max_state_bytes(h.n_tokens);
        if (most > 0 && h.state_bytes > most) return Read::damaged;
        if (h.n_tokens > max_tokens_ || h.state_bytes > std::max<uint64_t>(ram_limit_, (uint64_t)256 << 20)) {
            file_bytes = (uint64_t)st.st_size;
            mtime = mtime_ns(st);
            return Read::beyond;
        }
        tokens.resize(h.n_tokens);
        r = read_all(fd, tokens.data(), tokens.size() * sizeof(llama_token));
        if (r <= 0) return r < 0 ? Read::unavailable : Read::damaged;
        if (hash64(tokens.data(), tokens.size() * sizeof(llama_token), 0x544b) != h.tokens_hash) return Read::damaged;
        if (state) {
            state->resize(h.state_bytes);
            r = read_all(fd, state->data(), state->size());
            if (r <= 0) return r < 0 ? Read::unavailable : Read::damaged;
            if (hash64(state->data(), state->size(), 0x5354) != h.state_hash) return Read::damaged;
        }
    } catch (...) {
        return Read::unavailable;  // out of memory now: the entry may well be fine
    }
    file_bytes = (uint64_t)st.st_size;
    mtime = mtime_ns(st);
    return Read::ok;
}

std::string PromptCache::file_name(const std::vector<llama_token> &tokens) const {
    char name[40];
    std::snprintf(name, sizeof name, "%016" PRIx64 "-%06zu.kv",
                  hash64(tokens.data(), tokens.size() * sizeof(llama_token), 0x4e414d45), tokens.size());
    return name;
}

void PromptCache::scan() {
    Listing listing;
    {
        std::lock_guard<std::mutex> lock(disk_mutex_);
        if (!begin_scan_locked(listing)) return;
    }
    list_directory(listing);
    std::lock_guard<std::mutex> lock(disk_mutex_);
    merge_scan_locked(listing);
}

bool PromptCache::begin_scan_locked(Listing &listing) {
    if (!directory_) return false;
    struct stat st;
    if (::fstat(directory_->fd, &st) != 0) return false;
    if (mtime_ns(st) == dir_mtime_) return false;
    listing.directory = directory_;
    listing.generation = disk_generation_;
    for (const auto &[name, entry] : disk_)
        if (entry.usable) listing.known.insert(name);  // an unusable one is judged again (the bounds change)
    // Last (nothing after it throws): removals from now on are remembered for its merge, which every listing begun
    // here gets.
    listings_.insert(listing.generation);
    // From now on a change (one during the listing too) makes the next scan list again.
    dir_mtime_ = mtime_ns(st);
    return true;
}

void PromptCache::list_entry(Listing &listing, int dir, std::string name) {
    if (is_abandoned_temp(dir, name)) {
        // A writer that died mid-write left this (it is older than any write takes): it counts in no bound, so it
        // goes.
        ::unlinkat(dir, name.c_str(), 0);
        return;
    }
    if (name.size() < 4 || name.compare(name.size() - 3, 3, ".kv") != 0) return;
    if (listing.known.count(name)) {
        listing.still.insert(name);
        return;
    }
    DiskEntry entry;
    int64_t mtime = 0;
    switch (read_entry(dir, name, entry.tokens, nullptr, entry.bytes, mtime)) {
    case Read::ok:
        break;
    case Read::beyond:
        entry.usable = false;  // another instance's to restore; here it only counts in the bound
        entry.tokens.clear();
        break;
    case Read::damaged:
        // Truncated, damaged, or of another format: a cache entry is never worth keeping in doubt. (Counted once: a
        // scan on another thread may have found it too; counted at the merge, so this idle-priority thread never
        // holds ram_mutex_, which the decode thread takes for every lookup.)
        if (::unlinkat(dir, name.c_str(), 0) == 0) listing.discarded++;
        return;
    case Read::unavailable:
        listing.again = true;
        return;
    case Read::gone:
    case Read::foreign:
        return;
    }
    entry.used = mtime;
    listing.found.emplace(std::move(name), std::move(entry));
}

void PromptCache::list_directory(Listing &listing) {
    try {
        // Everything relative to the directory judged at start-up (held by the listing, so its descriptor stays
        // open even if the writer replaces it meanwhile), with a descriptor of its own for the listing
        // (fdopendir() takes it over).
        const int dir = listing.directory->fd;
        int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? ::fdopendir(fd) : nullptr;
        if (!d) {
            if (fd >= 0) ::close(fd);
            return;  // out of descriptors now: next time
        }
        struct Closer {
            DIR *d;
            ~Closer() { ::closedir(d); }
        } closer{d};
        while (struct dirent *e = ::readdir(d)) {
            list_entry(listing, dir, e->d_name);
            if (auto hook = g_during_cache_scan.load(std::memory_order_acquire)) hook(e->d_name);
        }
        listing.complete = true;
    } catch (...) {
        // Out of memory: the listing is partial, and merged not at all (it would drop what it did not reach).
    }
}

void PromptCache::merge_scan_locked(Listing &listing) {
    if (listing.discarded) {
        std::lock_guard<std::mutex> lock(ram_mutex_);
        counters_.discarded += listing.discarded;
        listing.discarded = 0;
    }
    // This listing no longer needs the removals made meanwhile; those no listing still running began before go.
    if (auto it = listings_.find(listing.generation); it != listings_.end()) listings_.erase(it);
    struct Prune {
        PromptCache &cache;
        ~Prune() {
            if (cache.listings_.empty()) {
                cache.removed_.clear();
                return;
            }
            const uint64_t oldest = *cache.listings_.begin();
            for (auto it = cache.removed_.begin(); it != cache.removed_.end();)
                it = it->second <= oldest ? cache.removed_.erase(it) : std::next(it);
        }
    } prune{*this};
    // Not the directory listed any more (it was removed, and the writer made it again), or not listed whole: the
    // index stays as it is, and the next scan lists again.
    if (directory_ != listing.directory || !listing.complete) {
        dir_mtime_ = -1;
        return;
    }
    if (listing.again) dir_mtime_ = -1;
    for (auto it = disk_.begin(); it != disk_.end();) {
        DiskEntry &entry = it->second;
        if (entry.generation > listing.generation) {
            ++it;  // indexed since the listing began (the writer's new entry, another scan's): newer than the listing
            continue;
        }
        auto found = listing.found.find(it->first);
        if (found != listing.found.end()) {  // an unusable one, judged again
            entry = std::move(found->second);
            entry.generation = ++disk_generation_;
            listing.found.erase(found);
            ++it;
        } else if (listing.still.count(it->first)) {
            ++it;
        } else {
            forget_locked(it->first);
            it = disk_.erase(it);  // gone from the directory (or no longer readable)
        }
    }
    for (auto &[name, entry] : listing.found) {
        if (disk_.count(name)) continue;  // indexed since the listing began
        // Indexed and removed again since it was listed (a lookup's scan found it, then it was evicted, replaced or
        // discarded): the listing's copy is out of date, and the file is gone.
        if (auto removed = removed_.find(name); removed != removed_.end() && removed->second > listing.generation)
            continue;
        entry.generation = ++disk_generation_;
        disk_.emplace(name, std::move(entry));
    }
    disk_bytes_ = 0;
    for (const auto &[name, entry] : disk_) disk_bytes_ += entry.bytes;
}

void PromptCache::forget_locked(const std::string &name) {
    if (!listings_.empty()) removed_[name] = ++disk_generation_;
}

void PromptCache::remove_file_locked(const std::string &name) {
    auto it = disk_.find(name);
    if (it == disk_.end()) return;
    if (directory_) ::unlinkat(directory_->fd, name.c_str(), 0);
    disk_bytes_ -= it->second.bytes;
    forget_locked(name);
    disk_.erase(it);
}

void PromptCache::evict_disk_locked() {
    while (disk_bytes_ > disk_limit_ && !disk_.empty()) {
        auto oldest = std::min_element(disk_.begin(), disk_.end(),
                                       [](const auto &a, const auto &b) { return a.second.used < b.second.used; });
        remove_file_locked(oldest->first);
        std::lock_guard<std::mutex> lock(ram_mutex_);
        counters_.disk_evictions++;
    }
}

void PromptCache::hold_locked(const State &state) {
    if (held_[state.get()]++ == 0) held_bytes_ += state->size();
}

void PromptCache::release_locked(const State &state) noexcept {
    auto it = held_.find(state.get());
    if (it == held_.end()) return;
    if (--it->second == 0) {
        held_bytes_ -= state->size();
        held_.erase(it);
    }
}

void PromptCache::evict_ram_locked(size_t incoming) {
    // Least recently used first, but only entries whose going frees memory now: a state a queued write holds too
    // stays in memory until written, so its entry would be lost for nothing (and one more evicted after it).
    // fits_ram_locked() counted those states as staying.
    for (auto it = ram_.begin(); it != ram_.end() && held_bytes_ + incoming > ram_limit_;) {
        auto held = held_.find(it->state.get());
        if (held != held_.end() && held->second > 1) {
            unsigned in_ram = 0;  // (rare: a state held twice; counted without allocating, as eviction must not throw)
            for (const auto &entry : ram_) in_ram += entry.state == it->state ? 1 : 0;
            if (held->second > in_ram) {
                ++it;  // queued for disk too
                continue;
            }
        }
        release_locked(it->state);
        it = ram_.erase(it);
        counters_.evictions++;
    }
}

bool PromptCache::fits_ram_locked(const State &state) const {
    if (state->size() > ram_limit_) return false;
    if (held_.count(state.get())) return true;  // held already (a queued write): it adds nothing
    // What stays however much is evicted: states held by queued writes only.
    std::unordered_map<const std::vector<uint8_t> *, unsigned> in_ram;
    for (const auto &entry : ram_) in_ram[entry.state.get()]++;
    uint64_t floor = held_bytes_;
    for (const auto &[ptr, holders] : in_ram) {
        auto it = held_.find(ptr);
        if (it != held_.end() && it->second == holders) floor -= ptr->size();
    }
    return floor + state->size() <= ram_limit_;
}

bool PromptCache::worth_restoring(size_t covered, size_t entry_tokens, size_t from_slots) {
    if (covered < kMinCacheTokens || covered < from_slots + kMinRestoreGain) return false;
    return 4 * (covered - from_slots) >= entry_tokens;
}

PromptCache::Match PromptCache::find(const std::vector<llama_token> &prompt) noexcept {
    try {
        return find_best(prompt);
    } catch (...) {
        return Match{};  // out of memory: a miss
    }
}

PromptCache::Match PromptCache::find_best(const std::vector<llama_token> &prompt) {
    Match best;
    {
        std::lock_guard<std::mutex> lock(ram_mutex_);
        for (auto it = ram_.begin(); it != ram_.end(); ++it) {
            size_t len = common_prefix(it->tokens, prompt);
            if (len > best.length) {
                best.length = len;
                best.ram = true;
                best.ram_entry = it;
                best.entry_tokens = it->tokens.size();
            }
        }
    }
    if (!dir_.empty()) {
        scan();  // another instance of this model (a reload, a restart) may have written entries
        std::lock_guard<std::mutex> lock(disk_mutex_);
        for (const auto &[name, entry] : disk_) {
            if (!entry.usable) continue;
            size_t len = common_prefix(entry.tokens, prompt);
            if (len > best.length) {
                best = Match{};
                best.length = len;
                best.file = name;
                best.entry_tokens = entry.tokens.size();
            }
        }
    }
    return best;
}

bool PromptCache::take(Match &match, State &state) noexcept {
    if (match.length == 0) return false;
    try {
        if (match.ram) {
            std::lock_guard<std::mutex> lock(ram_mutex_);
            if (match.length >= match.entry_tokens) {
                // Taken whole: the slot holds it now, and gives it back when it is given to another conversation
                // (or restore_refused() puts it back).
                match.tokens = match.ram_entry->tokens;
                state = match.ram_entry->state;
                release_locked(match.ram_entry->state);
                ram_.erase(match.ram_entry);
            } else {
                state = match.ram_entry->state;
            }
            return true;
        }
        std::vector<llama_token> tokens;
        auto data = std::make_shared<std::vector<uint8_t>>();
        uint64_t bytes = 0;
        int64_t mtime = 0;
        const std::string path = dir_ + "/" + match.file;  // for messages
        const auto dir = directory_handle();
        if (!dir) return false;
        Read read = read_entry(dir->fd, match.file, tokens, data.get(), bytes, mtime);
        std::lock_guard<std::mutex> lock(disk_mutex_);
        auto it = disk_.find(match.file);
        if (read == Read::ok && (it == disk_.end() || it->second.tokens != tokens)) {
            // Replaced since it was found (it holds other tokens than the match was made on): not for this prompt.
            // Evicted meanwhile by the writer: not known any more, so not used either.
            read = it == disk_.end() ? Read::unavailable : Read::damaged;
        }
        switch (read) {
        case Read::ok:
            break;
        case Read::damaged: {
            remove_file_locked(match.file);
            std::lock_guard<std::mutex> counters(ram_mutex_);
            counters_.discarded++;
            log_line(AFM_LOG_WARNING, instance_ + ": prompt cache entry " + path + " does not verify; deleted");
            return false;
        }
        case Read::beyond:
            if (it != disk_.end()) {
                it->second.usable = false;
                it->second.tokens.clear();
            }
            return false;
        case Read::gone:
        case Read::foreign:
            if (it != disk_.end()) {
                disk_bytes_ -= it->second.bytes;
                forget_locked(it->first);
                disk_.erase(it);
            }
            return false;
        case Read::unavailable:
            return false;  // not now (out of descriptors or memory): it stays for later
        }
        ::utimensat(dir->fd, match.file.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // recently used: evicted last
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        it->second.used = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
        state = std::move(data);
        return true;
    } catch (...) {
        state.reset();
        return false;  // out of memory: a miss
    }
}

void PromptCache::restore_refused(Match &match, State state) noexcept {
    if (!match.ram || match.tokens.empty() || !state) return;  // a disk entry stays where it is; a partial one too
    save(match.tokens, std::move(state), true);                // a RAM entry taken whole goes back
}

void PromptCache::discard(const Match &match) {
    if (match.ram) return;  // taken whole it is gone already; a partial one stays for a later prefix
    std::lock_guard<std::mutex> lock(disk_mutex_);
    remove_file_locked(match.file);
    std::lock_guard<std::mutex> counters(ram_mutex_);
    counters_.discarded++;
}

bool PromptCache::needs(const std::vector<llama_token> &tokens, bool ram) const {
    if (ram && ram_limit_ > 0) {
        std::lock_guard<std::mutex> lock(ram_mutex_);
        bool covered = false;
        for (const auto &entry : ram_) covered = covered || is_prefix(tokens, entry.tokens);
        if (!covered) return true;
    }
    if (!dir_.empty()) {
        std::lock_guard<std::mutex> lock(disk_mutex_);
        return !on_disk_locked(tokens);
    }
    return false;
}

bool PromptCache::on_disk_locked(const std::vector<llama_token> &tokens) const {
    for (const auto &[name, entry] : disk_)
        if (entry.usable && is_prefix(tokens, entry.tokens)) return true;
    for (const auto &[name, queued] : pending_)
        if (is_prefix(tokens, queued)) return true;  // on its way
    return false;
}

void PromptCache::save(const std::vector<llama_token> &tokens, State state, bool ram) {
    try {
        if (!state || state->empty() || tokens.empty()) return;
        const size_t size = state->size();
        if (ram && ram_limit_ > 0) {
            std::lock_guard<std::mutex> lock(ram_mutex_);
            bool covered = false;
            for (const auto &entry : ram_) covered = covered || is_prefix(tokens, entry.tokens);
            // Entries this one extends go only once it is in (it serves them too); one that cannot be kept (larger
            // than the bound, or no room however much is evicted: queued writes hold the rest) leaves them be.
            bool kept = covered;
            if (!covered && fits_ram_locked(state)) {
                ram_.push_back(RamEntry{tokens, state});
                try {
                    hold_locked(state);
                } catch (...) {
                    ram_.pop_back();
                    throw;
                }
                kept = true;
            }
            if (kept) {
                const RamEntry *self = covered ? nullptr : &ram_.back();
                for (auto it = ram_.begin(); it != ram_.end();) {
                    if (&*it != self && it->tokens.size() < tokens.size() && is_prefix(it->tokens, tokens)) {
                        release_locked(it->state);
                        it = ram_.erase(it);
                    } else {
                        ++it;
                    }
                }
                if (!covered) evict_ram_locked(0);  // the new entry is last: what fits_ram_locked() counted goes first
            }
        }
        if (!dir_.empty()) {
            const std::string name = file_name(tokens);
            {
                std::lock_guard<std::mutex> lock(disk_mutex_);
                if (on_disk_locked(tokens)) return;  // on disk already, or queued
                pending_.emplace(name, tokens);
            }
            bool queued = false;
            try {
                // Queued states count in the RAM bound (256 MiB of queue when there is no RAM tier), once: a state
                // in RAM and queued is one block of memory.
                std::lock_guard<std::mutex> lock(ram_mutex_);
                const size_t bound = ram_limit_ > 0 ? ram_limit_ : (size_t)256 << 20;
                const size_t incoming = held_.count(state.get()) ? 0 : size;
                if (ram_limit_ > 0 && incoming > 0) evict_ram_locked(incoming);
                if (size > disk_limit_ || held_bytes_ + incoming > bound) {
                    counters_.dropped_writes++;
                } else {
                    hold_locked(state);
                    try {
                        std::lock_guard<std::mutex> wlock(write_mutex_);
                        writes_.push_back(Write{tokens, state, name});
                        queued = true;
                    } catch (...) {
                        release_locked(state);
                    }
                }
            } catch (...) {
            }
            if (!queued) {
                std::lock_guard<std::mutex> lock(disk_mutex_);  // (not under ram_mutex_: disk_mutex_ comes first)
                pending_.erase(name);
                return;
            }
            // Only the writer waits on write_cv_ (flush() has its own): one wake-up reaches it.
            write_cv_.notify_one();
        }
    } catch (...) {
        // Out of memory while keeping a state: it is not kept (the cache is an optimisation).
    }
}

bool PromptCache::writer_priority(bool idle) noexcept {
    // Idle: SCHED_IDLE, so the thread runs only on a core nothing else wants. llama.cpp's threads meet at a barrier
    // after every step, so a writer that takes a core from one of them for the few milliseconds of hashing and
    // copying a state stalls the whole step: with the disk tier on, every answer queues a write, and under
    // interleaved conversations second-turn TTFT was 0.124-0.133 of the first turn's against 0.105 with the tier off
    // (scripts/bench-interleaved, 16 conversations, Threads=2 on 2 cores). The runner's nice value (-20 for the
    // local backend) would make the writer compete harder still; SCHED_IDLE ignores it.
    // Only while it holds no lock (the decode thread takes the same ones: a starved holder would stall it) and
    // never once the cache is being destroyed (the destructor waits for the queue: a starved writer would hold up
    // an unload or a reload for minutes while another instance decodes).
    if (idle && stopping_.load()) idle = false;
    sched_param param{};
    param.sched_priority = 0;
    bool done = pthread_setschedparam(pthread_self(), idle ? SCHED_IDLE : SCHED_OTHER, &param) == 0;
    // Its I/O likewise (IOPRIO_WHO_PROCESS = 1, 0 = this thread; class idle = 3, best effort = 2 at level 4).
    ::syscall(SYS_ioprio_set, 1, 0, idle ? 3 << 13 : (2 << 13) | 4);
    if (idle && stopping_.load()) return writer_priority(false);  // the destructor began meanwhile
    return idle && done;
}

void PromptCache::writer_loop() {
    for (;;) {
        Write write;
        {
            std::unique_lock<std::mutex> lock(write_mutex_);
            write_cv_.wait(lock, [&] { return stopping_ || !writes_.empty(); });
            if (writes_.empty()) return;  // stopping, and nothing left to write
            write = std::move(writes_.front());
            writes_.pop_front();
            writing_ = true;
        }
        try {
            write_file(write);
        } catch (...) {
        }
        {
            std::lock_guard<std::mutex> lock(disk_mutex_);
            pending_.erase(write.name);  // written (indexed) or dropped: no longer on its way
        }
        {
            std::lock_guard<std::mutex> lock(ram_mutex_);
            release_locked(write.state);
        }
        write.state.reset();
        {
            std::lock_guard<std::mutex> lock(write_mutex_);
            writing_ = false;
        }
        flush_cv_.notify_all();
    }
}

void PromptCache::write_file(const Write &write) {
    auto dir = directory_handle();  // (takes disk_mutex_: at the normal priority)
    if (!dir) return;
    if (writer_priority(true)) writes_idle_.fetch_add(1);  // hashing and writing the state hold no lock
    struct Normal {  // (also when something below throws)
        PromptCache &cache;
        ~Normal() { cache.writer_priority(false); }
    } normal{*this};
    const auto &tokens = write.tokens;
    const auto &state = *write.state;
    FileHeader h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.format = kFormat;
    h.header_size = sizeof h;
    h.fingerprint = fingerprint_;
    h.n_tokens = tokens.size();
    h.state_bytes = state.size();
    h.tokens_hash = hash64(tokens.data(), tokens.size() * sizeof(llama_token), 0x544b);
    h.state_hash = hash64(state.data(), state.size(), 0x5354);
    h.header_hash = prompt_cache_header_hash(h);
    const std::string name = file_name(tokens);
    const std::string path = dir_ + "/" + name;  // for messages
    char suffix[48];
    std::snprintf(suffix, sizeof suffix, ".%d.%p.tmp", (int)::getpid(), (const void *)&write);
    const std::string temp = name + suffix;
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::openat(dir->fd, temp.c_str(), flags, 0600);
    if (fd < 0 && errno == ENOENT) {
        // The directory was deleted while we run (clearing the cache by hand is allowed): it is made again, and
        // judged again as at start-up (whatever is at its path now may be another's).
        writer_priority(false);  // before any lock
        std::string why;
        if (auto fresh = open_directory(why)) {
            dir = fresh;
            {
                std::lock_guard<std::mutex> lock(disk_mutex_);
                directory_ = std::move(fresh);
                dir_mtime_ = -1;
            }  // (the rest of this write runs at the normal priority: a rare path, counted once as idle)
        } else {
            log_line(AFM_LOG_WARNING, instance_ + ": prompt cache directory " + dir_ + " removed, and refused when made " +
                                          "again: " + why + "; nothing is written to it");
            std::lock_guard<std::mutex> lock(ram_mutex_);
            counters_.dropped_writes++;
            return;
        }
        fd = ::openat(dir->fd, temp.c_str(), flags, 0600);
    }
    bool ok = fd >= 0 && write_all(fd, &h, sizeof h) &&
              write_all(fd, tokens.data(), tokens.size() * sizeof(llama_token)) &&
              write_all(fd, state.data(), state.size());
    struct stat st;
    int64_t written = ok && ::fstat(fd, &st) == 0 ? mtime_ns(st) : 0;
    if (fd >= 0 && ::close(fd) != 0) ok = false;
    // Written whole under a temporary name, then renamed: a reader sees a complete file or none. (A crash of the
    // machine may still leave a short or damaged file behind: the checksums catch it.)
    if (!ok || ::renameat(dir->fd, temp.c_str(), dir->fd, name.c_str()) != 0) {
        const int error = errno;
        ::unlinkat(dir->fd, temp.c_str(), 0);
        writer_priority(false);  // before any lock
        std::lock_guard<std::mutex> lock(ram_mutex_);
        counters_.dropped_writes++;
        log_line(AFM_LOG_WARNING, instance_ + ": cannot write the prompt cache entry " + path + " (" +
                                      std::strerror(error) + ")");
        return;
    }
    writer_priority(false);  // before any lock
    // Another instance of this model (a generation draining after a reload, a second daemon) writes into the same
    // directory: its files count in the bound too, so the index is brought up to date before evicting. A full
    // scan: the directory's mtime ticks coarsely (a few ms), so two renames in one tick would look like none. The
    // listing (the whole directory, and the header of every entry not indexed yet) holds no lock, and runs at the
    // idle priority like the write: the decode thread looks entries up meanwhile.
    Listing listing;
    bool listed;
    {
        std::lock_guard<std::mutex> lock(disk_mutex_);
        dir_mtime_ = -1;
        listed = begin_scan_locked(listing);
    }
    if (listed) {
        writer_priority(true);
        list_directory(listing);
        writer_priority(false);  // before any lock
    }
    std::lock_guard<std::mutex> lock(disk_mutex_);
    if (listed) merge_scan_locked(listing);
    // Entries this one extends are of no further use: it serves their prefixes too.
    std::vector<std::string> obsolete;
    for (const auto &[other, entry] : disk_)
        if (other != name && entry.usable && is_prefix(entry.tokens, tokens)) obsolete.push_back(other);
    for (const auto &other : obsolete) remove_file_locked(other);
    auto it = disk_.find(name);
    if (it != disk_.end()) disk_bytes_ -= it->second.bytes;
    DiskEntry entry;
    entry.tokens = tokens;
    entry.bytes = sizeof h + tokens.size() * sizeof(llama_token) + state.size();
    entry.used = written;
    entry.generation = ++disk_generation_;
    disk_bytes_ += entry.bytes;
    disk_[name] = std::move(entry);
    evict_disk_locked();
    {
        std::lock_guard<std::mutex> counters(ram_mutex_);
        counters_.disk_writes++;
    }
}

void PromptCache::flush() {
    std::unique_lock<std::mutex> lock(write_mutex_);
    flush_cv_.wait(lock, [&] { return writes_.empty() && !writing_; });
}

void PromptCache::count_hit(bool disk, size_t tokens) {
    std::lock_guard<std::mutex> lock(ram_mutex_);
    counters_.hits++;
    if (disk) counters_.disk_hits++;
    counters_.restored_tokens += tokens;
}

void PromptCache::count_miss() {
    std::lock_guard<std::mutex> lock(ram_mutex_);
    counters_.misses++;
}

PromptCacheStats PromptCache::stats() const {
    PromptCacheStats s;
    {
        std::lock_guard<std::mutex> lock(ram_mutex_);
        s = counters_;
        s.ram_bytes = held_bytes_;
        s.ram_entries = ram_.size();
    }
    std::lock_guard<std::mutex> lock(disk_mutex_);
    s.disk_bytes = disk_bytes_;
    s.disk_entries = disk_.size();
    return s;
}

}  // namespace afm_local
