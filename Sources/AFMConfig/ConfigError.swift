// SPDX-License-Identifier: Apache-2.0

/// A configuration problem, printed as `file:line: message` (or `source: message` without a line).
///
/// `file` names where the bad value came from: a path, `environment AFM_X`, `command line --x` or
/// `control layer PATH`, so every error points at something the operator can fix.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file path or other source (`environment AFM_SERVER_LISTEN`, `command line --listen`).
    public var file: String
    /// The 1-based line in `file`, or 0 when the source has no lines.
    public var line: Int
    /// What is wrong, and what would be right.
    public var message: String

    /// Creates an error.
    public init(file: String, line: Int = 0, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}
