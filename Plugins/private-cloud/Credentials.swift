// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Foundation

/// The upstream API key, read once at `create` from a file (mode 0600 or stricter) or an environment variable.
///
/// The key never leaves this type except as the `Authorization` header of an upstream request: its description is
/// redacted, and `redact(_:)` scrubs it from any text (an upstream error body, a libcurl message) before that text
/// reaches a log line, an event or an error.
struct Credentials: Sendable, CustomStringConvertible {
    /// The key, or nil when none is configured or the environment variable is unset.
    private let key: String?
    /// Why the backend cannot authenticate (for describe), when a configured source yielded no key.
    let problem: (reason: String, code: String)?

    var description: String { key == nil ? "Credentials(none)" : "Credentials(<redacted>)" }

    /// True when requests carry a key.
    var hasKey: Bool { key != nil }

    /// The most bytes an `APIKeyFile` may hold (a key is one short line).
    static let maximumFileBytes = 65_536

    /// Reads the key.
    ///
    /// The file is opened once with `O_NOFOLLOW` and every check (regular file, owner, mode) is made on the open
    /// descriptor (`fstat`), then the key is read from that same descriptor: nothing can swap the file, or a
    /// symbolic link, in between the check and the read.
    ///
    /// - Throws: `AFM_ERR_INVALID_REQUEST` naming the file when `APIKeyFile` cannot be opened, is a symbolic link,
    ///   is not a regular file, is owned by another user than afmd's (or root), is readable or writable by group
    ///   or others (naming its mode), is empty or too large, or holds more than one line or control characters;
    ///   naming the variable when the key from `APIKeyEnv` holds control characters (CR and LF would end the
    ///   `Authorization` header and start another).
    init(source: Settings.KeySource) throws(BackendError) {
        switch source {
        case .none:
            key = nil
            problem = nil
        case .environment(let name):
            if let value = ProcessInfo.processInfo.environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines),
                !value.isEmpty
            {
                guard !Self.hasControlCharacters(value) else {
                    throw .invalidRequest(
                        "the key in the environment variable \(name) named by APIKeyEnv holds control characters "
                            + "(CR, LF, NUL, …); a key must be one line of printable characters")
                }
                key = value
                problem = nil
            } else {
                key = nil
                problem = (
                    "the environment variable \(name) named by APIKeyEnv is not set or empty", "missing_credentials"
                )
            }
        case .file(let path):
            key = try Self.readKeyFile(path)
            problem = nil
        }
    }

    /// Opens, checks and reads `APIKeyFile` through one descriptor.
    private static func readKeyFile(_ path: String) throws(BackendError) -> String {
        // O_NONBLOCK: opening a FIFO must not hang create (it is refused below as not a regular file).
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP {
                throw .invalidRequest(
                    "APIKeyFile \(path) is a symbolic link; set APIKeyFile to the file itself")
            }
            throw .invalidRequest("APIKeyFile \(path) cannot be read: \(String(cString: strerror(code)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw .invalidRequest("APIKeyFile \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw .invalidRequest("APIKeyFile \(path) is not a regular file")
        }
        let owner = geteuid()
        guard info.st_uid == owner || info.st_uid == 0 else {
            throw .invalidRequest(
                "APIKeyFile \(path) is owned by uid \(info.st_uid); it must belong to afmd's user (uid \(owner)) "
                    + "or root")
        }
        let mode = info.st_mode & 0o7777
        guard mode & 0o077 == 0 else {
            throw .invalidRequest(
                "APIKeyFile \(path) has mode \(String(format: "%04o", mode)); it must be 0600 or stricter "
                    + "(readable by its owner only): chmod 600 \(path)")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw .invalidRequest("APIKeyFile \(path) cannot be read: \(String(cString: strerror(errno)))")
            }
            bytes += chunk[..<count]
            guard bytes.count <= maximumFileBytes else {
                throw .invalidRequest("APIKeyFile \(path) is larger than \(maximumFileBytes) bytes; it must hold the key only")
            }
        }
        let value = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !value.isEmpty else { throw .invalidRequest("APIKeyFile \(path) is empty") }
        guard !hasControlCharacters(value) else {
            throw .invalidRequest("APIKeyFile \(path) must hold one line (the key) without control characters")
        }
        return value
    }

    /// Whether `text` holds a C0 control character or DEL (CR and LF among them).
    static func hasControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    /// The `Authorization` header line, or nil without a key.
    var authorizationHeader: String? { key.map { "Authorization: Bearer \($0)" } }

    /// `text` with every credential in it replaced by `[redacted]`: the value of a credential header, field or
    /// parameter — `Authorization` (any scheme: `Bearer`, `Basic`, `Digest` with all its parameters),
    /// `x-api-key`, `api-key`, `api_key`, `access_token`, `token` — whether it is a header line, a parameter
    /// (`?token=…&`), quoted (`"authorization":"…"`) or JSON inside a JSON string (`\"Authorization\": \"…\"`);
    /// any `Bearer` token, whole (up to whitespace or a quote: `sk-abc:def` is one token); and the configured key
    /// wherever it appears.
    ///
    /// An upstream's error body may echo the request's headers, and a proxy in front of it may hold another token
    /// than ours, so the key alone is not enough. The patterns go first: replacing the key first would leave
    /// `Authorization: Bearer [redacted]` for them to chew on again. Redacting a little too much (a sentence that
    /// says `token: expired`) is the price of never leaving half a credential.
    func redact(_ text: String) -> String {
        // JSON in a JSON string: everything up to the escaped closing quote.
        var text = text.replacing(
            #/(?i)(\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|\baccess[-_]token|\btoken)(\\"\s*:\s*\\")(?:(?!\\")[^\n])*/#
        ) { "\($0.output.1)\($0.output.2)[redacted]" }
        // A quoted value (`"authorization":"Digest username=\"bob\", …"`): up to the closing quote.
        text = text.replacing(
            #/(?i)(\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|\baccess[-_]token|\btoken)(["']?\s*[=:]\s*")(?:[^"\\\n]|\\.)*/#
        ) { "\($0.output.1)\($0.output.2)[redacted]" }
        text = text.replacing(
            #/(?i)(\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|\baccess[-_]token|\btoken)(["']?\s*[=:]\s*')(?:[^'\\\n]|\\.)*/#
        ) { "\($0.output.1)\($0.output.2)[redacted]" }
        // Unquoted: a header line (`Authorization: Digest username="bob", nonce="…"` to the end of the line) or a
        // parameter (`token=…` up to `&`): the scheme and the credential.
        text = text.replacing(
            #/(?i)(\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|\baccess[-_]token|\btoken)(["']?\s*[=:]\s*)(?:digest\s+(?:[^\n"\\]|"[^"\n]*")*|(?:(?:bearer|basic|token)\s+)?[^\s"'\\,;&{}\[\]]+)/#
        ) { "\($0.output.1)\($0.output.2)[redacted]" }
        text = text.replacing(#/(?i)(\bbearer\s+)[^\s"'\\,;]+/#) { "\($0.output.1)[redacted]" }
        guard let key, !key.isEmpty else { return text }
        return text.replacingOccurrences(of: key, with: "[redacted]")
    }
}
