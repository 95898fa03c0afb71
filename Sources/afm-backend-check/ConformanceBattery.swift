// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMSchema
import AFMSystem
import CAFMBackendABI
import Dispatch
import Foundation

/// The checks of the ABI conformance battery, each a function that returns what it saw or throws a failure.
///
/// Every check runs in a process of its own (`CheckRunner`), on a fresh load of the library, so a backend that
/// crashes or hangs fails that check alone.
enum ConformanceBattery {
    /// The checks, in the order they run and print.
    enum Check: String, CaseIterable, Sendable {
        case exports
        case negotiation
        case describe
        case lifecycle
        case eventOrder = "event-order"
        case utf8
        case errorCodes = "error-codes"
        case cancel
        case concurrency
        case destroyInFlight = "destroy-in-flight"
        case runner

        /// What the check asserts, for `--help`, the man page and `--list`.
        var summary: String {
            switch self {
            case .exports: "the library exports afm_backend_negotiate and nothing else"
            case .negotiation:
                "ABI 1.x is accepted with a complete backend info, within the host's struct_size (left alone); other "
                    + "majors and structs shorter than 1.0 are refused (incompatible)"
            case .describe: "create, then describe: a document that matches the describe schema, naming the backend"
            case .lifecycle: "create, generate, cancel (finished and unknown ids), get_extension, destroy; two instances"
            case .eventOrder:
                "exactly one terminal event per generation, nothing after it (watched 1 s past it); a refusal sends no event"
            case .utf8: "every text, name and message of an event is valid UTF-8 (non-ASCII input)"
            case .errorCodes:
                "refusals and ERROR events use codes from the table, with a message; request_version 99 is refused "
                    + "(incompatible)"
            case .cancel:
                "cancel from another thread stops a running generation: within 5 s, DONE/cancelled or ERROR/cancelled "
                    + "(at most \(ConformanceBattery.eventsAfterCancel) more events)"
            case .concurrency: "100 concurrent generations are accepted and each ends"
            case .destroyInFlight:
                "destroy right after the terminal events of cancelled generations returns (30 s), joins the backend's threads; "
                    + "one terminal each, no event after destroy"
            case .runner: "the same library under runner hosting (afm-backend-runner): load, generate, cancel, 10 concurrent"
            }
        }

        /// The most a check may take before its process is killed; longer when afm-backend-check itself runs
        /// under a sanitizer (`Sanitizer.slowdown`), which is how `make test-tsan` runs it.
        var deadlineSeconds: Double {
            let seconds: Double =
                switch self {
                case .concurrency, .runner: 180
                default: 60
                }
            return seconds * ConformanceBattery.slowdown
        }
    }

    /// What every check knows: the library and how to configure it.
    struct Context: Sendable {
        var library: String
        var settings: [String: String]
        var runnerPath: String
        var stateDirectory: String
        /// `--max-output-tokens`: the most output tokens any request asks for.
        var maxOutputTokens: Int?
    }

    /// Runs one check.
    ///
    /// - Returns: a one-line summary of what passed.
    static func run(_ check: Check, _ context: Context) throws(CheckFailure) -> String {
        switch check {
        case .exports: try exports(context)
        case .negotiation: try negotiation(context)
        case .describe: try describe(context)
        case .lifecycle: try lifecycle(context)
        case .eventOrder: try eventOrder(context)
        case .utf8: try utf8(context)
        case .errorCodes: try errorCodes(context)
        case .cancel: try cancel(context)
        case .concurrency: try concurrency(context)
        case .destroyInFlight: try destroyInFlight(context)
        case .runner: try RunnerHostingCheck.run(context)
        }
    }

    // MARK: - The checks

    static func exports(_ context: Context) throws(CheckFailure) -> String {
        let names = try ELFExports.names(ofFileAt: context.library)
        let own = names.filter { !ELFExports.linkerSymbols.contains($0) }
        guard own.contains("afm_backend_negotiate") else { throw CheckFailure("afm_backend_negotiate is not exported") }
        let extra = own.filter { $0 != "afm_backend_negotiate" }
        guard extra.isEmpty else {
            throw CheckFailure(
                "\(extra.count) more exported symbol(s): \(extra.prefix(5).joined(separator: ", "))"
                    + (extra.count > 5 ? ", …" : "") + " (build with hidden visibility or a version script)")
        }
        return "only afm_backend_negotiate"
    }

