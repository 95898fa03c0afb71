// SPDX-License-Identifier: Apache-2.0

/// The version of the AFM host programs, reported by `--version`, `/status` and the admin socket.
public enum AFMVersion {
    /// Semantic version of this build of the host.
    public static let string = "0.1.0"
    /// The backend ABI this host speaks (major, highest minor).
    public static let abiMajor: UInt32 = 1
    public static let abiMinor: UInt32 = 1
}
