// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Testing

/// The byte-buffer helpers of hand-written encoders write what `String` would.
@Suite struct ByteBufferLiteralTests {
    @Test(arguments: [0, 1, 9, 10, 99, 100, 12_345, -1, -10, -987_654_321, Int.max, Int.min])
    func decimalsAreSpelledAsStringSpellsThem(value: Int) {
        var bytes: [UInt8] = [UInt8(ascii: "x")]
        bytes.append(decimal: value)
        #expect(String(decoding: bytes, as: UTF8.self) == "x" + String(value))
    }

    @Test func literalsAreAppendedVerbatim() {
        var bytes: [UInt8] = []
        bytes.append(literal: #"{"a":"é\n"}"#)
        bytes.append(literal: "")
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"a":"é\n"}"#)
    }
}
