// SPDX-License-Identifier: Apache-2.0

/// Builds the OpenAI-style error body used for every error the server itself answers.
///
/// The shape is `{"error":{"message":…,"type":…,"param":null,"code":…}}`, the envelope OpenAI clients parse,
/// so a 413 from the HTTP layer looks like any other API error to them.
public enum HTTPErrorBody {
    /// The JSON bytes of an error envelope.
    ///
    /// - Parameters:
    ///   - message: Human-readable text for the client (never internal details).
    ///   - type: The error class, `invalid_request_error` for 4xx and `server_error` for 5xx by convention.
    ///   - code: A stable machine-readable code such as `request_too_large`.
    ///   - param: The offending request parameter, or `nil` (encoded as `null`).
    public static func json(message: String, type: String, code: String, param: String? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + message.utf8.count + type.utf8.count + code.utf8.count)
        out.append(contentsOf: #"{"error":{"message":"#.utf8)
        appendString(message, to: &out)
        out.append(contentsOf: #","type":"#.utf8)
        appendString(type, to: &out)
        out.append(contentsOf: #","param":"#.utf8)
        if let param { appendString(param, to: &out) } else { out.append(contentsOf: "null".utf8) }
        out.append(contentsOf: #","code":"#.utf8)
        appendString(code, to: &out)
        out.append(contentsOf: "}}".utf8)
        return out
    }

    /// The conventional `type` for a status: `invalid_request_error` below 500, `server_error` from 500.
    static func type(forStatus status: Int) -> String {
        status >= 500 ? "server_error" : "invalid_request_error"
    }

    /// Appends a JSON string literal (RFC 8259 escaping; non-ASCII passes through as UTF-8).
    static func appendString(_ string: String, to out: inout [UInt8]) {
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
