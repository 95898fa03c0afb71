// SPDX-License-Identifier: Apache-2.0

/// A parsed systemd-style INI file: `[Section]` headers and `Key=Value` lines, with line numbers.
///
/// Only the syntax is checked here (headers, `=`, a key before any section); whether sections and keys exist
/// and values are valid is decided by ``ConfigurationLoader`` against ``ConfigSchema``. Comment lines start
/// with `#` or `;` (after optional whitespace); a `#` inside a value is part of the value. Keys and values are
/// trimmed of surrounding whitespace.
public struct INIDocument: Sendable, Hashable {
    /// One `Key=Value` line.
    public struct Assignment: Sendable, Hashable {
        /// The section it appears in.
        public var section: String
        /// The key.
        public var key: String
        /// The value (may be empty).
        public var value: String
        /// The 1-based line number.
        public var line: Int
    }

    /// One `[Section]` header.
    public struct SectionHeader: Sendable, Hashable {
        /// The name between the brackets.
        public var name: String
        /// The 1-based line number.
        public var line: Int
    }

    /// Every assignment in file order.
    public var assignments: [Assignment] = []
    /// Every section header in file order.
    public var sections: [SectionHeader] = []

    /// Parses `text`; `file` only labels errors.
    public init(text: String, file: String) throws(ConfigError) {
        var section: String?
        var number = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            number += 1
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            let trimmed = line.trimmingWhitespace()
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }
            if trimmed.hasPrefix("[") {
                guard trimmed.hasSuffix("]"), trimmed.count > 2 else {
                    throw ConfigError(file: file, line: number, message: "a section header looks like [Name]")
                }
                let name = String(trimmed.dropFirst().dropLast()).trimmingWhitespace()
                section = name
                sections.append(SectionHeader(name: name, line: number))
                continue
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw ConfigError(file: file, line: number, message: "expected Key=Value or [Section], not '\(trimmed)'")
            }
            let key = String(trimmed[..<equals]).trimmingWhitespace()
            let value = String(trimmed[trimmed.index(after: equals)...]).trimmingWhitespace()
            guard !key.isEmpty else { throw ConfigError(file: file, line: number, message: "empty key before '='") }
            guard let section else {
                throw ConfigError(file: file, line: number, message: "'\(key)' appears before any [Section]")
            }
            assignments.append(Assignment(section: section, key: key, value: value, line: number))
        }
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
