// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMDialects
import AFMResponses

/// Request decoding of the three dialects: Responses, Chat Completions and Anthropic Messages.
///
/// Property: any body is either accepted or refused with a client error (4xx) that names its code; never a
/// server error, never a crash.
enum RequestDecodingFuzz {
    static func responses(_ bytes: [UInt8]) throws {
        do {
            _ = try ResponsesRequest(body: bytes)
        } catch {
            try checkClientError(error)
        }
    }

    static func chatCompletions(_ bytes: [UInt8]) throws {
        do {
            _ = try ChatCompletionsRequest(body: bytes)
        } catch {
            try checkClientError(error)
        }
    }

    static func messages(_ bytes: [UInt8]) throws {
        for counting in [false, true] {
            do {
                _ = try MessagesRequest(body: bytes, counting: counting)
            } catch {
                try checkClientError(error)
            }
        }
    }

    private static func checkClientError(_ error: AFMError) throws {
        try check((400..<500).contains(error.httpStatus), "a request body got a \(error.httpStatus): \(error)")
        try check(!error.message.isEmpty, "an error without a message: \(error)")
    }
}
