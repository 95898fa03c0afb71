// SPDX-License-Identifier: Apache-2.0
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

    /// Reads the key.
    ///
    /// - Throws: `AFM_ERR_INVALID_REQUEST` naming the file when `APIKeyFile` cannot be read, is not a regular
    ///   file, is empty, or is readable or writable by group or others (naming its mode).
    init(source: Settings.KeySource) throws(BackendError) {
        switch source {
        case .none:
            key = nil
            problem = nil
        case .environment(let name):
            if let value = ProcessInfo.processInfo.environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines),
                !value.isEmpty
            {
                key = value
                problem = nil
            } else {
                key = nil
                problem = (
                    "the environment variable \(name) named by APIKeyEnv is not set or empty", "missing_credentials"
                )
            }
        case .file(let path):
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw .invalidRequest("APIKeyFile \(path) cannot be read: \(String(cString: strerror(errno)))")
            }
            guard info.st_mode & S_IFMT == S_IFREG else {
                throw .invalidRequest("APIKeyFile \(path) is not a regular file")
            }
            let mode = info.st_mode & 0o7777
            guard mode & 0o077 == 0 else {
                throw .invalidRequest(
                    "APIKeyFile \(path) has mode \(String(format: "%04o", mode)); it must be 0600 or stricter "
                        + "(readable by its owner only): chmod 600 \(path)")
            }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw .invalidRequest("APIKeyFile \(path) cannot be read: \(String(cString: strerror(errno)))")
            }
            let value = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !value.isEmpty else { throw .invalidRequest("APIKeyFile \(path) is empty") }
            guard !value.contains(where: { $0.isNewline || $0 == "\0" }) else {
                throw .invalidRequest("APIKeyFile \(path) must hold one line (the key)")
            }
            key = value
            problem = nil
        }
    }

    /// The `Authorization` header line, or nil without a key.
    var authorizationHeader: String? { key.map { "Authorization: Bearer \($0)" } }

    /// `text` with every credential in it replaced by `[redacted]`: the value of an `Authorization` header or field
    /// (`Authorization: Bearer sk-…`, `"authorization":"…"`), any `Bearer` token, and the configured key wherever
    /// it appears.
    ///
    /// An upstream's error body may echo the request's headers, and a proxy in front of it may hold another token
    /// than ours, so the key alone is not enough. The patterns go first: replacing the key first would leave
    /// `Authorization: Bearer [redacted]` for them to chew on again.
    func redact(_ text: String) -> String {
        var text = text.replacing(#/(?i)(authorization["']?\s*[=:]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^\s"',;{}\[\]]+/#) {
            "\($0.output.1)[redacted]"
        }
        text = text.replacing(#/(?i)(\bbearer\s+)[A-Za-z0-9._~+\/=-]+/#) { "\($0.output.1)[redacted]" }
        guard let key, !key.isEmpty else { return text }
        return text.replacingOccurrences(of: key, with: "[redacted]")
    }
}
