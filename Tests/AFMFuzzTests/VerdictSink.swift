// SPDX-License-Identifier: Apache-2.0
import Glibc

/// Appends lines to the file an environment variable names (for checks that run outside the process, such as
/// the JSON differential against Python).
final class VerdictSink: Sendable {
    private let descriptor: Int32

    init?(environmentVariable: String) {
        guard let path = getenv(environmentVariable).map({ String(cString: $0) }), !path.isEmpty else { return nil }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    func write(_ line: String) {
        var line = line
        line.withUTF8 { bytes in _ = Glibc.write(descriptor, bytes.baseAddress, bytes.count) }
    }
}
