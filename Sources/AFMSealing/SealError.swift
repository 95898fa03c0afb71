// SPDX-License-Identifier: Apache-2.0

/// Why a sealed reasoning blob could not be opened.
///
/// Every reason becomes the same client-facing error (``code``, a 400), but the reason is kept precise so
/// logs and messages can say whether the client replayed a blob from before a daemon restart, sent it to a
/// different model, or changed it.
public struct SealError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong with the blob.
    public var reason: Reason
    /// A human-readable explanation, safe to show to the client (it never contains key material or
    /// plaintext).
    public var message: String

    /// Creates an error.
    public init(reason: Reason, message: String) {
        self.reason = reason
        self.message = message
    }

    /// The Responses API error code for every reason: `invalid_encrypted_content`.
    public var code: String { "invalid_encrypted_content" }

    /// The message, prefixed with the reason.
    public var description: String { "\(reason): \(message)" }

    /// The classes of failure, from the outside of the blob inwards.
    public enum Reason: Sendable, Hashable {
        /// Not a blob at all: no `afm<N>.` prefix, invalid or non-canonical base64url, or too short.
        case malformed
        /// A blob format version this build does not know (for example `afm2.` from a newer daemon).
        case unknownVersion
        /// Sealed by another sealer instance, typically before the daemon restarted (its key is gone).
        case otherInstance
        /// Authentic, but sealed for a different model than the one it was replayed to.
        case wrongModel
        /// Sealed by this instance, but changed since: authentication failed.
        case tampered
    }
}