    static func negotiation(_ context: Context) throws(CheckFailure) -> String {
        let backend = try RawBackend(path: context.library)
        var ids: Set<String> = []
        for minor in [UInt32(0), UInt32(AFM_ABI_MINOR)] {
            let result = backend.negotiate(minor: minor)
            guard result.status == AFM_OK else {
                throw CheckFailure("host ABI 1.\(minor) refused: status \(result.status): \(result.message)")
            }
            let info = result.info
            guard info.struct_size >= AFM_BACKEND_INFO_SIZE_1_0 else {
                throw CheckFailure("afm_backend_info.struct_size \(info.struct_size) < \(AFM_BACKEND_INFO_SIZE_1_0)")
            }
            guard info.abi_major == UInt32(AFM_ABI_MAJOR) else {
                throw CheckFailure("host ABI 1.\(minor) accepted, but the backend reports major \(info.abi_major)")
            }
            let id = info.id.map { String(cString: $0) } ?? ""
            guard Self.isValidID(id) else { throw CheckFailure("backend id \(quote(id)) is not 1-64 of a-z 0-9 . - _") }
            guard let version = info.version, !String(cString: version).isEmpty else {
                throw CheckFailure("afm_backend_info.version is NULL or empty")
            }
            guard let table = info.vtable else { throw CheckFailure("afm_backend_info.vtable is NULL") }
            guard table.pointee.struct_size >= AFM_BACKEND_VTABLE_SIZE_1_0 else {
                throw CheckFailure("vtable struct_size \(table.pointee.struct_size) < \(AFM_BACKEND_VTABLE_SIZE_1_0)")
            }
            let slots = table.pointee
            guard slots.create != nil, slots.describe != nil, slots.generate != nil, slots.cancel != nil,
                slots.destroy != nil
            else { throw CheckFailure("a required vtable slot (create … destroy) is NULL") }
            ids.insert(id)
        }
        guard ids.count == 1 else { throw CheckFailure("negotiations reported different ids: \(ids.sorted())") }
        // A host of a later minor hands a larger afm_backend_info: the backend fills its fields and nothing else,
        // and struct_size stays the host's (afm_backend_info is caller-allocated; afm_backend.h).
        let later = backend.negotiateAsLaterHost()
        guard later.status == AFM_OK else {
            throw CheckFailure("host ABI 1.\(AFM_ABI_MINOR + 1) with a larger afm_backend_info refused: status \(later.status)")
        }
        guard later.structSize == UInt32(MemoryLayout<afm_backend_info>.size + 8) else {
            throw CheckFailure(
                "afm_backend_info.struct_size \(MemoryLayout<afm_backend_info>.size + 8) (the host's) became "
                    + "\(later.structSize): the callee leaves the struct_size of a caller-allocated struct alone")
        }
        guard later.tailIntact else { throw CheckFailure("negotiation wrote past the ABI 1.0 afm_backend_info") }
        // Structs shorter than ABI 1.0 (struct_size 8) end at an inaccessible page: refused, nothing touched past them
        // (a backend that reads or writes there crashes this check).
        let short = backend.negotiateWithShortStructs()
        guard short.status == AFM_ERR_INCOMPATIBLE else {
            throw CheckFailure("an afm_backend_info of struct_size 8 was not refused with incompatible: status \(short.status)")
        }
        for major in [UInt32(AFM_ABI_MAJOR) + 1, 0] {
            let result = backend.negotiate(major: major, minor: 0)
            guard result.status == AFM_ERR_INCOMPATIBLE else {
                throw CheckFailure(
                    "host ABI \(major).0 was not refused with incompatible (\(AFM_ERR_INCOMPATIBLE)): status \(result.status)")
            }
            guard result.errorCode == AFM_ERR_INCOMPATIBLE, !result.message.isEmpty else {
                throw CheckFailure("host ABI \(major).0 refused, but error.code \(result.errorCode) / empty message")
            }
        }
        return "\(ids.first!): ABI 1.0 and 1.\(AFM_ABI_MINOR) accepted; \(AFM_ABI_MAJOR + 1).0 and 0.0 refused (incompatible)"
    }

