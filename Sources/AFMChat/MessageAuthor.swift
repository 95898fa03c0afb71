// SPDX-License-Identifier: Apache-2.0

/// Who wrote a message.
public enum MessageAuthor: String, Sendable, Hashable, CaseIterable {
    case user
    case assistant
}
