// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// Standard output and error for the client: unbuffered writes, colours only on a terminal.
final class Console {
    let output = FileDescriptor(rawValue: 1)
    let errors = FileDescriptor(rawValue: 2)
    /// Whether standard output is a terminal (colours, cursor control and OSC 52 are used only then).
    let isTerminal: Bool

    init() {
        isTerminal = Terminal.isTerminal(FileDescriptor(rawValue: 1))
    }

    /// Writes text to standard output.
    func write(_ text: String) {
        Self.writeAll(Array(text.utf8), to: output)
    }

    /// Writes one line to standard error.
    func error(_ text: String) {
        Self.writeAll(Array((text + "\n").utf8), to: errors)
    }

    /// Text in a dim style on a terminal, plain otherwise.
    func dim(_ text: String) -> String { isTerminal ? "\u{1B}[2m" + text + "\u{1B}[22m" : text }

    /// Text in bold on a terminal, plain otherwise.
    func bold(_ text: String) -> String { isTerminal ? "\u{1B}[1m" + text + "\u{1B}[22m" : text }

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