    static func describe(_ context: Context) throws(CheckFailure) -> String {
        let session = try Session(context)
        let instance = try session.instance()
        defer { instance.destroy() }
        let bytes: [UInt8]
        do { bytes = try instance.describe() } catch { throw CheckFailure("describe refused: \(error)") }
        let document: JSONValue
        do { document = try JSONParser.parse(bytes) } catch {
            throw CheckFailure("the describe document is not JSON: \(error.message)")
        }
        let schema: JSONValue
        do { schema = try JSONParser.parse(PackageResources.describe_schema_json) } catch {
            throw CheckFailure("internal: the describe schema does not parse: \(error.message)")
        }
        if let violation = SchemaInstanceValidator(schema: schema).violation(of: document) {
            throw CheckFailure("describe schema: \(violation.path): \(violation.message)")
        }
        guard document["backend"]?.stringValue == session.id else {
            throw CheckFailure("describe says backend \(document["backend"]?.stringValue ?? "?"), negotiation \(session.id)")
        }
        let models = document["models"]?.arrayValue ?? []
        let ids = models.compactMap { $0["id"]?.stringValue }
        guard Set(ids).count == ids.count else { throw CheckFailure("model ids repeat: \(ids)") }
        if document["available"]?.boolValue == false {
            guard document["reason"]?.stringValue != nil, document["reason_code"]?.stringValue != nil else {
                throw CheckFailure("available is false without a reason and a reason_code")
            }
            return "valid; unavailable (\(document["reason_code"]?.stringValue ?? "")): \(document["reason"]?.stringValue ?? "")"
        }
        return "valid; \(ids.count) model(s): \(ids.prefix(4).joined(separator: ", "))"
    }

    static func lifecycle(_ context: Context) throws(CheckFailure) -> String {
        let session = try Session(context)
        let first = try session.instance()
        let second = try session.instance()
        let model = try session.model(of: first)
        for instance in [first, second] {
            let (recorder, refusal) = instance.generate(Session.request(model))
            if let refusal { throw CheckFailure("generate refused: \(refusal)") }
            guard recorder.waitForTerminal(seconds: 30) else { throw CheckFailure("no terminal event within 30 s") }
            instance.cancel(recorder)  // finished: harmless
            instance.cancel(unknown: 1 << 60)
        }
        if first.extensionTable("org.afm-backend-check.none/1") != nil {
            throw CheckFailure("get_extension returned a table for an unknown id")
        }
        try Session.destroy(first, within: 30)
        // The second instance still serves after the first is gone.
        let (recorder, refusal) = second.generate(Session.request(model))
        if let refusal { throw CheckFailure("generate on the second instance refused after the first was destroyed: \(refusal)") }
        guard recorder.waitForTerminal(seconds: 30) else { throw CheckFailure("no terminal event within 30 s") }
        try Session.destroy(second, within: 30)
        return "two instances: create, generate, cancel, destroy"
    }

    static func eventOrder(_ context: Context) throws(CheckFailure) -> String {
        let session = try Session(context)
        let instance = try session.instance()
        let model = try session.model(of: instance)
        var recorders: [GenerationRecorder] = []
        for round in 0..<5 {
            let (recorder, refusal) = instance.generate(Session.request(model, text: "round \(round) of five"))
            if let refusal { throw CheckFailure("generate refused: \(refusal)") }
            guard recorder.waitForTerminal(seconds: 30) else {
                throw CheckFailure("no terminal event within 30 s (generation \(recorder.requestID))")
            }
            recorders.append(recorder)
        }
        let (refused, refusal) = instance.generate(Array("{\"request_version\":1,".utf8))
        awaitGrace(after: recorders)
        for recorder in recorders {
            if let violation = recorder.orderViolation { throw CheckFailure(violation) }
        }
        if refusal != nil, !refused.events.isEmpty {
            throw CheckFailure("a refused generate sent \(refused.events.count) event(s)")
        }
        try Session.destroy(instance, within: 30, settle: false)  // the grace was the settling
        let counts = recorders.map { "\($0.events.count)" }.joined(separator: ", ")
        return "5 generations (\(counts) events), one terminal each"
    }

