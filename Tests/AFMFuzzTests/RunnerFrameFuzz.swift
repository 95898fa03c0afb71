// SPDX-License-Identifier: Apache-2.0
@testable import AFMBackends

/// The frames between afmd and a backend runner (a runner is a separate process that may be compromised or
/// broken, so afmd decodes what it sends defensively).
///
/// Property: a body that decodes, encoded again, decodes to the same frame.
enum RunnerFrameFuzz {
    static func run(_ bytes: [UInt8]) throws {
        let frame: RunnerFrame
        switch decode(bytes) {
        case .success(let decoded):
            frame = decoded
        case .failure(let error):
            try check(!error.message.isEmpty, "a decode error without a message")
            return
        }
        var encoded: [UInt8] = []
        frame.encode(into: &encoded)
        try check(encoded.count >= 4, "an encoded frame without its length prefix")
        let body = Array(encoded[4...])
        let length = Int(encoded[0]) | Int(encoded[1]) << 8 | Int(encoded[2]) << 16 | Int(encoded[3]) << 24
        try check(length == body.count, "the length prefix \(length) does not match a body of \(body.count) bytes")
        let again = try decode(body).get()
        try check(again == frame, "decode → encode → decode changed the frame:\n  \(frame)\n  \(again)")
    }

    static func decode(_ bytes: [UInt8]) -> Result<RunnerFrame, RunnerFrame.DecodeError> {
        bytes.withUnsafeBytes { body in
            Result { () throws(RunnerFrame.DecodeError) -> RunnerFrame in try RunnerFrame.decode(body) }
        }
    }
}
