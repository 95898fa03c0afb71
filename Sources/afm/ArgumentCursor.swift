// SPDX-License-Identifier: Apache-2.0
import AFMClient

/// The words of an `afm` command line not read yet, with the option values every command reads the same way.
struct ArgumentCursor {
    /// The words left, in order.
    private(set) var rest: ArraySlice<String>

    init(_ words: ArraySlice<String>) {
        rest = words
    }

    /// The next word; nil at the end.
    mutating func next() -> String? {
        rest.popFirst()
    }

    /// The value that must follow `option`.
    mutating func value(_ option: String) throws -> String {
        guard let next = rest.popFirst() else { throw AfmOptions.UsageError(message: "\(option) needs a value") }
        return next
    }

    /// `--url`'s value: the gateway's address.
    mutating func url(_ option: String) throws -> ServerURL {
        let text = try value(option)
        guard let parsed = ServerURL(string: text) else {
            throw AfmOptions.UsageError(message: "\(option) must look like http://127.0.0.1:11535 (got '\(text)')")
        }
        return parsed
    }

    /// Every word left (after `--`: plain words, even those that start with `-`).
    mutating func remaining() -> [String] {
        defer { rest = [] }
        return Array(rest)
    }
}