    static func utf8(_ context: Context) throws(CheckFailure) -> String {
        let session = try Session(context)
        let instance = try session.instance()
        let model = try session.model(of: instance)
        var checked = 0
        for text in ["héllo wörld — ünïcode", "日本語のテキスト 😀 🚀 emoji", "ascii only"] {
            let (recorder, refusal) = instance.generate(Session.request(model, text: text))
            if let refusal { throw CheckFailure("generate refused: \(refusal)") }
            guard recorder.waitForTerminal(seconds: 30) else { throw CheckFailure("no terminal event within 30 s") }
            for (index, event) in recorder.events.enumerated() where event.type != AFM_EVENT_REASONING_STATE {
                // REASONING_STATE is opaque bytes; every other text is UTF-8 by the ABI.
                for (field, bytes) in [("text", event.text), ("name", event.name)]
                where String(validating: bytes, as: UTF8.self) == nil {
                    throw CheckFailure(
                        "event \(index) (type \(event.type)) of generation \(recorder.requestID): \(field) is not valid UTF-8 "
                            + "(\(bytes.prefix(16).map { String(format: "%02x", $0) }.joined(separator: " ")))")
                }
                checked += 1
            }
        }
        try Session.destroy(instance, within: 30)
        return "\(checked) events of 3 generations with non-ASCII input"
    }

    static func errorCodes(_ context: Context) throws(CheckFailure) -> String {
        let session = try Session(context)
        let instance = try session.instance()
        let model = try session.model(of: instance)
        let probes: [(String, [UInt8])] = [
            ("malformed JSON", Array("{\"request_version\":1,".utf8)),
            ("request_version 99", Array(String(decoding: Session.request(model), as: UTF8.self)
                .replacingOccurrences(of: "\"request_version\":1", with: "\"request_version\":99").utf8)),
            ("an unknown model", Session.request(model: "afm-backend-check-no-such-model")),
            ("an ordinary request", Session.request(model)),
        ]
        var outcomes: [String] = []
        for (name, document) in probes {
            let (recorder, refusal) = instance.generate(document)
            // docs/backend-abi.md §1: a reader refuses a document version it does not know, with incompatible.
            if name == "request_version 99", refusal?.status != AFM_ERR_INCOMPATIBLE {
                let outcome = refusal.map { "refused with status \($0.status)" } ?? "accepted"
                throw CheckFailure(
                    "\(name): \(outcome); a backend refuses a request version it does not read with incompatible "
                        + "(\(AFM_ERR_INCOMPATIBLE))")
            }
            if let refusal {
                guard (1...14).contains(refusal.status) else {
                    throw CheckFailure("\(name): refused with status \(refusal.status), not a code of the table (1-14)")
                }
                guard refusal.errorCode == refusal.status else {
                    throw CheckFailure("\(name): returned \(refusal.status) but error.code is \(refusal.errorCode)")
                }
                guard !refusal.message.isEmpty else { throw CheckFailure("\(name): refused with an empty message") }
                outcomes.append("\(name): \(Self.codeName(refusal.status))")
                continue
            }
            guard recorder.waitForTerminal(seconds: 30), let terminal = recorder.terminal else {
                throw CheckFailure("\(name): accepted, but no terminal event within 30 s")
            }
            if terminal.type == AFM_EVENT_ERROR {
                guard (1...13).contains(terminal.code) else {
                    throw CheckFailure("\(name): ERROR event with code \(terminal.code), not a code of the table (1-13)")
                }
                guard !terminal.text.isEmpty else { throw CheckFailure("\(name): ERROR event without a message") }
                outcomes.append("\(name): ERROR \(Self.codeName(terminal.code))")
            } else {
                guard (0...3).contains(terminal.code) else {
                    throw CheckFailure("\(name): DONE with finish reason \(terminal.code), not 0-3")
                }
                outcomes.append("\(name): DONE")
            }
        }
        try Session.destroy(instance, within: 30)
        return outcomes.joined(separator: "; ")
    }

    /// Content events (not USAGE, not terminal) a generation may still send after the cancel returned and still
    /// count as having stopped: the one in flight, and as many again for a backend that notices the cancel at its
    /// next step.
    static let eventsAfterCancel = 2

    /// The longest the two `cancel` calls of the cancel check may take: "non-blocking" with room for a loaded
    /// machine. Not scaled under a sanitizer: a cancel costs microseconds there too, and a scaled limit (4 s under
    /// ThreadSanitizer) would let a cancel that waits for a 2 s generation pass.
    static let cancelBlockingLimit = 1.0

