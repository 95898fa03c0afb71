// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Builds the dotted JSON paths used in errors and warnings.
enum SchemaPath {
    /// `base.key`, or `base["key"]` when `key` is not a plain name (letters, digits, `_`, `-`, `$`), so a
    /// path can always be read back unambiguously.
    static func member(_ base: String, _ key: String) -> String {
        let plain =
            !key.isEmpty
            && key.utf8.allSatisfy { byte in
                (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "$")
            }
        if plain {
            return base.isEmpty ? key : base + "." + key
        }
        var quoted: [UInt8] = []
        JSONEncoding.appendEscapedString(key, to: &quoted)
        return base + "[" + String(decoding: quoted, as: UTF8.self) + "]"
    }

    /// `base[index]`.
    static func index(_ base: String, _ index: Int) -> String {
        base + "[\(index)]"
    }
}
