// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// The command line of `afm-backend-runner`, as the host builds it:
/// `afm-backend-runner --channel-fd 3 --backend ID [--memory-limit-mb N] [--open-files N] [--nice N]`.
public struct RunnerOptions: Sendable, Hashable {
    /// The descriptor of the channel (the runner's end of the socketpair). Default 3.
    public var channelDescriptor: Int32 = ChildProcess.channelDescriptor
    /// The backend id, for logs.
    public var backend = "unknown"
    /// Resource limits applied before the backend library is loaded.
    public var limits = RunnerLimits()

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
            case "--memory-limit-mb": limits.memoryLimitMB = try integer()
            case "--open-files": limits.openFiles = try integer()
            case "--nice": limits.nice = try integer()
            default: throw UsageError(description: "unknown option \(option)")
            }
        }
    }

    /// Applies the limits to this process (unprivileged: they can only be lowered).
    ///
    /// - Throws: `SystemCallError` from `setrlimit` or `setpriority`.
    public func applyLimits() throws(SystemCallError) {
        if let megabytes = limits.memoryLimitMB { try ResourceLimits.limitAddressSpace(bytes: UInt64(megabytes) << 20) }
        if let files = limits.openFiles { try ResourceLimits.limitOpenFiles(UInt64(files)) }
        if let nice = limits.nice, nice > 0 { try ResourceLimits.adjustNice(by: Int32(nice)) }
    }
}
