// SPDX-License-Identifier: Apache-2.0
// prompt_cache.h: the prompt cache beyond the sequence slots (prompt_cache.cpp). Internal to the local backend.
#pragma once

#include "llama.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace afm_local {

/** A 64-bit hash, 8 bytes at a time (checksums of cache entries, the model's fingerprint). Not cryptographic: it
 *  detects damage, not tampering (the cache directory belongs to the daemon's user). */
uint64_t hash64(const void *data, size_t size, uint64_t seed);

/** A fingerprint of the model file: its size and a hash of its first and last MiB and 16 samples between them
 *  (the weights differ there between any two models; hashing a many-GiB file whole would slow every load).
 *  0 when the file cannot be read. */
uint64_t model_fingerprint(const std::string &path);

/** The longest context an instance may have (ContextTokens' upper bound): a file claiming more tokens was written by
 *  no instance, so it is damage. */
constexpr uint64_t kMaxEntryTokens = (uint64_t)1 << 20;

/** The on-disk entry: this header, the tokens (int32 each), the state. Native byte order (the magic would not match
 *  otherwise). Declared here so the tests can craft entries the way a damaged or hostile file would look. */
struct PromptCacheFileHeader {
    char magic[8];
    uint32_t format;
    uint32_t header_size;
    uint64_t fingerprint;   // model fingerprint and state layout (the directory's key)
    uint64_t n_tokens;
    uint64_t state_bytes;
    uint64_t tokens_hash;
    uint64_t state_hash;
    uint64_t header_hash;   // of every field above: prompt_cache_header_hash()
};
static_assert(sizeof(PromptCacheFileHeader) == 64, "the header is 64 bytes");
uint64_t prompt_cache_header_hash(const PromptCacheFileHeader &header);

/** Test hook (tests/unit_tests.cpp): when set, called with every name a scan of the cache directory lists, once the
 *  listing has handled it (read a new entry's header, deleted a damaged one), so a test can hold a scan in the middle
 *  of its listing. Never set in the plugin. */
extern std::atomic<void (*)(const char *name)> g_during_cache_scan;

/** Counters of a prompt cache, for `describe` (and so /status, `afmctl top`, metrics). */
struct PromptCacheStats {
    uint64_t ram_bytes = 0, ram_entries = 0, ram_limit = 0;
    uint64_t disk_bytes = 0, disk_entries = 0, disk_limit = 0;
    uint64_t hits = 0, disk_hits = 0, misses = 0, evictions = 0, disk_evictions = 0;
    uint64_t disk_writes = 0, discarded = 0, dropped_writes = 0;
    uint64_t restored_tokens = 0;
    bool disk = false;
};

/**
 * Saved KV states of sequences, keyed by their tokens (positions 0..n-1), so a conversation that lost its slot
 * resumes from its longest cached prefix instead of being recomputed (llama.cpp's per-sequence state API does the
 * saving and restoring; the engine calls it). Two tiers:
 *
 *  - **RAM**, bounded by `ram_limit` bytes (0: off), least recently used first out. An entry that a request takes
 *    whole leaves the cache (the slot holds it now; it comes back when the slot is given away again).
 *  - **Disk** (optional): one file per entry in `<dir>/<model fingerprint>-<layout>/`, written by a background
 *    thread, bounded by `disk_limit` bytes, oldest used first out. A file has a checksummed header, the tokens and
 *    the state, each with its own checksum; anything that does not verify is deleted, never loaded. An entry this
 *    instance cannot hold (longer than its context, larger than its memory allows) stays for one that can; a file
 *    that cannot be read now (out of descriptors or memory) is a miss. Another instance of the same model (a
 *    restart, a reload) finds the files; another model has another directory. Entries are restored into the
 *    model's memory, so only root and the daemon's user may be able to put one there: every directory from / down
 *    to the cache's must be owned by root or the daemon's user and writable by no one else (one writable by others
 *    only when sticky, as /tmp: they cannot rename or remove ours), the cache's own directory the daemon user's, and
 *    an entry a regular file the daemon's user owns; otherwise the disk tier is off (logged) or the file foreign.
 *    The directory is opened once, component by component (each judged on its descriptor), and held: every file
 *    operation is relative to it (openat, renameat, unlinkat), so nothing swapped in at its path afterwards is used.
 *
 * Threads: the decode thread calls find/take/save; the writer thread writes files; stats() from any thread.
 */