    /// The factor on deadlines that stand for speed: 1, or the sanitizer's this process runs under.
    static let slowdown = Sanitizer.current?.slowdown ?? 1

    static func cancel(_ context: Context) throws(CheckFailure) -> String {
        let session = try Session(context)
        let instance = try session.instance()
        let model = try session.model(of: instance)
        var slowest = 0.0
        var cancelledCount = 0
        for round in 0..<3 {
            let (recorder, refusal) = instance.generate(
                Session.request(model, long: true))
            if let refusal { throw CheckFailure("generate refused: \(refusal)") }
            let cancelled = DispatchSemaphore(value: 0)
            let clock = ContinuousClock()
            nonisolated(unsafe) var calledAt = clock.now
            nonisolated(unsafe) var returnedAt = clock.now
            nonisolated(unsafe) var seenAtCancel = 0
            nonisolated(unsafe) var finishedBefore = false
            Thread.detachNewThread {
                finishedBefore = recorder.terminals > 0
                calledAt = clock.now
                instance.cancel(recorder)
                instance.cancel(recorder)  // idempotent
                // Counted once cancel returned: what a backend emitted while this thread waited to run cancel (a
                // loaded machine can hold it for several events) is not "going on after cancel".
                seenAtCancel = recorder.events.count
                returnedAt = clock.now
                cancelled.signal()
            }
            // On this path the cancelling thread may still be inside `cancel`: the instance is left as it is, never
            // destroyed (no deinit destroys it, and the check's child ends with `_exit`). A clean-up added here must
            // destroy only after `cancelled` was signalled, as afmd leaks an instance it abandoned.
            guard cancelled.wait(timeout: .now() + 5) == .success else {
                throw CheckFailure("cancel did not return within 5 s (round \(round + 1))")
            }
            // `cancel` is non-blocking (docs/backend-abi.md). One that waits for the generation to end would also
            // hide a generation that ignores it: every event came before it returned, so none counts as later.
            let blocked = (returnedAt - calledAt).seconds
            guard blocked <= cancelBlockingLimit else {
                throw CheckFailure(
                    String(format: "round %d: cancel blocked for %.2f s (it must return at once, not wait for the ", round + 1, blocked)
                        + "generation)")
            }
            // The ABI asks for milliseconds; 5 s leaves room for a loaded machine and still catches a deaf backend.
            guard recorder.waitForTerminal(seconds: 5) else {
                throw CheckFailure("no terminal event within 5 s of cancel (round \(round + 1))")
            }
            let terminal = recorder.terminal!
            let after = max(0, (clock.now - returnedAt).seconds)
            slowest = max(slowest, after)
            let ok =
                terminal.type == AFM_EVENT_DONE ? (0...3).contains(terminal.code) : terminal.code == AFM_ERR_CANCELLED
            guard ok else {
                throw CheckFailure("a cancelled generation ended with type \(terminal.type) code \(terminal.code)")
            }
            let endedCancelled = terminal.type == AFM_EVENT_ERROR || terminal.code == AFM_FINISH_CANCELLED
            if finishedBefore { continue }
            if endedCancelled {
                cancelledCount += 1
                continue
            }
            // It was running at the cancel and ended otherwise: only an answer that was ending anyway may do that.
            let later = recorder.events.dropFirst(seenAtCancel).filter {
                !$0.isTerminal && $0.type != AFM_EVENT_USAGE
            }.count
            guard later <= eventsAfterCancel else {
                throw CheckFailure(
                    "round \(round + 1): the generation went on after cancel (\(later) more events, then DONE with finish "
                        + "reason \(terminal.code), not cancelled \(AFM_FINISH_CANCELLED))")
            }
        }
        try Session.destroy(instance, within: 30)
        return "3 generations cancelled from another thread (\(cancelledCount) ended as cancelled, the rest had finished); "
            + String(format: "terminal within %.1f ms", slowest * 1000)
    }

