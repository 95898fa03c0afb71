// SPDX-License-Identifier: Apache-2.0

/// One ordered part of a message.
public enum ContentPart: Sendable, Hashable {
    case text(String)
    case image(ImageReference)

    /// The text of a text part, nil for an image.
    public var text: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    /// The reference of an image part, nil for text.
    public var image: ImageReference? {
        if case .image(let image) = self { return image }
        return nil
    }
}