class PromptCache {
public:
    /** `layout` names what a state's shape depends on beyond the model (KV streams); part of the directory name.
     *  `max_tokens`: the longest sequence a slot holds (its context); a file claiming more is never read. */
    PromptCache(size_t ram_limit, const std::string &dir, size_t disk_limit, uint64_t model_fingerprint,
                const std::string &layout, const std::string &instance, size_t max_tokens);
    ~PromptCache();
    PromptCache(const PromptCache &) = delete;
    PromptCache &operator=(const PromptCache &) = delete;

    bool ram_enabled() const { return ram_limit_ > 0; }
    bool disk_enabled() const { return !dir_.empty(); }
    /** How many state writes the disk writer began at SCHED_IDLE (it never takes a core from decoding). */
    uint64_t writes_at_idle_priority() const { return writes_idle_.load(); }
    /** The directory of this model's entries ("" without a disk tier). For messages and tests: the cache itself
     *  uses the directory it opened, whatever this path names later. */
    const std::string &directory() const { return dir_; }

    /** A saved state (read-only once saved; shared by the RAM tier, the writer's queue and a restore). */
    using State = std::shared_ptr<const std::vector<uint8_t>>;

    struct RamEntry {
        std::vector<llama_token> tokens;
        State state;  // shared with a queued disk write
    };

    /** The least a restore must save, in tokens: shorter prefixes are recomputed in a few milliseconds. */
    static constexpr size_t kMinRestoreGain = 16;
    /** The shortest sequence worth keeping. */
    static constexpr size_t kMinCacheTokens = 32;

    /** The best entry for `prompt`: the longest common prefix (RAM first at equal length). */
    struct Match {
        size_t length = 0;           // tokens of the prompt it covers
        bool ram = false;
        std::list<RamEntry>::iterator ram_entry;
        std::string file;            // disk entry (file name), when !ram
        size_t entry_tokens = 0;     // the entry's whole length
        std::vector<llama_token> tokens;  // a RAM entry taken whole: its tokens (restore_refused() puts it back)
    };
    /** [decode thread] The entry sharing the longest prefix with `prompt` (length 0: none; also when out of
     *  memory). */
    Match find(const std::vector<llama_token> &prompt) noexcept;

    /** Whether restoring an entry of `entry_tokens` tokens that covers `covered` tokens of a prompt is worth it when
     *  the slots already offer `from_slots` of them. A restore copies the entry's whole state on the decode thread
     *  (every other conversation waits; a long entry of a large model is hundreds of MiB, from disk maybe seconds),
     *  while the tokens it saves would be computed in batches alongside the others: it must save at least
     *  kMinRestoreGain tokens and a quarter of what it copies. */
    static bool worth_restoring(size_t covered, size_t entry_tokens, size_t from_slots);

    /** [decode thread] The state of a match: out of RAM (the entry leaves the cache when it is taken whole: the
     *  slot holds it now), or read and verified from disk (an entry that does not verify is deleted, never
     *  loaded; one that cannot be read now stays). False: nothing usable (a miss). Never throws. */
    bool take(Match &match, State &state) noexcept;

    /** [decode thread] llama.cpp refused to restore a taken state for want of room (it is not damaged): the entry
     *  stays in the cache (a RAM entry taken whole goes back). */
    void restore_refused(Match &match, State state) noexcept;

    /** [decode thread] Whether saving `tokens` would add anything: a tier that is on (RAM only with `ram`) holds
     *  neither them nor an entry they are a prefix of (on disk, or queued for the writer). Lets the engine skip copying
     *  a state out of llama.cpp. */
    bool needs(const std::vector<llama_token> &tokens, bool ram) const;

