// SPDX-License-Identifier: Apache-2.0

/// Where an effective configuration value came from: one of the layers, lowest first.
///
/// Prints like `git config --show-origin`: `default`, `/etc/afm/afmd.conf:3`,
/// `control layer /var/lib/afm/control.json`, `environment AFM_SERVER_LISTEN`, `command line --listen`.
public enum ConfigOrigin: Sendable, Hashable, CustomStringConvertible {
    /// The compiled-in default from ``ConfigSchema``.
    case defaultValue
    /// The main file (the first found of the candidates, or `--config FILE`).
    case mainFile(path: String, line: Int)
    /// A drop-in `afmd.conf.d/*.conf`.
    case dropIn(path: String, line: Int)
    /// The control layer written through the admin socket (``ServerSettings`` in the state directory).
    case controlLayer(path: String)
    /// An `AFM_*` environment variable.
    case environment(variable: String)
    /// A command-line flag.
    case commandLine(flag: String)

    /// The layer's rank, lowest first (0 = default … 5 = command line).
    public var rank: Int {
        switch self {
        case .defaultValue: 0
        case .mainFile: 1
        case .dropIn: 2
        case .controlLayer: 3
        case .environment: 4
        case .commandLine: 5
        }
    }

    /// The layer's name: `default`, `main`, `drop-in`, `control`, `environment` or `command-line`.
    public var layer: String {
        switch self {
        case .defaultValue: "default"
        case .mainFile: "main"
        case .dropIn: "drop-in"
        case .controlLayer: "control"
        case .environment: "environment"
        case .commandLine: "command-line"
        }
    }

    public var description: String {
        switch self {
        case .defaultValue: "default"
        case .mainFile(let path, let line), .dropIn(let path, let line): "\(path):\(line)"
        case .controlLayer(let path): "control layer \(path)"
        case .environment(let variable): "environment \(variable)"
        case .commandLine(let flag): "command line \(flag)"
        }
    }
}

/// One effective value with its origin and the values it shadows (highest first).
public struct ConfigEntry: Sendable, Hashable {
    /// A value from a lower layer (or earlier in the same layer) that this one replaced.
    public struct Shadowed: Sendable, Hashable {
        /// The replaced text.
        public var value: String
        /// Where it came from.
        public var origin: ConfigOrigin
    }

    /// `Section.Key`, or `Backend.<id>.<Key>` for backend settings.
    public var name: String
    /// The effective text.
    public var value: String
    /// Where the effective text came from.
    public var origin: ConfigOrigin
    /// What it replaced, most recent first (ending with the default, for schema keys).
    public var shadows: [Shadowed]
}
