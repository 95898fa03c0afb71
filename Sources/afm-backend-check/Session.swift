// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import CAFMBackendABI
import Dispatch
import Foundation

/// A negotiated library and what the generation checks need from it: fresh instances, the model to ask, requests.
struct Session {
    let backend: RawBackend
    let id: String
    let table: UnsafePointer<afm_backend_vtable>
    let context: ConformanceBattery.Context

    init(_ context: ConformanceBattery.Context) throws(CheckFailure) {
        backend = try RawBackend(path: context.library)
        (id, table) = try backend.vtable()
        self.context = context
    }

    /// A new instance, configured with the context's settings.
    func instance() throws(CheckFailure) -> RawInstance {
        do {
            return try RawInstance(
                table: table, backend: id, settings: context.settings, stateDirectory: context.stateDirectory)
        } catch {
            throw CheckFailure("create refused: \(error)")
        }
    }

    /// The model the generation checks ask: the first of the describe document, with its output budget.
    struct Model {
        var id: String
        var maxOutputTokens: Int
        /// The input of a long answer: `longText`, or with `--max-output-tokens` (a real model, whose answer is long by
        /// its output budget, not by echoing) a short one, so its prompt does not dominate the checks.
        var longInput = Session.longText
    }

    /// The first model of the instance's describe document; fails when the backend cannot serve.
    func model(of instance: RawInstance) throws(CheckFailure) -> Model {
        let bytes: [UInt8]
        do { bytes = try instance.describe() } catch { throw CheckFailure("describe refused: \(error)") }
        guard let document = try? JSONParser.parse(bytes) else { throw CheckFailure("the describe document is not JSON") }
        if document["available"]?.boolValue == false {
            throw CheckFailure(
                "the backend is unavailable (\(document["reason"]?.stringValue ?? "no reason")); configure it with --setting")
        }
        guard let first = document["models"]?.arrayValue?.first, let id = first["id"]?.stringValue else {
            throw CheckFailure("the describe document names no model")
        }
        let context = first["context_tokens"]?.numberValue?.intValue ?? 4096
        let output = first["max_output_tokens"]?.numberValue?.intValue ?? max(1, context / 4)
        return Model(
            id: id, maxOutputTokens: max(1, min(output, self.context.maxOutputTokens ?? output)),
            longInput: self.context.maxOutputTokens == nil ? Self.longText : "Write a long story about " + Self.longText.prefix(40))
    }

    /// How long the checks other than destroy-in-flight wait between the last terminal event and `destroy`, so a
    /// backend thread still finishing after its terminal (which `destroy` must join) ends first: only
    /// destroy-in-flight tests a `destroy` that comes at once.
    static let settleSeconds = 0.5

    /// Destroys `instance` on another thread and waits at most `seconds` for it to return; with `settle`, after
    /// `settleSeconds`.
    static func destroy(_ instance: RawInstance, within seconds: Int, settle: Bool = true) throws(CheckFailure) {
        if settle { Thread.sleep(forTimeInterval: settleSeconds) }
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            instance.destroy()
            done.signal()
        }
        guard done.wait(timeout: .now() + .seconds(seconds)) == .success else {
            throw CheckFailure("destroy did not return within \(seconds) s")
        }
    }

    /// About 200 words (under 500 tokens by any count): long enough that an echoing or streaming model is still
    /// running when the check acts.
    static let longText = (0..<200).map { "word\($0)" }.joined(separator: " ")

    /// A generation request document (docs/backend-abi.md §8.2) with one user message.
    static func request(_ model: Model, text: String = "Hello from afm-backend-check", long: Bool = false) -> [UInt8] {
        request(model: model.id, text: long ? model.longInput : text, maxOutputTokens: long ? model.maxOutputTokens : min(64, model.maxOutputTokens))
    }

    /// A generation request document for model `model`.
    static func request(model: String, text: String = "Hello from afm-backend-check", maxOutputTokens: Int = 64) -> [UInt8] {
        Array(
            (#"{"request_version":1,"response_id":"resp_afm_backend_check","model":\#(quote(model)),"system":[],"#
                + #""input":[{"type":"message","role":"user","content":[{"type":"text","text":\#(quote(text))}]}],"#
                + #""tools":[],"tool_choice":{"mode":"auto"},"parallel_tool_calls":true,"#
                + #""max_output_tokens":\#(maxOutputTokens),"temperature":null,"top_p":null,"reasoning_effort":null,"#
                + #""stream":true}"#).utf8)
    }
}
