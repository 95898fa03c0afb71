// SPDX-License-Identifier: Apache-2.0

/// The type of a configuration key: how its text is validated and read back.
///
/// Values are kept as the text written in the file (so `config show` prints what the operator wrote);
/// ``validate(_:)`` runs once per layer, when the value is read, and the typed accessors of
/// ``LoadedConfiguration`` parse the validated text.
public enum ConfigValueType: Sendable, Hashable, CustomStringConvertible {
    /// Any text, including empty.
    case string
    /// A file system path; empty means "the built-in choice" described in the key's documentation.
    case path
    /// A whole number within `range`.
    case integer(ClosedRange<Int>)
    /// A whole number of seconds within `range`.
    case seconds(ClosedRange<Int>)
    /// `yes`/`no`, `true`/`false`, `on`/`off`, `1`/`0` (case-insensitive).
    case boolean
    /// `HOST:PORT` (`[::1]:8080` for IPv6) with a port in 0…65535 (see ``HostPort``), or `unix:/PATH`.
    case listenAddress
    /// Names separated by commas and/or spaces; empty is the empty list.
    case list
    /// Octal permission bits of a file, `0000`…`0777` (`0660`).
    case fileMode

    public var description: String {
        switch self {
        case .string: "string"
        case .path: "path"
        case .integer(let range): "integer \(range.lowerBound)…\(range.upperBound)"
        case .seconds(let range): "seconds \(range.lowerBound)…\(range.upperBound)"
        case .boolean: "boolean"
        case .listenAddress: "HOST:PORT or unix:PATH"
        case .list: "list"
        case .fileMode: "octal mode"
        }
    }

    /// Checks `text` against this type.
    ///
    /// - Returns: `nil` when valid, else a message that completes "KEY …" (for example "must be HOST:PORT").
    public func validate(_ text: String) -> String? {
        switch self {
        case .string:
            return nil
        case .path:
            return text.contains("\0") ? "must be a path without NUL bytes" : nil
        case .integer(let range):
            guard let number = Int(text), range.contains(number) else {
                return "must be a whole number between \(range.lowerBound) and \(range.upperBound), not '\(text)'"
            }
            return nil
        case .seconds(let range):
            guard let number = Int(text), range.contains(number) else {
                return "must be a whole number of seconds between \(range.lowerBound) and \(range.upperBound), not '\(text)'"
            }
            return nil
        case .boolean:
            return Self.parseBool(text) == nil ? "must be yes or no (also true/false, on/off, 1/0), not '\(text)'" : nil
        case .listenAddress:
            return ListenAddress(text) == nil
                ? "must be HOST:PORT with an IP address or hostname and a port in 0…65535, or unix:/ABSOLUTE/PATH, not '\(text)'"
                : nil
        case .list:
            return nil
        case .fileMode:
            return Self.parseFileMode(text) == nil ? "must be octal permission bits such as 0660, not '\(text)'" : nil
        }
    }

    /// Parses the boolean spellings systemd accepts; `nil` for anything else.
    public static func parseBool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "yes", "true", "on", "1": true
        case "no", "false", "off", "0": false
        default: nil
        }
    }

    /// Parses octal permission bits (`660`, `0660`); `nil` for anything else or beyond 0777.
    public static func parseFileMode(_ text: String) -> UInt32? {
        guard !text.isEmpty, text.count <= 4, let mode = UInt32(text, radix: 8), mode <= 0o777 else { return nil }
        return mode
    }

    /// Splits a list value at commas and whitespace, dropping empty items.
    public static func parseList(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).map(String.init)
    }
}
