// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// The command line of `afm-backend-runner`, as the host builds it:
/// `afm-backend-runner --channel-fd 3 --backend ID [--base-nice N] [--memory-limit-mb N] [--open-files N] [--nice N]`.
public struct RunnerOptions: Sendable, Hashable {
    /// The descriptor of the channel (the runner's end of the socketpair). Default 3.
    public var channelDescriptor: Int32 = ChildProcess.channelDescriptor
    /// The backend id, for logs.
    public var backend = "unknown"
    /// Resource limits applied before the backend library is loaded.
    public var limits = RunnerLimits()
    /// afmd's own nice value, which `RunnerNice` is added to. The runner is started from one of afmd's worker
    /// threads, whose nice libdispatch sets by QoS, so it does not simply inherit the daemon's (`Nice=` of the
    /// systemd unit, `nice afmd`).
    public var baseNice: Int32?

    /// A command line the runner cannot use.
    public struct UsageError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Parses the arguments (without the program name).
    ///
    /// - Throws: `UsageError` naming the bad option.
    public init(arguments: [String]) throws(UsageError) {
        var iterator = arguments.makeIterator()
        while let option = iterator.next() {
            guard let value = iterator.next() else { throw UsageError(description: "\(option) needs a value") }
            func integer() throws(UsageError) -> Int {
                guard let number = Int(value), number >= 0 else {
                    throw UsageError(description: "\(option) needs a non-negative integer, not '\(value)'")
                }
                return number
            }
            switch option {
            case "--channel-fd": channelDescriptor = Int32(clamping: try integer())
            case "--backend": backend = value
            case "--base-nice":
                guard let number = Int32(value), (-20...19).contains(number) else {
                    throw UsageError(description: "--base-nice needs an integer in -20…19, not '\(value)'")
                }
                baseNice = number
            case "--memory-limit-mb": limits.memoryLimitMB = try integer()
            case "--open-files": limits.openFiles = try integer()
            case "--nice": limits.nice = try integer()
            default: throw UsageError(description: "unknown option \(option)")
            }
        }
    }

    /// Applies the limits to this process (unprivileged: they can only be lowered), on the main thread before
    /// any other thread exists, so every thread the runner and its backend start inherits the nice value.
    ///
    /// In a sanitizer build (`make test-asan`, `make test-tsan`) `RunnerMemoryLimitMB` is not applied: the
    /// sanitizer's shadow memory alone has reserved terabytes of address space before `main`, so any `RLIMIT_AS`
    /// a configuration can name would make every later `mmap` fail and the runner could not even answer hello.
    /// The warning says so.
    ///
    /// - Returns: warnings to log: afmd's nice value could not be taken over (a runner started from a thread with
    ///   a higher nice value may not lower its own without `CAP_SYS_NICE`; `RunnerNice` is applied regardless),
    ///   or the memory limit was not applied under a sanitizer.
    /// - Throws: `SystemCallError` from `setrlimit` or `setpriority`.
    @discardableResult
    public func applyLimits(sanitizer: Sanitizer? = Sanitizer.current) throws(SystemCallError) -> [String] {
        var warnings: [String] = []
        if let megabytes = limits.memoryLimitMB {
            if let sanitizer {
                warnings.append(
                    "RunnerMemoryLimitMB=\(megabytes) is not applied: this runner is built with \(sanitizer.name), whose shadow "
                        + "memory alone reserves terabytes of address space")
            } else {
                try ResourceLimits.limitAddressSpace(bytes: UInt64(megabytes) << 20)
            }
        }
        if let files = limits.openFiles { try ResourceLimits.limitOpenFiles(UInt64(files)) }
        let increment = Int32(limits.nice ?? 0)
        if let baseNice, baseNice != ResourceLimits.processNice() {
            do {
                try ResourceLimits.setNice(baseNice)
            } catch {
                warnings.append("cannot take over afmd's nice value \(baseNice) (\(error)); the runner stays at \(ResourceLimits.processNice())")
            }
        }
        if increment > 0 { try ResourceLimits.setNice(ResourceLimits.processNice() + increment) }
        return warnings
    }
}
