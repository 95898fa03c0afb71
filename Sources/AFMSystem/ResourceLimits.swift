// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// Resource limits a process can set on itself without privileges (a backend runner applies them at start).
public enum ResourceLimits {
    /// Limits the address space (`RLIMIT_AS`) to `bytes`: allocations beyond it fail (`malloc` returns NULL,
    /// `mmap` gives `ENOMEM`). Soft and hard limit are both set, so the backend cannot raise it again.
    /// The corresponding C function is `setrlimit`.
    public static func limitAddressSpace(bytes: UInt64) throws(SystemCallError) {
        try set(resource: Int32(RLIMIT_AS.rawValue), to: bytes)
    }

    /// Limits open descriptors (`RLIMIT_NOFILE`). The corresponding C function is `setrlimit`.
    public static func limitOpenFiles(_ count: UInt64) throws(SystemCallError) {
        try set(resource: Int32(RLIMIT_NOFILE.rawValue), to: count)
    }

    /// The soft (in force) and hard (ceiling) limit of open descriptors, `RLIMIT_NOFILE`. The corresponding C
    /// function is `getrlimit`.
    public static func openFilesLimit() -> (soft: UInt64, hard: UInt64) {
        var value = rlimit()
        _ = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &value)
        return (UInt64(value.rlim_cur), UInt64(value.rlim_max))
    }

    /// Raises the soft limit of open descriptors to `wanted`, or to the hard limit if that is lower (no privilege
    /// needed); never lowers it. Returns the soft limit now in force. The corresponding C function is `setrlimit`.
    @discardableResult
    public static func raiseOpenFilesSoftLimit(to wanted: UInt64) -> UInt64 {
        let (soft, hard) = openFilesLimit()
        let target = min(wanted, hard)
        guard target > soft else { return soft }
        var limit = rlimit(rlim_cur: rlim_t(target), rlim_max: rlim_t(hard))
        guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return soft }
        return target
    }

    /// The nice value of the process's main thread (on Linux nice is per thread; a thread starts with its
    /// creator's, and libdispatch sets its own workers' by QoS). The corresponding C function is `getpriority`.
    public static func processNice() -> Int32 {
        getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(getpid()))
    }

    /// Sets the calling thread's nice value to `value` (clamped to -20…19); threads it creates later start with
    /// it. Lowering it needs `CAP_SYS_NICE` or a matching `RLIMIT_NICE`. The corresponding C function is
    /// `setpriority`.
    public static func setNice(_ value: Int32) throws(SystemCallError) {
        let target = min(19, max(-20, value))
        _ = try blockingSystemCall("setpriority") { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, target) }
    }

    /// The current soft limit of `RLIMIT_AS` (`RLIM_INFINITY` is `UInt64.max`), for tests and status.
    public static func addressSpaceLimit() -> UInt64 {
        var value = rlimit()
        _ = getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &value)
        return UInt64(value.rlim_cur)
    }

    private static func set(resource: Int32, to value: UInt64) throws(SystemCallError) {
        var limit = rlimit(rlim_cur: rlim_t(value), rlim_max: rlim_t(value))
        _ = try blockingSystemCall("setrlimit") { setrlimit(__rlimit_resource_t(UInt32(resource)), &limit) }
    }
}
