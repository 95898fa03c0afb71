// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// The sanitizer runtime this process carries, if any (`make test-asan` and `make test-tsan` build everything with
/// one; release and ordinary builds with none).
///
/// Why it is detected at run time rather than by a build flag: whatever is linked against a sanitizer runtime
/// (a `swift build --sanitize=…` of any of the package's programs, a C host linked with `-fsanitize=…`) gets the
/// right answer with no flag to forget. The runtimes export their initialization entry points, which are looked
/// up with `dlsym` in the global scope.
public enum Sanitizer: String, Sendable {
    /// AddressSanitizer (with LeakSanitizer): reserves terabytes of address space for its shadow memory at start.
    case address
    /// ThreadSanitizer: likewise reserves terabytes of address space for its shadow memory.
    case thread

    /// The sanitizer this process runs under, or nil.
    public static let current: Sanitizer? = {
        // `nil` is RTLD_DEFAULT: the executable, where the runtimes are linked statically, and every loaded library.
        if dlsym(nil, "__asan_init") != nil { return .address }
        if dlsym(nil, "__tsan_init") != nil { return .thread }
        return nil
    }()

    /// The name in `swift build --sanitize=` and `clang -fsanitize=`.
    public var flag: String { rawValue }

    /// How many times longer work takes under this sanitizer, for a deadline that stands for a backend's speed
    /// rather than for a defect (afm-backend-check's concurrency budget, say), so that an instrumented run keeps
    /// the deadline's meaning. Measured here: the whole Swift suite's tests took 1,224 s under ThreadSanitizer and
    /// 893 s under AddressSanitizer against 618 s plain (2.0× and 1.4×, on a quiet machine), and under TSan on a
    /// loaded one only 40–84 of afm-backend-check's 100 local-model generations ended within its 120 s budget
    /// (docs/ARCHITECTURE.md, "Fuzzing and sanitizers"); the factors leave room for load on top.
    public var slowdown: Double {
        switch self {
        case .address: 2
        case .thread: 4
        }
    }

    /// Its usual name, for messages.
    public var name: String {
        switch self {
        case .address: "AddressSanitizer"
        case .thread: "ThreadSanitizer"
        }
    }
}
