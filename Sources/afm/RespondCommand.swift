// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMCore
import AFMSystem
import Foundation

/// `afm respond`: one answer on standard output for scripts; nothing is saved.
struct RespondCommand {
    let console: Console
    let client: ResponsesClient
    let model: String?

    /// Asks `text` (or standard input when nil) and returns the exit status from the shared error table.
    func run(text: String?) -> Int32 {
        let input = text ?? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        guard !input.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            console.error("afm: nothing to ask (give TEXT or pipe it on standard input)")
            return 64
        }
        guard let chosen = GatewayModel.resolve(model, client: client, console: console) else {
            return AFMErrorCode.modelUnavailable.exitStatus
        }
        let outcome = TurnRunner(client: client, console: console, neutralizes: console.isTerminal).run(
            model: chosen, history: [], parts: [.text(input)], imageBytes: { _ in [] }, keyboard: nil,
            onKeys: { _ in false }, onProgress: { _ in }
        )
        if !outcome.text.isEmpty && !outcome.text.hasSuffix("\n") { console.write("\n") }
        switch outcome.state {
        case .complete: return 0
        case .incomplete:
            console.error("afm: \(outcome.notice ?? "the answer was cut off")")
            return 0
        default:
            console.error("afm: \(outcome.notice ?? "the answer failed")")
            return Self.exitStatus(forCode: outcome.errorCode)
        }
    }

    /// The shared table's exit status for an error code; codes outside the table (`model_not_found`, HTTP
    /// failures, a lost connection) count as "unavailable".
    static func exitStatus(forCode code: String?) -> Int32 {
        if let code, let known = AFMErrorCode(rawValue: code) { return known.exitStatus }
        if code == "cancelled" { return 130 }
        return code == "internal" ? 70 : AFMErrorCode.modelUnavailable.exitStatus
    }
}
