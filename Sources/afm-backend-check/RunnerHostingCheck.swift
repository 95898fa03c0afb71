// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMLogging
import Dispatch
import Foundation
import Synchronization

/// The `runner` check: the library served by `afm-backend-runner`, through AFMBackends' registry as afmd hosts a
/// `"hosting": "runner"` backend (its own process, scrubbed environment, frames over a socket pair).
enum RunnerHostingCheck {
    static func run(_ context: ConformanceBattery.Context) throws(CheckFailure) -> String {
        guard FileManager.default.isExecutableFile(atPath: context.runnerPath) else {
            throw CheckFailure("no afm-backend-runner at \(context.runnerPath) (give --runner PATH)")
        }
        let id = try RawBackend(path: context.library).vtable().id
        // The id names files below (the manifest's rule keeps it a plain file name: no "/", no "..").
        guard ConformanceBattery.isValidID(id) else {
            throw CheckFailure("backend id \(quote(id)) is not 1-64 of a-z 0-9 . - _; no backend directory can hold it")
        }
        let root = context.stateDirectory + "/runner-check"
        let directory = root + "/backends"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: context.library, toPath: directory + "/\(id).so")
            let manifest =
                #"{"manifest_version":1,"id":\#(quote(id)),"library":\#(quote(id + ".so")),"abi_major":1,"#
                + #""version":"0","hosting":"runner"}"#
            try manifest.write(toFile: directory + "/\(id).json", atomically: true, encoding: .utf8)
        } catch {
            throw CheckFailure("cannot prepare a backend directory in \(root): \(error)")
        }
        let sink = LogSink(capturing: ())
        let registry = BackendRegistry(
            configuration: .init(
                backendDirectory: directory, copyDirectory: root + "/copies", stateDirectory: root + "/state",
                settings: [id: context.settings], drainTimeout: .seconds(10), runnerPath: context.runnerPath),
            logger: Logger(label: "afm-backend-check", level: .info, sink: sink))
        let outcome = Mutex<Result<String, CheckFailure>>(.failure(CheckFailure("the check did not finish")))
        let done = DispatchSemaphore(value: 0)
        Task {
            let result = await serve(registry: registry, id: id, maxOutputTokens: min(64, context.maxOutputTokens ?? 64))
            await registry.drainAll(deadline: .seconds(10))
            outcome.withLock { $0 = result }
            done.signal()
        }
        // Within the check's own process limit (180 s, scaled under a sanitizer like it).
        let limit = 170 * ConformanceBattery.slowdown
        guard done.wait(timeout: .now() + limit) == .success else {
            throw CheckFailure("runner hosting did not finish within \(Int(limit)) s")
        }
        switch outcome.withLock({ $0 }) {
        case .success(let summary): return summary
        case .failure(let failure):
            let log = sink.capturedLines.suffix(3).joined(separator: " | ")
            throw CheckFailure(failure.description + (log.isEmpty ? "" : " (log: \(log))"))
        }
    }

    private static func serve(registry: BackendRegistry, id: String, maxOutputTokens: Int) async -> Result<String, CheckFailure> {
        await registry.loadAll()
        guard let status = registry.statuses().first(where: { $0.id == id }) else {
            return .failure(CheckFailure("the registry did not load \(id)"))
        }
        guard status.state == "ready" else {
            return .failure(CheckFailure("under runner hosting the backend is \(status.state): \(status.reason ?? "no reason")"))
        }
        guard let model = status.models.first?.id else { return .failure(CheckFailure("no model under runner hosting")) }
        // One generation to its end.
        let first = await generate(
            registry, model: model, text: "Hello from afm-backend-check", cancel: false, maxOutputTokens: maxOutputTokens)
        guard case .success(let events) = first else { return first.map { _ in "" } }
        // One cancelled (a short answer: a long one a backend ignores the cancel of would end in the host's watchdog
        // killing the runner, which is the cancel check's finding, not this one's).
        let cancelled = await generate(
            registry, model: model, text: Session.longText, cancel: true, maxOutputTokens: maxOutputTokens)
        if case .failure(let failure) = cancelled { return .failure(failure) }
        // Ten at once (the in-process check takes 100; here each crosses the runner's channel).
        let failures = await withTaskGroup(of: CheckFailure?.self) { group in
            for index in 0..<10 {
                group.addTask {
                    let outcome = await generate(
                        registry, model: model, text: "runner \(index)", cancel: false, maxOutputTokens: maxOutputTokens)
                    if case .failure(let failure) = outcome {
                        return failure
                    }
                    return nil
                }
            }
            var failures: [CheckFailure] = []
            for await failure in group { if let failure { failures.append(failure) } }
            return failures
        }
        if let failure = failures.first {
            return .failure(CheckFailure("\(failures.count) of 10 concurrent generations failed; first: \(failure)"))
        }
        return .success("runner: ready; a generation (\(events.count) events), a cancel, 10 concurrent")
    }

    /// One generation through a lease, to its terminal event.
    private static func generate(
        _ registry: BackendRegistry, model: String, text: String, cancel: Bool, maxOutputTokens: Int
    ) async -> Result<[BackendEvent], CheckFailure> {
        let stream: GenerationStream
        do {
            stream = try registry.lease(model: model).start(
                requestDocument: Session.request(model: model, text: text, maxOutputTokens: maxOutputTokens))
        } catch {
            return .failure(CheckFailure("generate under runner hosting refused: \(error)"))
        }
        if cancel { stream.cancel() }
        var events: [BackendEvent] = []
        for await event in stream { events.append(event) }
        switch events.last {
        case .done?: return .success(events)
        case .failed(let code, let message)? where cancel && code == .cancelled: return .success(events + [.failed(code, message: message)])
        case .failed(let code, let message)?:
            return .failure(CheckFailure("under runner hosting the generation failed: \(code.rawValue): \(message)"))
        default: return .failure(CheckFailure("under runner hosting the generation ended without a terminal event"))
        }
    }
}