    static func concurrency(_ context: Context) throws(CheckFailure) -> String {
        let session = try Session(context)
        let instance = try session.instance()
        let model = try session.model(of: instance)
        let count = 100
        nonisolated(unsafe) var results = [(recorder: GenerationRecorder, refusal: RawInstance.Refusal?)?](
            repeating: nil, count: count)
        let lock = NSLock()
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let result = instance.generate(Session.request(model, text: "concurrent generation \(index)"))
            lock.withLock { results[index] = result }
        }
        let all = results.compactMap { $0 }
        if let refused = all.first(where: { $0.refusal != nil }) {
            let refusals = all.filter { $0.refusal != nil }.count
            throw CheckFailure("\(refusals) of \(count) concurrent generations refused; first: \(refused.refusal!)")
        }
        let started = ContinuousClock.now
        let budget = 120 * slowdown
        for (index, result) in all.enumerated() {
            let left = budget - (ContinuousClock.now - started).seconds
            guard result.recorder.waitForTerminal(seconds: max(0.1, left)) else {
                let ended = all.filter { $0.recorder.terminals > 0 }.count
                throw CheckFailure(
                    "\(ended) of \(count) concurrent generations ended within \(Int(budget)) s (generation \(index) did not)")
            }
        }
        let seconds = (ContinuousClock.now - started).seconds
        try Session.destroy(instance, within: 30)
        return "\(count) generations accepted and ended" + String(format: " (%.2f s)", seconds)
    }

    /// `destroy` as soon as the header allows it (afm_backend.h: only after every accepted generation delivered its
    /// terminal event): four long generations are cancelled, as a host's drain deadline does, and `destroy` follows
    /// their terminal events at once, while the backend's threads may still be finishing; it must join them.
    static func destroyInFlight(_ context: Context) throws(CheckFailure) -> String {
        let session = try Session(context)
        let instance = try session.instance()
        let model = try session.model(of: instance)
        var recorders: [GenerationRecorder] = []
        for _ in 0..<4 {
            let (recorder, refusal) = instance.generate(
                Session.request(model, long: true))
            if let refusal { throw CheckFailure("generate refused: \(refusal)") }
            recorders.append(recorder)
        }
        let running = recorders.filter { $0.terminals == 0 }.count
        for recorder in recorders { instance.cancel(recorder) }
        for (index, recorder) in recorders.enumerated() where !recorder.waitForTerminal(seconds: 30) {
            throw CheckFailure("generation \(index + 1) of 4 sent no terminal event within 30 s of its cancel")
        }
        try Session.destroy(instance, within: 30, settle: false)
        let counts = recorders.map(\.events.count)
        // A thread destroy did not join may still run now: watch for its events (and for it crashing the check).
        Thread.sleep(forTimeInterval: graceSeconds)
        guard recorders.map(\.events.count) == counts else {
            throw CheckFailure("events arrived after destroy returned")
        }
        for recorder in recorders {
            if let violation = recorder.orderViolation { throw CheckFailure(violation) }
        }
        return "destroy at once after 4 cancelled generations ended (\(running) still running at the cancel) returned; "
            + "one terminal each, nothing after"
    }

    // MARK: - Helpers

    /// How long after a generation's terminal event the order checks keep watching it: a second terminal event or
    /// any event after the first that comes later than this goes unseen.
    static let graceSeconds = 1.0

    /// Waits until `graceSeconds` passed since the latest terminal event of `recorders` (and at least 0.3 s).
    static func awaitGrace(after recorders: [GenerationRecorder]) {
        let latest = recorders.compactMap(\.terminalAt).max() ?? .now
        let until = max(latest + .milliseconds(Int(graceSeconds * 1000)), .now + .milliseconds(300))
        let left = (until - .now).seconds
        if left > 0 { Thread.sleep(forTimeInterval: left) }
    }

    /// `a-z 0-9 . - _`, 1 to 64 characters (the manifest's id rule).
    static func isValidID(_ id: String) -> Bool {
        (1...64).contains(id.utf8.count)
            && id.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || [0x2E, 0x2D, 0x5F].contains($0) }
    }

    /// The table's name of an `AFM_ERR_*` code (AFMCore's error table; `incompatible` is the negotiation's own).
    static func codeName(_ code: Int32) -> String {
        if code == AFM_ERR_INCOMPATIBLE { return "incompatible" }
        let known = AFMErrorCode.allCases.first { $0.abiValue == code && !$0.isHostOnly }
        return known?.rawValue ?? "code \(code)"
    }
}
