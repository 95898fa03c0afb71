// SPDX-License-Identifier: Apache-2.0

/// A parsed systemd-style INI file: `[Section]` headers and `Key=Value` lines, with line numbers.
///
/// Only the syntax is checked here (headers, `=`, a key before any section); whether sections and keys exist
/// and values are valid is decided by ``ConfigurationLoader`` against ``ConfigSchema``. Comment lines start
/// with `#` or `;` (after optional whitespace); a `#` inside a value is part of the value. Keys and values are
/// trimmed of surrounding whitespace. LF and CRLF line ends are both accepted, and a UTF-8 byte order mark is skipped.
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

    /// Parses `text`; `file` only labels errors (see ``init(bytes:file:)``).
    public init(text: String, file: String) throws(ConfigError) {
        try self.init(bytes: Array(text.utf8), file: file)
    }

    /// Parses the bytes of a file; `file` only labels errors.
    ///
    /// Lines end at LF; a CR before the LF is dropped (a file saved with CRLF line ends), and a UTF-8 byte order
    /// mark at the start is skipped. Lines are split as bytes, not `Character`s: in a Swift `String`, `"\r\n"`
    /// is one `Character`, so splitting a CRLF file's text on `"\n"` would find a single line.
    ///
    /// - Throws: ``ConfigError`` at the line of a syntax error, or of bytes that are not UTF-8.
    public init(bytes: [UInt8], file: String) throws(ConfigError) {
        var body = bytes[...]
        if body.starts(with: [0xEF, 0xBB, 0xBF]) { body = body.dropFirst(3) }
        var section: String?
        var number = 0
        for rawLine in body.split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            var lineBytes = rawLine
            if lineBytes.last == 0x0D { lineBytes = lineBytes.dropLast() }
            guard let line = String(validating: lineBytes, as: UTF8.self) else {
                throw ConfigError(file: file, line: number, message: "the line is not valid UTF-8")
            }
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
