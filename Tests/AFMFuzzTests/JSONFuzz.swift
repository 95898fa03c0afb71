// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// The JSON parser and encoder.
///
/// Property: parse → encode → parse gives the same value, and encoding that again gives the same bytes. Validity
/// is compared with Python's `json` (held to RFC 8259 the same way) by `Fuzz/json_differential.py` over the
/// corpus, from the verdicts this target writes when `AFM_FUZZ_JSON_VERDICTS` names a file.
enum JSONFuzz {
    static func run(_ bytes: [UInt8]) throws {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            recordVerdict(bytes, valid: false)
            return
        }
        recordVerdict(bytes, valid: true)
        let encoded = value.encoded()
        let again: JSONValue
        do {
            again = try JSONParser.parse(encoded)
        } catch {
            throw PropertyViolation(description: "the encoder wrote JSON its parser rejects (\(error)): \(String(decoding: encoded, as: UTF8.self))")
        }
        try check(again == value, "parse → encode → parse changed the value")
        try check(again.encoded() == encoded, "encoding is not stable")
    }

    /// `valid`/`invalid`, a tab and the input in hex, one line per input, for the differential check.
    private static func recordVerdict(_ bytes: [UInt8], valid: Bool) {
        guard let sink = verdictSink else { return }
        var line = valid ? "valid\t" : "invalid\t"
        let digits = Array("0123456789abcdef".utf8)
        var hex = [UInt8]()
        hex.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 15)])
        }
        line += String(decoding: hex, as: UTF8.self) + "\n"
        sink.write(line)
    }

    private static let verdictSink: VerdictSink? = VerdictSink(environmentVariable: "AFM_FUZZ_JSON_VERDICTS")
}
