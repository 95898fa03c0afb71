// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// Cheap clock readings for timers and protocol dates (vDSO `clock_gettime`, no allocation).
public enum SystemClock {
    /// Nanoseconds on the monotonic clock: only differences are meaningful; unaffected by wall-clock changes.
    /// The corresponding C function is `clock_gettime(CLOCK_MONOTONIC)`.
    public static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }

    /// Nanoseconds on the coarse monotonic clock: the last timer tick (a few milliseconds of resolution), read
    /// without touching the hardware clock. For timestamps taken on every event of a hot path whose deadlines are
    /// seconds long (a backend's silence limit); on a VM the precise clock costs a paravirtual clock read each time.
    /// The corresponding C function is `clock_gettime(CLOCK_MONOTONIC_COARSE)`.
    public static func coarseMonotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }

    /// `duration` in nanoseconds, for comparing with the readings above; a negative duration is 0.
    public static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000)
    }

    /// Whole seconds since the Unix epoch on the wall clock (for `Date` headers and logs).
    /// The corresponding C function is `clock_gettime(CLOCK_REALTIME)`.
    public static func unixSeconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int(now.tv_sec)
    }
}
