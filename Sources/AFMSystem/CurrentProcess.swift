// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// Facts about, and exits of, the running process.
public enum CurrentProcess {
    /// The process id. The corresponding C function is `getpid`.
    public static var id: Int32 { getpid() }

    /// Ends the process at once with `status`, without running `atexit` handlers or flushing stdio: for a
    /// backend runner whose backend threads may still hold locks, or a signal thread ending a program whose main
    /// thread is still at work. The corresponding C function is `_exit`.
    public static func exitImmediately(_ status: Int32) -> Never {
        _exit(status)
    }

    /// Makes this process not dumpable (`PR_SET_DUMPABLE` 0): other processes of the same user, such as a
    /// compromised backend runner, can no longer `ptrace` it or open its `/proc/PID/mem`, `environ` or `fd`; its
    /// `/proc` entries belong to root. It also leaves no core dump. Programs it executes start dumpable again.
    /// The corresponding C function is `prctl`.
    public static func forbidInspection() throws(SystemCallError) {
        let setDumpable: Int32 = 4  // PR_SET_DUMPABLE, <linux/prctl.h>
        _ = try blockingSystemCall("prctl") { LinuxSymbols.processControl(setDumpable, 0, 0, 0, 0) }
    }

    /// Hands the heap's free memory back to the kernel. glibc keeps what its arenas (up to 8 per core, one per
    /// thread that allocated under contention) have freed at each arena's high-water mark, so after a burst — a
    /// reload, thousands of cancelled streams — resident memory stays up although little of it is in use (afmd
    /// after 53,000 cancelled streams: 18.7 MiB anonymous, 11.1 MiB after this). Takes each arena's lock in turn
    /// (milliseconds): call it off hot paths. Returns whether memory was released.
    /// The corresponding C function is `malloc_trim(0)`.
    @discardableResult
    public static func releaseFreeHeapMemory() -> Bool {
        LinuxSymbols.mallocTrim(0) != 0
    }

    /// The resident set size of a process in KiB (`VmRSS` in `/proc/<pid>/status`), or nil when it is gone.
    public static func residentKilobytes(of pid: Int32) -> Int? {
        guard let file = fopen("/proc/\(pid)/status", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("VmRSS:") {
                return Int(text.dropFirst(6).filter { $0.isNumber })
            }
        }
        return nil
    }

    /// The absolute path of the running executable (`/proc/self/exe`), or nil when it cannot be read.
    public static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// How many CPUs this process may run on: its affinity mask (`sched_getaffinity`, which honours `taskset` and
    /// systemd's `CPUAffinity=`), or the online CPUs when the mask cannot be read. At least 1.
    public static var usableProcessorCount: Int {
        // A 1024-CPU mask, as glibc's cpu_set_t.
        var mask = [UInt64](repeating: 0, count: 16)
        let status = mask.withUnsafeMutableBytes { LinuxSymbols.getAffinity(0, $0.count, $0.baseAddress) }
        if status == 0 {
            let count = mask.reduce(0) { $0 + $1.nonzeroBitCount }
            if count > 0 { return count }
        }
        return max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }
}
