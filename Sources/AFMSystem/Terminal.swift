// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// A terminal on a descriptor: whether it is one, its width, and a key-at-a-time input mode.
///
/// ``enterKeyMode()`` turns off canonical input, echo and signal keys (Ctrl-C arrives as byte 3, Ctrl-D as 4),
/// keeping output processing on; ``restore()`` puts back the settings found at ``enterKeyMode()``.
public final class Terminal {
    /// The terminal's descriptor (usually standard input).
    public let descriptor: FileDescriptor
    private var saved: termios?

    public init(descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    deinit { restore() }

    /// Whether `descriptor` is a terminal. The corresponding C function is `isatty`.
    public static func isTerminal(_ descriptor: FileDescriptor) -> Bool {
        isatty(descriptor.rawValue) == 1
    }

    /// The terminal's width in columns, nil when unknown. The corresponding C call is `ioctl(TIOCGWINSZ)`.
    public static func columns(_ descriptor: FileDescriptor) -> Int? {
        var size = winsize()
        guard ioctl(descriptor.rawValue, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    /// Switches to key-at-a-time input without echo or signal keys.
    /// The corresponding C functions are `tcgetattr` and `tcsetattr`.
    public func enterKeyMode() throws(SystemCallError) {
        var settings = termios()
        _ = try blockingSystemCall("tcgetattr") { tcgetattr(descriptor.rawValue, &settings) }
        if saved == nil { saved = settings }
        settings.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
        settings.c_iflag &= ~tcflag_t(IXON | ICRNL)
        withUnsafeMutableBytes(of: &settings.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        _ = try blockingSystemCall("tcsetattr") { tcsetattr(descriptor.rawValue, TCSANOW, &settings) }
    }

    /// Restores the settings saved by ``enterKeyMode()`` (nothing if it was not called).
    public func restore() {
        guard var settings = saved else { return }
        saved = nil
        _ = tcsetattr(descriptor.rawValue, TCSANOW, &settings)
    }
}

// Terminal settings belong to the thread that owns the terminal.
@available(*, unavailable)
extension Terminal: Sendable {}
