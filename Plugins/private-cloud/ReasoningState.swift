// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Foundation

/// The opaque bytes this backend sends as `REASONING_STATE`, which the host seals into `encrypted_content` and a
/// later request returns as a `reasoning` item's `state_base64`.
///
/// It is a small JSON envelope that remembers which protocol produced the reasoning, so replay can put it back in
/// the upstream's own format:
///
/// ```json
/// {"afm_private_cloud_reasoning":1,"protocol":"responses","encrypted_content":"<upstream blob>","text":"…"}
/// ```
///
/// - Responses upstreams: `encrypted_content` is the upstream's own blob, byte for byte; `text` its visible
///   reasoning text, if any (llama.cpp sends text and an empty blob, and needs the text back).
/// - Chat Completions upstreams: `text` is the `reasoning_content` the model streamed.
struct ReasoningState: Sendable, Hashable {
    static let version = 1
    private static let marker = "afm_private_cloud_reasoning"

    var wireProtocol: WireProtocol
    var encryptedContent: String?
    var text: String

    init(wireProtocol: WireProtocol, encryptedContent: String?, text: String) {
        self.wireProtocol = wireProtocol
        self.encryptedContent = encryptedContent
        self.text = text
    }

    /// Decodes an envelope; nil when the bytes are not one (another backend's state, or a newer version).
    init?(decoding bytes: Data) {
        guard let object = try? JSON.object(from: bytes), JSON.int(object[Self.marker]) == Self.version,
            let name = JSON.string(object["protocol"]), let wireProtocol = WireProtocol(rawValue: name)
        else { return nil }
        self.wireProtocol = wireProtocol
        encryptedContent = JSON.string(object["encrypted_content"]).flatMap { $0.isEmpty ? nil : $0 }
        text = JSON.string(object["text"]) ?? ""
    }

    /// The envelope's bytes.
    var encoded: String {
        var json = "{\"\(Self.marker)\":\(Self.version),\"protocol\":" + JSON.quote(wireProtocol.rawValue)
        if let encryptedContent { json += ",\"encrypted_content\":" + JSON.quote(encryptedContent) }
        return json + ",\"text\":" + JSON.quote(text) + "}"
    }

    /// True when there is nothing to replay.
    var isEmpty: Bool { encryptedContent == nil && text.isEmpty }
}
