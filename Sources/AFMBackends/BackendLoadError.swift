// SPDX-License-Identifier: Apache-2.0

/// Why a backend could not be loaded, created or reloaded.
///
/// The message always names the file involved and, for version problems, both versions, because the
/// person reading it is an operator who has to find the right package to fix.
public struct BackendLoadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The manifest or library the problem is about.
    public var path: String
    /// What went wrong, for humans.
    public var message: String
    /// A stable machine-readable reason: `manifest`, `abi_mismatch`, `missing_entry`, `struct_too_short`,
    /// `negotiate_failed`, `dlopen_failed`, `create_failed`, `describe_failed`, `smoke_test_failed`, `not_configured`.
    public var reason: String

    public init(path: String, _ message: String, reason: String = "manifest") {
        self.path = path
        self.message = message
        self.reason = reason
    }

    public var description: String { "\(path): \(message)" }
}