    /** [decode thread] Keeps a state: in RAM (when `ram`), and on disk (when the disk tier is on and it is not
     *  there yet). Entries that are a prefix of `tokens` are dropped: this one serves them too. Never throws; a
     *  state that does not fit is not kept. */
    void save(const std::vector<llama_token> &tokens, State state, bool ram);

    /** [decode thread] A request consulted the cache: hit (restored `tokens` tokens; from disk or RAM) or miss. */
    void count_hit(bool disk, size_t tokens);
    void count_miss();
    /** [decode thread] A state that did not restore (llama.cpp refused it): forget it, and its file. */
    void discard(const Match &match);

    /** [decode thread, once] The size of a sequence's state: `base` bytes empty, `per_token` more per token
     *  (measured on the warm-up decode). A file's state may be at most twice that for its token count, so a
     *  damaged or crafted length field never makes the backend allocate more than a real entry would need.
     *  Until it is set, the bound is the larger of the RAM bound and 256 MiB. */
    void set_state_size(uint64_t base, uint64_t per_token);

    /** [any thread] Waits until every queued disk write is done (tests; shutdown does it too). */
    void flush();

    PromptCacheStats stats() const;

private:
    friend struct PromptCacheTestAccess;  // tests/unit_tests.cpp: holds ram_mutex_, runs scan()
    /** The open directory of this model's entries (closed when the last user lets go: the writer may replace it
     *  with a new one while the decode thread reads through the old). */
    struct Directory {
        int fd = -1;
        Directory() = default;
        Directory(const Directory &) = delete;
        Directory &operator=(const Directory &) = delete;
        ~Directory();
    };
    struct DiskEntry {
        std::vector<llama_token> tokens;
        uint64_t bytes = 0;
        int64_t used = 0;     // mtime (ns): the least recently used goes first
        bool usable = true;   // false: valid, but beyond this instance (never offered; counted in the bound)
        uint64_t generation = 0;  // disk_generation_ when it was indexed: a scan begun before leaves it be
    };
    /** A scan of the directory: begun under disk_mutex_ (what the index knew), listed without it (reading a large
     *  directory and every new entry's header must not hold up the decode thread's lookups), merged under it. */
    struct Listing {
        std::shared_ptr<const Directory> directory;  // the one listed (held: its descriptor stays open)
        uint64_t generation = 0;                     // disk_generation_ when it began
        std::set<std::string> known;                 // usable entries indexed then: listed, not read again
        std::set<std::string> still;                 // those of them still in the directory
        std::map<std::string, DiskEntry> found;      // entries read: new ones, and unusable ones judged again
        bool complete = false;                       // listed to the end
        bool again = false;                          // an entry could not be read now: scan again next time
        uint64_t discarded = 0;                      // damaged entries it deleted: counted at the merge (the
                                                     // listing runs at the idle priority: it takes no lock)
    };
    struct Write {
        std::vector<llama_token> tokens;
        State state;
        std::string name;  // file_name(tokens): its key in pending_
    };
    /** What reading an entry file found. */
    enum class Read {
        ok,
        damaged,      // does not verify: deleted
        beyond,       // valid, but more than this instance holds: kept, not offered
        unavailable,  // cannot be read now (open or read failed, out of memory): kept, a miss
        gone,         // no such file
        foreign,      // not a regular file: left alone, not indexed
    };

