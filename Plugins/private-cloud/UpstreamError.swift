// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Foundation

/// Helpers that turn an upstream's HTTP failure into a short, secret-free message.
enum UpstreamError {
    /// The `error.message` (or `message`, or `detail`) of a JSON error body, at most 300 characters, with the key
    /// redacted.
    ///
    /// The key is redacted before the text is shortened: shortening first could cut a key in two, and the part
    /// left before the cut would no longer match the key and would reach the client. Shortening after redaction
    /// can only cut a `[redacted]` marker, which holds nothing secret.
    static func message(fromBody body: [UInt8], redacting credentials: Credentials) -> String? {
        guard !body.isEmpty else { return nil }
        var text: String?
        if let object = try? JSON.object(from: Data(body)) {
            text =
                JSON.string(JSON.object(object["error"])?["message"]) ?? JSON.string(object["error"])
                ?? JSON.string(object["message"]) ?? JSON.string(object["detail"])
        }
        if text == nil {
            let raw = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            text = raw.isEmpty ? nil : raw
        }
        guard let text = text.map(credentials.redact) else { return nil }
        return text.count > 300 ? String(text.prefix(300)) + "…" : text
    }

    /// A hint for statuses with an obvious cause.
    static func hint(_ status: Int) -> String {
        switch status {
        case 401, 403: " (the upstream refused the credentials)"
        case 404: " (check the base URL and the model name)"
        case 429: " (the upstream is rate limiting)"
        default: ""
        }
    }
}
