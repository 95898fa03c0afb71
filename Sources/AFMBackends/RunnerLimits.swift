// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Per-backend limits of a runner process, from the backend's `[Backend.<id>]` section. None needs privileges.
///
/// | Key | Meaning |
/// |---|---|
/// | `RunnerMemoryLimitMB` | `RLIMIT_AS` of the runner in MiB: its whole address space (an idle runner maps about 150–220 MiB: the Swift runtime, Dispatch, and 8 MiB of stack per thread; a model adds its weights and buffers). A sanitizer build's runner does not apply it (`RunnerOptions.applyLimits`). |
/// | `RunnerOpenFiles` | `RLIMIT_NOFILE`: descriptors the runner may have open. |
/// | `RunnerNice` | Added to the runner's nice value (0–19; higher is lower priority). |
public struct RunnerLimits: Sendable, Hashable {
    /// The setting keys the host reads itself; they are not passed to the backend. (`MaxConcurrent` and
    /// `MaxQueued` are afmd's admission control, AFMResponses.)
    public static let settingKeys: Set<String> = [
        "Hosting", "RunnerMemoryLimitMB", "RunnerOpenFiles", "RunnerNice", "MaxConcurrent", "MaxQueued",
    ]

    public var memoryLimitMB: Int?
    public var openFiles: Int?
    public var nice: Int?

    public init(memoryLimitMB: Int? = nil, openFiles: Int? = nil, nice: Int? = nil) {
        self.memoryLimitMB = memoryLimitMB
        self.openFiles = openFiles
        self.nice = nice
    }

    /// Reads the limits from a backend's settings.
    ///
    /// - Throws: `BackendLoadError` (reason `invalid_setting`) naming the key and the accepted range.
    init(settings: [String: String], backend: String) throws(BackendLoadError) {
        func number(_ key: String, _ range: ClosedRange<Int>) throws(BackendLoadError) -> Int? {
            guard let text = settings[key], !text.isEmpty else { return nil }
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
                throw BackendLoadError(
                    path: "[Backend.\(backend)]", "\(key)=\(text) must be an integer in \(range.lowerBound)…\(range.upperBound)",
                    reason: "invalid_setting")
            }
            return value
        }
        memoryLimitMB = try number("RunnerMemoryLimitMB", 64...(1 << 30))
        openFiles = try number("RunnerOpenFiles", 16...(1 << 20))
        nice = try number("RunnerNice", 0...19)
    }

    /// The runner's command-line options for these limits.
    var arguments: [String] {
        var arguments: [String] = []
        if let memoryLimitMB { arguments += ["--memory-limit-mb", String(memoryLimitMB)] }
        if let openFiles { arguments += ["--open-files", String(openFiles)] }
        if let nice { arguments += ["--nice", String(nice)] }
        return arguments
    }
}
