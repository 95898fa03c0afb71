// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation

/// Environment for a child process whose memory a test measures, in a sanitizer build.
public enum SanitizerEnvironment {
    /// Under AddressSanitizer, the child's `ASAN_OPTIONS` (inherited ones kept) with no quarantine: freed memory
    /// otherwise waits there (256 MiB by default) before it is reused, so resident memory would grow with every
    /// free and a bound on it would measure the quarantine, not the program. Empty in every other build.
    public static func withoutQuarantine() -> [String: String] {
        guard Sanitizer.current == .address else { return [:] }
        let inherited = ProcessInfo.processInfo.environment["ASAN_OPTIONS"].map { $0 + ":" } ?? ""
        return ["ASAN_OPTIONS": inherited + "quarantine_size_mb=0"]
    }
}
