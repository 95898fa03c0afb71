// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMLogging
import AFMSystem
import Foundation

/// Standard output and error for the client: unbuffered writes, colours only on a terminal.
///
/// Text that came from a model, a server or the history (which holds both) is passed through ``shown(_:)`` or
/// ``field(_:)`` before it is written: an ESC or C1 control in it would otherwise drive the terminal (retitle or
/// clear it, fake a prompt line, write the clipboard with OSC 52, plant an OSC 8 link, or make it answer a query
/// such as `ESC[6n` on standard input, where the answer would become typed-ahead input). The client's own styling
/// escapes (``bold(_:)``, ``dim(_:)``, the Markdown renderer's, OSC 52 of `/copy`) are added after that.
final class Console {
    let output = FileDescriptor(rawValue: 1)
    let errors = FileDescriptor(rawValue: 2)
    /// Whether standard output is a terminal (colours, cursor control and OSC 52 are used only then).
    let isTerminal: Bool
    /// Whether styling escapes are used: on a terminal, unless `NO_COLOR` is set (https://no-color.org).
    let colors: Bool

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        isTerminal = Terminal.isTerminal(FileDescriptor(rawValue: 1))
        colors = isTerminal && (environment["NO_COLOR"] ?? "").isEmpty
    }

    /// A Markdown renderer for this output: laid out on a terminal (at its width when each line starts), plain text
    /// through a pipe, no styling escapes with `NO_COLOR`.
    func markdownRenderer() -> MarkdownRenderer {
        MarkdownRenderer(formatting: isTerminal, colors: colors) { Terminal.columns(FileDescriptor(rawValue: 1)) ?? 80 }
    }

    /// Writes text to standard output.
    func write(_ text: String) {
        Self.writeAll(Array(text.utf8), to: output)
    }

    /// Writes one line to standard error; control characters in `text` are escaped, so it stays one line.
    func error(_ text: String) {
        Self.writeAll(Array((TerminalSafeText.neutralized(text) + "\n").utf8), to: errors)
    }

    /// Message text from outside, for display: line feeds and tabs kept, other control characters shown escaped
    /// (`\x1b`), never sent to the terminal.
    func shown(_ text: some StringProtocol) -> String { TerminalSafeText.neutralized(text, keeping: .messageText) }

    /// A name, title, snippet or notice from outside, for one line: every control character shown escaped.
    func field(_ text: some StringProtocol) -> String { TerminalSafeText.neutralized(text) }

    /// Text in a dim style on a terminal, plain otherwise.
    func dim(_ text: String) -> String { colors ? "\u{1B}[2m" + text + "\u{1B}[22m" : text }

    /// Text in bold on a terminal, plain otherwise.
    func bold(_ text: String) -> String { colors ? "\u{1B}[1m" + text + "\u{1B}[22m" : text }

    static func writeAll(_ bytes: [UInt8], to descriptor: FileDescriptor) {
        var offset = 0
        while offset < bytes.count {
            let result = try? bytes[offset...].withUnsafeBytes { try descriptor.writeFile($0) }
            guard case .processed(let count)? = result, count > 0 else {
                // A non-blocking or closed output: wait briefly, or give up on a hard error.
                if result == nil { return }
                _ = try? descriptor.poll(readable: false, writable: true, timeoutMilliseconds: 100)
                continue
            }
            offset += count
        }
    }
}