    Match find_best(const std::vector<llama_token> &prompt);  // find() but may throw
    void writer_loop();
    // The writer: SCHED_IDLE (idle) or normal (holding locks, stopping); whether it is idle now.
    bool writer_priority(bool idle) noexcept;
    void write_file(const Write &write);
    bool on_disk_locked(const std::vector<llama_token> &tokens) const;  // disk_mutex_ held: on disk or queued
    void scan();                        // no lock held: adds files not in the index, drops missing ones
    bool begin_scan_locked(Listing &listing);  // disk_mutex_ held: whether the directory changed since the last scan
    void list_directory(Listing &listing);     // no lock held
    void list_entry(Listing &listing, int dir, std::string name);  // no lock held: one name of the listing
    void merge_scan_locked(Listing &listing);  // disk_mutex_ held
    void evict_disk_locked();           // disk_mutex_ held
    void remove_file_locked(const std::string &name);
    // disk_mutex_ held: `name` leaves the index; while a listing runs, remembered (removed_), so that its merge does
    // not add back what it listed before the removal.
    void forget_locked(const std::string &name);
    void evict_ram_locked(size_t incoming);  // ram_mutex_ held: makes room for `incoming` bytes
    // ram_mutex_ held: whether `state` can be kept in RAM, evicting every entry if need be (queued writes stay).
    bool fits_ram_locked(const State &state) const;
    std::string file_name(const std::vector<llama_token> &tokens) const;  // "<token hash>-<count>.kv"
    uint64_t max_state_bytes(uint64_t n_tokens) const;  // the largest state a file of n_tokens may hold
    Read read_entry(int dir, const std::string &name, std::vector<llama_token> &tokens, std::vector<uint8_t> *state,
                    uint64_t &file_bytes, int64_t &mtime) const noexcept;
    // Opens (making what is missing) root_ and this model's directory in it, judging every directory on the way;
    // nullptr with `why` when one may not be trusted.
    std::shared_ptr<const Directory> open_directory(std::string &why) const;
    std::shared_ptr<const Directory> directory_handle() const;  // the current one (takes disk_mutex_)
    // ram_mutex_ held: a RAM entry or a queued write holds `state` (counted once however many hold it) / let go.
    void hold_locked(const State &state);
    void release_locked(const State &state) noexcept;

    const size_t ram_limit_;
    const size_t disk_limit_;
    std::string root_;                  // PromptCacheDir
    std::string name_;                  // this model's directory in it ("<fingerprint>-<layout>")
    std::string dir_;                   // root_/name_ ("" without a disk tier)
    uint64_t fingerprint_ = 0;          // of the model and the state layout: in every file's header
    const std::string instance_;
    const size_t max_tokens_;
    std::atomic<uint64_t> state_base_{0}, state_per_token_{0};  // set_state_size(); 0: not measured

    mutable std::mutex ram_mutex_;      // guards ram_, held_, held_bytes_ and the counters
    std::list<RamEntry> ram_;           // least recently used first
    // The states in memory (RAM entries and queued writes; one state may be both): holders per state, and their
    // bytes, counted once each. This is what the RAM bound limits and what ram_bytes reports.
    std::unordered_map<const std::vector<uint8_t> *, unsigned> held_;
    uint64_t held_bytes_ = 0;
    PromptCacheStats counters_;

    mutable std::mutex disk_mutex_;     // guards directory_, disk_, pending_, disk_bytes_, dir_mtime_, disk_generation_
    std::shared_ptr<const Directory> directory_;  // set when the disk tier is on
    std::map<std::string, DiskEntry> disk_;
    // Entries queued for the writer and not written yet (file name -> tokens): needs() and save() count them as on
    // disk, so one state is not copied out of llama.cpp and queued twice.
    std::map<std::string, std::vector<llama_token>> pending_;
    uint64_t disk_bytes_ = 0;
    int64_t dir_mtime_ = -1;
    uint64_t disk_generation_ = 0;      // counts what was indexed or removed (DiskEntry::generation, removed_)
    std::multiset<uint64_t> listings_;  // the generations of the listings begun and not merged yet
    std::map<std::string, uint64_t> removed_;  // names that left the index while a listing ran -> generation then

    std::mutex write_mutex_;
    std::condition_variable write_cv_;  // the writer waits for work on it
    std::condition_variable flush_cv_;  // flush() waits for the writer on it
    std::deque<Write> writes_;          // guarded by write_mutex_
    bool writing_ = false;              // guarded by write_mutex_: the writer holds one
    // Set under write_mutex_ (the writer's wait reads it there), read without it by writer_priority().
    std::atomic<bool> stopping_{false};
    std::thread writer_;
    std::atomic<uint64_t> writes_idle_{0};  // writes begun at SCHED_IDLE
};

}  // namespace afm_local
