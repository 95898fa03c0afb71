// SPDX-License-Identifier: Apache-2.0
import AFMLogging
import Testing

/// One event is one line, whatever the message and the values hold.
@Suite struct LoggerTests {
    static let hostile = "upstream said: bad\n2026-12-01T00:00:00.000Z error afmd: forged line\r\u{1B}]0;owned\u{07}\u{9B}2J\u{2028}end"

    @Test func controlCharactersInTheMessageAndValuesAreEscaped() throws {
        let sink = LogSink(capturing: ())
        let logger = Logger(label: "test.log", sink: sink).with("reason", Self.hostile)
        logger.warning(Self.hostile, ["body": "a\u{1B}[6nb"])
        let line = try #require(sink.capturedLines.first)
        #expect(line.filter { $0 == "\n" }.count == 1 && line.hasSuffix("\n"))
        #expect(!line.dropLast().unicodeScalars.contains { TerminalSafeText.isControl($0) })
        #expect(line.contains(#"bad\n2026-12-01T00:00:00.000Z error afmd: forged line\r\x1b]0;owned\x07\x9b2J\u2028end"#))
        #expect(line.contains(#" reason="upstream said: bad\n2026"#))
        #expect(line.hasSuffix(#" body="a\x1b[6nb""# + "\n"))
    }

    @Test func plainTextIsUnchanged() throws {
        let sink = LogSink(capturing: ())
        Logger(label: "test.log", sink: sink).info("served by http://10.0.0.5:8080/v1 — ok", ["path": "/tmp/a b"])
        let line = try #require(sink.capturedLines.first)
        #expect(line.hasSuffix(#" info test.log: served by http://10.0.0.5:8080/v1 — ok path="/tmp/a b""# + "\n"))
    }

    /// A space, quote or `=` followed by a combining mark is one `Character` but still a space, quote or `=`
    /// to whoever splits the line: the value is quoted, and a parser sees one field.
    @Test func aCombiningMarkDoesNotHideASpaceQuoteOrEquals() throws {
        let sink = LogSink(capturing: ())
        Logger(label: "test.log", sink: sink).info("m", ["reason": "a \u{301}b=\u{301}c"])
        let line = try #require(sink.capturedLines.first)
        #expect(line.hasSuffix(" reason=\"a \u{301}b=\u{301}c\"\n"), "\(line)")
        let fields = line.dropLast().split(separator: " reason=", maxSplits: 1)
        #expect(fields.count == 2 && fields[1].hasPrefix("\"") && fields[1].hasSuffix("\""))
    }
}
