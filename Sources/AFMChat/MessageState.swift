// SPDX-License-Identifier: Apache-2.0

/// Where a message stands. Only `complete` answers (and their user turns) are sent as history.
public enum MessageState: String, Sendable, Hashable, CaseIterable {
    /// Finished normally (user messages are always complete).
    case complete
    /// An answer still streaming; found at start-up, it means the client died, and it becomes `interrupted`.
    case pending
    /// Stopped by the user (Ctrl-C) or by the client's death.
    case interrupted
    /// The server or the connection failed; the message's notice says why.
    case failed
    /// Cut off by the output limit (`response.incomplete`, `max_output_tokens`).
    case incomplete

    /// Whether the answer ended short of completion, so the client offers `/retry`.
    public var isRetryable: Bool { self == .interrupted || self == .failed || self == .incomplete }
}
