// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMHTTP
import Foundation
import Synchronization

/// The API keys of `[Server] APIKeyFile`: SHA-256 digests with names, checked for every guarded request.
///
/// The file holds one key per line; blank lines and lines starting with `#` are skipped:
/// ```
/// sk-plain-key                     a key without a name: named key-LINE (key-3)
/// ci:sk-another-key                NAME:KEY
/// alice:sha256:9f86d081…0f00a08    NAME:sha256:HEX, the key's SHA-256 (64 hex digits): no secret in the file
/// ```
/// A name is letters, digits, `.`, `_` and `-`; it is what the access log, the token monitor and the metrics show,
/// never the key. Only digests are kept in memory.
///
/// Checking a token (``name(forToken:)``) hashes it and compares that digest with **every** key's digest, each
/// comparison over all 32 bytes with no early exit and the loop never cut short on a match (as vLLM does with
/// `compare_digest`): how long a check takes tells nothing about which key, or how much of one, was close. The
/// hash also makes the comparison independent of the token's length.
public struct APIKeys: Sendable {
    /// One key: its name and the SHA-256 of the key.
    public struct Entry: Sendable, Hashable {
        public var name: String
        public var digest: [UInt8]
    }

    /// The keys, in file order.
    public private(set) var entries: [Entry]

    /// No keys: every request is let through (authentication off).
    public static let none = APIKeys(entries: [])

    init(entries: [Entry]) { self.entries = entries }

    /// Whether any key is configured (authentication on).
    public var isEnabled: Bool { !entries.isEmpty }

    /// A key file that cannot be used, with the line at fault.
    public struct FileError: Error, Sendable, Hashable, CustomStringConvertible {
        public var path: String
        public var line: Int?
        public var message: String
        public var description: String { line.map { "\(path):\($0): \(message)" } ?? "\(path): \(message)" }
    }

    /// Reads and parses `path`.
    ///
    /// - Throws: ``FileError`` when the file cannot be read, a line is malformed, a name repeats, or it holds no key.
    public static func load(path: String) throws(FileError) -> APIKeys {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FileError(path: path, line: nil, message: "cannot read the API key file")
        }
        return try parse(String(decoding: data, as: UTF8.self), path: path)
    }

    /// Parses the text of a key file (see the type's documentation).
    static func parse(_ text: String, path: String) throws(FileError) -> APIKeys {
        var entries: [Entry] = []
        var names: Set<String> = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let entry: Entry
            if let colon = line.firstIndex(of: ":") {
                let name = String(line[..<colon])
                let rest = String(line[line.index(after: colon)...])
                guard isValidName(name) else {
                    throw FileError(path: path, line: number, message: "a key name is letters, digits, '.', '_' and '-' (NAME:KEY)")
                }
                if rest.hasPrefix("sha256:") {
                    let hex = rest.dropFirst("sha256:".count)
                    guard let digest = Self.bytes(hex: hex) else {
                        throw FileError(path: path, line: number, message: "NAME:sha256:HEX needs the 64 hex digits of the key's SHA-256")
                    }
                    entry = Entry(name: name, digest: digest)
                } else {
                    guard !rest.isEmpty else { throw FileError(path: path, line: number, message: "the key after '\(name):' is empty") }
                    entry = Entry(name: name, digest: SHA256.digest(Array(rest.utf8)))
                }
            } else {
                entry = Entry(name: "key-\(number)", digest: SHA256.digest(Array(line.utf8)))
            }
            guard names.insert(entry.name).inserted else {
                throw FileError(path: path, line: number, message: "the key name '\(entry.name)' is used twice")
            }
            entries.append(entry)
        }
        guard !entries.isEmpty else { throw FileError(path: path, line: nil, message: "the API key file holds no key") }
        return APIKeys(entries: entries)
    }

    /// The name of the key `token` is, or nil when it is none of them.
    ///
    /// Constant time in the token and the keys: one SHA-256 of the token, then every key's digest compared over all
    /// its bytes (XOR accumulated, no early exit), and every key is visited whatever matched before it.
    public func name(forToken token: Substring) -> String? {
        let digest = SHA256.digest(Array(token.utf8))
        var matched: Int = -1
        for (index, entry) in entries.enumerated() {
            var difference: UInt8 = 0
            for position in 0..<32 { difference |= entry.digest[position] ^ digest[position] }
            // Branch-free select: keeps the first match without leaving the loop.
            let isMatch = Int(bitPattern: UInt(difference == 0 ? 1 : 0))
            let unset = Int(bitPattern: UInt(matched < 0 ? 1 : 0))
            let take = isMatch & unset
            matched = take * index + (1 - take) * matched
        }
        return matched >= 0 ? entries[matched].name : nil
    }

    /// The key a request presents: `Authorization: Bearer KEY`, else `x-api-key: KEY`; nil when neither.
    public static func presentedKey(in headers: HTTPHeaders) -> Substring? {
        if let authorization = headers["Authorization"] {
            let value = authorization[...].drop { $0 == " " }
            if value.count > 7, value.prefix(7).lowercased() == "bearer " {
                let token = value.dropFirst(7).drop { $0 == " " }
                let trimmed = token.reversed().drop { $0 == " " }.count
                if trimmed > 0 { return token.prefix(trimmed) }
            }
        }
        if let key = headers["x-api-key"], !key.isEmpty { return key[...] }
        return nil
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "_" || $0 == "-") }
    }

    private static func bytes(hex: Substring) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for pair in stride(from: 0, to: 64, by: 2) {
            guard let high = nibble(digits[pair]), let low = nibble(digits[pair + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The keys in force, replaced whole on a reload.
    final class Shared: Sendable {
        private let keys: Mutex<APIKeys>
        init(_ keys: APIKeys) { self.keys = Mutex(keys) }
        var current: APIKeys { keys.withLock { $0 } }
        func set(_ value: APIKeys) { keys.withLock { $0 = value } }
    }
}
