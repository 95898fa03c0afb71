// SPDX-License-Identifier: Apache-2.0

/// Why a settings edit or a settings file was refused. The last valid settings stay in force in every case.
public enum SettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The edit names no known setting.
    case unknownSetting(String)
    /// The edit's value is invalid (bad port, unparsable host, …).
    case invalidValue(setting: String, message: String)
    /// `SetPrompt` carried an expected revision that is no longer current.
    case revisionMismatch(expected: Int, actual: Int)
    /// The settings file is unreadable or malformed.
    case corrupt(String)
    /// The settings file was written by a newer afmd.
    case newerVersion(Int)
    /// Writing the settings file failed; the file on disk is unchanged.
    case writeFailed(String)
    /// The settings file was replaced with the edit, but a step after the rename (the `fsync` of its directory)
    /// failed: the edit is saved and current, but may not survive a crash of the machine.
    case notDurable(String)

    public var description: String {
        switch self {
        case .unknownSetting(let name):
            "unknown setting '\(name)'; known: host, port, listen, privateCloudPreference, commonPrompt"
        case .invalidValue(let setting, let message): "\(setting): \(message)"
        case .revisionMismatch(let expected, let actual):
            "the prompt changed meanwhile (revision \(actual), expected \(expected)); read it again"
        case .corrupt(let message): message
        case .newerVersion(let version):
            "settings version \(version) is newer than this afmd understands (\(ServerSettings.currentVersion)); refusing"
        case .writeFailed(let message): "cannot save settings (the file is unchanged): \(message)"
        case .notDurable(let message):
            "settings saved, but not flushed to disk (they may be lost in a crash; the file holds the change): \(message)"
        }
    }
}
