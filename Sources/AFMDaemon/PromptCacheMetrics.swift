// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMResponses

/// The `afm_prompt_cache_*` families from the `prompt_cache` object a backend's describe document carries (the
/// local backend's saved sequence states; /status and `afmctl top` show the same object). The counters belong to
/// the backend's active generation: a reload starts them again from 0, which Prometheus reads as a reset.
enum PromptCacheMetrics {
    /// One family: how its sample is read from a backend's `prompt_cache` counts (`read(key)`), per tier (`ram`,
    /// `disk`: `tier` is set) or once per backend (`tier` is nil).
    private struct Family: Sendable {
        let name: String
        let help: String
        let type: String
        let perTier: Bool
        let value: @Sendable (_ read: (String) -> Double, _ tier: String?) -> Double
    }

    private static let families: [Family] = [
        Family(
            name: "afm_prompt_cache_bytes", help: "Bytes of saved sequence states in the prompt cache, per tier.", type: "gauge",
            perTier: true, value: { read, tier in read("\(tier ?? "")_bytes") }),
        Family(
            name: "afm_prompt_cache_entries", help: "Saved sequence states in the prompt cache, per tier.", type: "gauge",
            perTier: true, value: { read, tier in read("\(tier ?? "")_entries") }),
        Family(
            name: "afm_prompt_cache_limit_bytes", help: "The prompt cache's bound per tier (PromptCacheMiB, PromptCacheDiskMiB; 0: off).",
            type: "gauge", perTier: true, value: { read, tier in read("\(tier ?? "")_limit_bytes") }),
        // `hits` counts both tiers; `disk_hits` those restored from disk.
        Family(
            name: "afm_prompt_cache_hits_total", help: "Requests that restored a saved state, by the tier it came from.", type: "counter",
            perTier: true, value: { read, tier in tier == "disk" ? read("disk_hits") : max(0, read("hits") - read("disk_hits")) }),
        Family(
            name: "afm_prompt_cache_misses_total", help: "Requests that consulted the prompt cache and found nothing usable.",
            type: "counter", perTier: false, value: { read, _ in read("misses") }),
        Family(
            name: "afm_prompt_cache_evictions_total", help: "Entries evicted to keep the prompt cache within its bound, per tier.",
            type: "counter", perTier: true, value: { read, tier in read(tier == "disk" ? "disk_evictions" : "evictions") }),
        Family(
            name: "afm_prompt_cache_restored_tokens_total", help: "Prompt tokens restored from the prompt cache instead of computed.",
            type: "counter", perTier: false, value: { read, _ in read("restored_tokens") }),
        Family(
            name: "afm_prompt_cache_discarded_total", help: "Prompt cache entries deleted because they did not verify (damaged, truncated).",
            type: "counter", perTier: false, value: { read, _ in read("discarded") }),
        Family(
            name: "afm_prompt_cache_disk_writes_total", help: "Entries written to the prompt cache's disk tier.", type: "counter",
            perTier: false, value: { read, _ in read("disk_writes") }),
        Family(
            name: "afm_prompt_cache_dropped_writes_total",
            help: "States not written to the disk tier (no room in the queue, a write error).", type: "counter", perTier: false,
            value: { read, _ in read("dropped_writes") }),
    ]

    /// The families with one sample per backend that reports a prompt cache (per tier where the family has tiers),
    /// backends in id order; none when no backend has a prompt cache.
    static func gauges(_ statuses: [BackendStatus]) -> [ServingMetrics.Gauge] {
        let caches = statuses.sorted(by: { $0.id < $1.id }).compactMap { status in
            status.details["prompt_cache"]?.objectValue.map { (id: status.id, cache: $0) }
        }
        if caches.isEmpty { return [] }
        return families.map { family in
            var samples: [(labels: [(String, String)], value: Double)] = []
            for (id, cache) in caches {
                let read = { (key: String) in cache[key]?.numberValue?.doubleValue ?? 0 }
                if family.perTier {
                    for tier in ["ram", "disk"] { samples.append(([("backend", id), ("tier", tier)], family.value(read, tier))) }
                } else {
                    samples.append(([("backend", id)], family.value(read, nil)))
                }
            }
            return ServingMetrics.Gauge(name: family.name, help: family.help, type: family.type, samples: samples)
        }
    }
}
