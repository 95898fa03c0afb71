// SPDX-License-Identifier: Apache-2.0

/// A `HOST:PORT` pair as written in the config, the environment, the command line and the settings file.
///
/// The host is an IPv4 literal, an IPv6 literal (in brackets when followed by a port: `[::1]:8080`), or a
/// hostname made of letters, digits, `-` and `.` (such as `localhost`). The port is 0…65535.
public struct HostPort: Sendable, Hashable, CustomStringConvertible {
    /// The host, without brackets.
    public var host: String
    /// The port; 0 asks the kernel for a free one.
    public var port: Int

    /// Creates a pair without validation.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`; `nil` when malformed.
    public init?(_ text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
            guard host.contains(":") else { return nil }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard !host.contains(":") else { return nil }  // IPv6 needs brackets
        }
        guard Self.isValidHost(String(host)), !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
            let port = Int(portText), (0...65535).contains(port)
        else { return nil }
        self.host = String(host)
        self.port = port
    }

    /// Whether `host` is an IP literal (IPv6 without brackets) or a syntactically valid hostname.
    public static func isValidHost(_ host: String) -> Bool {
        guard !host.isEmpty, host.utf8.count <= 253 else { return false }
        if host.contains(":") {
            // IPv6 literal: hex digits, colons, and an optional trailing dotted IPv4 part.
            return host.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
                && host.filter({ $0 == ":" }).count >= 2
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
