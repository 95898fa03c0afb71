// SPDX-License-Identifier: Apache-2.0

extension JSONValue {
    /// The compact UTF-8 encoding: no whitespace, object members in order, numbers as their literals,
    /// strings minimally escaped (see ``JSONEncoding``).
    public func encoded() -> [UInt8] {
        JSONEncoding.encode(self)
    }

    /// Appends the compact encoding to `buffer`, so callers can reuse one buffer for a whole response.
    public func encode(into buffer: inout [UInt8]) {
        JSONEncoding.append(self, to: &buffer)
    }

    /// The compact encoding as a `String`.
    public var jsonString: String {
        String(decoding: JSONEncoding.encode(self), as: UTF8.self)
    }

    /// A human-readable encoding with two-space indentation, for logs, docs and fixtures. No trailing
    /// newline.
    public func prettyPrinted() -> String {
        var buffer: [UInt8] = []
        JSONEncoding.appendPretty(self, to: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}
