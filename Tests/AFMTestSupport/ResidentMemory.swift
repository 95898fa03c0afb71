// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation

/// Resident memory of processes, for the tests that check memory is returned (model swaps, runner swaps).
public enum ResidentMemory {
    /// `VmRSS` of `pid` in KiB (0 when the process is gone).
    public static func kibibytes(of pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.filter(\.isNumber)) ?? 0
    }

    /// Whether resident memory measures leaks in this build. Not under a sanitizer: its allocator keeps freed
    /// memory (AddressSanitizer's quarantine, 256 MiB by default, and per-thread caches) and its shadow memory grows
    /// with what the process touches. Measured: afmd and its runner grew 19 % over ten runner swaps under ASan
    /// even without the quarantine, 15 % under TSan, and afmd 260 MiB over ten local model swaps under ASan (its
    /// quarantine filling), with no leak. There LeakSanitizer's check at the process's exit stands in (ASan).
    public static var measuresLeaks: Bool { Sanitizer.current == nil }
}
