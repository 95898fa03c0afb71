// SPDX-License-Identifier: Apache-2.0

/// The table of every configuration key, and the rules for free-form `[Backend.<id>]` sections.
public enum ConfigSchema {
    /// Every key, in the order of `etc/afmd.conf`.
    public static let keys: [ConfigKey] = [
        .serverListen, .serverShutdownTimeout, .serverRequestHeaderTimeout, .serverProcessingDeadline, .serverIOThreads,
        .serverMaxConnections, .serverAllowedHosts, .serverAllowedOrigins, .serverListenSocketMode, .serverAPIKeyFile,
        .serverAllowUnauthenticated, .serverMetricsRequireKey, .serverDrainDelay, .serverAccessLog,
        .backendsDirectory, .backendsDisabled, .backendsSilenceTimeout, .backendsCancelGrace, .backendsDrainTimeout,
        .responsesCommonPrompt, .responsesMaxOutputBytes,
        .adminSocket, .adminOperatorGroups, .adminSocketGroup,
        .cloudPreference,
    ]

    /// The fixed sections, in order.
    public static var sections: [String] {
        var seen: [String] = []
        for key in keys where !seen.contains(key.section) { seen.append(key.section) }
        return seen
    }

    /// The prefix of free-form backend sections: `[Backend.<id>]`, whose keys pass through as strings.
    public static let backendSectionPrefix = "Backend."

    /// Short command-line flags of `afmd`, besides the generic `--section.key` form.
    public static let shortFlags: [String: ConfigKey] = [
        "--listen": .serverListen,
        "--backend-dir": .backendsDirectory,
        "--admin-socket": .adminSocket,
    ]

    /// The key named `Section.Key` (case-sensitive), if any.
    public static func key(named name: String) -> ConfigKey? {
        keys.first { $0.name == name }
    }

    /// The key that command-line `flag` sets: a short flag (`--listen`) or `--section.key` (case-insensitive).
    public static func key(forFlag flag: String) -> ConfigKey? {
        if let key = shortFlags[flag] { return key }
        return keys.first { $0.commandLineFlag == flag.lowercased() }
    }

    /// Whether `id` is a valid backend id: letters, digits, `-`, `_` and `.`, not empty.
    public static func isValidBackendID(_ id: String) -> Bool {
        !id.isEmpty && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }
    }

    /// The text of `etc/afmd.conf`: every key, commented out, with its default and its one-line summary.
    public static func renderDefaultFile() -> String {
        var lines = [
            "# afmd.conf: configuration of the AFM gateway daemon (afmd). Generated from the schema in",
            "# Sources/AFMConfig/ConfigKey.swift; every key is listed with its compiled-in default, commented out.",
            "#",
            "# Lines are Key=Value inside [Section]s; '#' and ';' start comment lines. Unknown sections and keys and bad",
            "# values are errors reported as file:line, so a typo never goes unnoticed.",
            "#",
            "# Layers, lowest first: compiled-in defaults < this main file (the first of /etc/afm/afmd.conf and",
            "# /usr/lib/afm/afmd.conf) < drop-ins afmd.conf.d/*.conf from /etc/afm and /usr/lib/afm, merged by file",
            "# name (/etc shadows /usr/lib) < the control layer /var/lib/afm/control.json (written by afmctl) <",
            "# AFM_SECTION_KEY environment variables < command-line flags. `afmctl config show --origin` prints every",
            "# value with where it came from. Lists are replaced as a whole by a higher layer.",
        ]
        for section in sections {
            lines.append("")
            lines.append("[\(section)]")
            for key in keys where key.section == section {
                lines.append("# \(key.summary) (\(key.type); environment \(key.environmentVariable))")
                lines.append("#\(key.key)=\(key.defaultValue)")
            }
        }
        lines += [
            "",
            "# Settings for one backend: [Backend.<id>]. afmd reads these itself, for any backend (docs/backend-abi.md):",
            "#   Hosting=in-process|runner   overrides the manifest's hosting (local: runner; scripted, private-cloud: in-process)",
            "#   RunnerMemoryLimitMB=N, RunnerOpenFiles=N   RLIMIT_AS and RLIMIT_NOFILE of the backend's runner process",
            "#   RunnerNice=0…19              added to afmd's own nice value for the runner and every thread in it",
            "#   MaxConcurrent=N, MaxQueued=N requests of this backend that run at once, and that may wait for a slot;",
            "#                                beyond both: 503 busy with Retry-After. MaxConcurrent=0 (default): no limit",
            "# Every other key is passed to the backend as a string; see its documentation.",
            "#[Backend.local]",
            "# A GGUF file (afm-model-smollm2 sets this in /usr/lib/afm/afmd.conf.d/20-local.conf); Threads,",
            "# ParallelSequences, ContextTokens, the prompt cache (PromptCacheMiB, PromptCacheDir, PromptCacheDiskMiB)",
            "# and the rest are in Plugins/local/README.md.",
            "#Model=/usr/share/afm/models/smollm2-135m-instruct-q4_1.gguf",
            "#[Backend.private-cloud]",
            "# Remote OpenAI-compatible upstreams, tried healthy-first; without Upstreams the backend stays disabled.",
            "# Protocol, per-upstream overrides (Upstream.<n>.Model …) and daily quotas: Plugins/private-cloud/README.md.",
            "#Upstreams=https://cloud.example/v1",
            "#Model=",
            "#APIKeyFile=/etc/afm/private-cloud.key",
            "#DailyRequestQuota=",
            "# The most bytes one upstream answer may stream (64 MiB); a longer stream fails the generation.",
            "#MaxStreamBytes=67108864",
            "# The most data bytes one event of that stream may hold (1 MiB).",
            "#MaxEventBytes=1048576",
            "# With a key, an http:// upstream on a non-loopback host is refused (the key would travel in clear)",
            "# unless this is yes.",
            "#AllowInsecureHTTP=no",
            "#[Backend.scripted]",
            "# A script of models and steps (docs/backend-abi.md, \"Scripted backend\"); without it a demo echo model is served.",
            "#Script=/etc/afm/demo-script.json",
            "# Append a JSON line per request, cancel and terminal event (for tests).",
            "#RecordFile=",
            "# Report this version instead of the built-in one.",
            "#Version=",
            "# Context size of the built-in demo model.",
            "#ContextTokens=4096",
            "",
        ]
        return lines.joined(separator: "\n")
    }
}
