// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMCore
import AFMJSON
import AFMSystem
import Foundation

/// Runs one parsed `afmctl` command against the admin socket and returns the exit status.
struct CtlRunner {
    /// EX_USAGE.
    static let usageStatus: Int32 = 64
    /// EX_NOPERM: the admin socket refused the call for this peer's level (or the socket file's mode did).
    static let permissionStatus: Int32 = 77
    /// Cannot connect: the shared table's "unavailable" status (EX_UNAVAILABLE, 69).
    static let unavailableStatus = AFMErrorCode.modelUnavailable.exitStatus
    /// EX_DATAERR: the input given (a prompt file) is not valid (not UTF-8).
    static let dataErrorStatus: Int32 = 65
    /// EX_NOINPUT: the input file given (`prompt set -f FILE`) cannot be read.
    static let noInputStatus: Int32 = 66
    /// EX_IOERR: an edit was saved and is in force, but not flushed to disk (`SettingNotDurable`).
    static let notDurableStatus: Int32 = 74

    /// A local input afmctl could not use, refused before anything is sent.
    struct InputError: Error {
        var message: String
        var status: Int32
    }

    let options: CtlOptions
    let socket: String

    func run() -> Int32 {
        switch options.command {
        case .help(let topic):
            CtlOutput.print(topic.flatMap { CtlHelp.commands[$0] } ?? CtlHelp.main)
            return 0
        case .version:
            CtlOutput.print("afmctl \(AFMVersion.string)")
            return 0
        default:
            break
        }
        var prompt: String?
        if case .promptSet(let text, let file, _) = options.command {
            do throws(InputError) {
                // Not `text ?? readPrompt(…)`: the autoclosure of `??` throws untyped errors.
                if let text { prompt = text } else { prompt = try Self.readPrompt(file: file ?? "-") }
            } catch {
                CtlOutput.error(error.message)
                return error.status
            }
        }
        do {
            try execute(prompt: prompt)
            return 0
        } catch {
            return report(error)
        }
    }

    /// The text of `prompt set -f FILE` (`-`: standard input), which must be UTF-8: a prompt silently altered by
    /// replacement characters would be sent with every request.
    static func readPrompt(file: String) throws(InputError) -> String {
        let name = file == "-" ? "standard input" : file
        let bytes: [UInt8]
        do {
            bytes =
                file == "-"
                ? try FileContents.read(descriptor: FileDescriptor(rawValue: 0)) : try FileContents.read(path: file)
        } catch {
            throw InputError(message: "cannot read the prompt from \(name): \(error)", status: noInputStatus)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            let offset = Self.firstInvalidUTF8Offset(bytes)
            throw InputError(
                message: "the prompt in \(name) is not valid UTF-8 (first bad byte at offset \(offset)); nothing was changed",
                status: dataErrorStatus)
        }
        return text
    }

    /// The offset of the first byte that does not decode as UTF-8.
    private static func firstInvalidUTF8Offset(_ bytes: [UInt8]) -> Int {
        var offset = 0
        var decoder = UTF8()
        var iterator = bytes.makeIterator()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += UTF8.width(scalar)
            case .emptyInput, .error: return offset
            }
        }
    }

    private func execute(prompt: String?) throws(AdminClientError) {
        let admin = "org.afm.Admin."
        switch options.command {
        case .status:
            let reply = try call(admin + "GetStatus")
            show(reply) { CtlOutput.outline($0).joined(separator: "\n") }
        case .top(let interval):
            try top(interval: interval)
        case .backends:
            let reply = try call(admin + "ListBackends")
            show(reply) { reply in
                let rows = (reply["backends"]?.arrayValue ?? []).map { backend -> String in
                    let id = CtlOutput.scalar(backend["id"] ?? backend["name"] ?? .null)
                    let state = CtlOutput.scalar(backend["state"] ?? .null)
                    let generation = CtlOutput.scalar(backend["generation"] ?? .null)
                    let reason = backend["reason"].map(CtlOutput.scalar) ?? ""
                    return [id, state, generation, reason].joined(separator: "\t")
                }
                return (["BACKEND\tSTATE\tGENERATION\tREASON"] + rows).joined(separator: "\n")
            }
        case .reload(let backend, let wait):
            let connection = try AdminConnection(path: socket)
            var parameters: JSONObject = [:]
            if let backend { parameters["backend"] = .string(backend) }
            try connection.send(method: admin + "Reload", parameters: parameters, more: true)
            while true {
                let reply = try connection.receive(timeoutMilliseconds: wait ? nil : 300_000, method: "Reload")
                if reply.continues {
                    if !options.json { CtlOutput.progress("… " + CtlOutput.line(reply.parameters)) }
                    continue
                }
                show(reply.parameters) { "reloaded: " + CtlOutput.line($0) }
                return
            }
        case .listener(let start):
            let reply = try call(admin + "SetListener", ["state": .string(start ? "running" : "stopped")])
            show(reply) { CtlOutput.outline($0).joined(separator: "\n") }
        case .drain:
            // Returns once the listener closed: the drain delay plus in-flight responses (up to the shutdown timeout).
            let connection = try AdminConnection(path: socket)
            defer { connection.close() }
            let reply = try connection.call(admin + "SetListener", ["state": "draining"], timeoutMilliseconds: nil)
            show(reply) { CtlOutput.outline($0).joined(separator: "\n") }
        case .promptGet:
            let reply = try call(admin + "GetPrompt")
            show(reply) { $0["text"]?.stringValue ?? "" }
        case .promptSet(_, _, let revision):
            var parameters: JSONObject = ["text": .string(prompt ?? "")]
            if let revision { parameters["ifRevision"] = .number(JSONNumber(revision)) }
            let reply = try call(admin + "SetPrompt", parameters)
            show(reply) { "prompt saved (revision \(CtlOutput.scalar($0["revision"] ?? .null)))" }
        case .configShow(let origin, let key):
            var parameters: JSONObject = ["withOrigin": .bool(origin)]
            if let key { parameters["keys"] = [.string(key)] }
            let reply = try call(admin + "GetConfig", parameters)
            show(reply) { reply in
                (reply["values"]?.arrayValue ?? []).map { entry in
                    let pair = "\(CtlOutput.scalar(entry["key"] ?? .null))=\(CtlOutput.scalar(entry["value"] ?? ""))"
                    return origin ? "\(CtlOutput.scalar(entry["origin"] ?? .null))\t\(pair)" : pair
                }.joined(separator: "\n")
            }
        case .settingsSet(let key, let value):
            let reply = try call(admin + "SetSetting", ["key": .string(key), "value": .string(value)])
            show(reply) { _ in "saved \(key)=\(value)" }
        case .help, .version:
            break
        }
    }

    private func call(_ method: String, _ parameters: JSONObject = [:]) throws(AdminClientError) -> JSONValue {
        let connection = try AdminConnection(path: socket)
        defer { connection.close() }
        return try connection.call(method, parameters)
    }

    private func show(_ reply: JSONValue, human: (JSONValue) -> String) {
        CtlOutput.print(options.json ? CtlOutput.json(reply) : human(reply))
    }

    private func top(interval: Int) throws(AdminClientError) {
        Self.endOnStopSignals()
        let connection = try AdminConnection(path: socket)
        try connection.send(
            method: "org.afm.Admin.WatchCounters", parameters: ["intervalMs": .number(JSONNumber(interval))], more: true)
        let terminal = UserDatabase.isTerminal(1) && !options.json
        while true {
            let reply = try connection.receive(timeoutMilliseconds: nil, method: "WatchCounters")
            if options.json {
                CtlOutput.print(CtlOutput.json(reply.parameters))
            } else {
                // The quotas get their own rendering: the generic one would print every field of every upstream.
                var counters = reply.parameters.objectValue ?? [:]
                let quotas = counters.removeValue(forKey: "quota") ?? .array([])
                let caches = counters.removeValue(forKey: "prompt_cache") ?? .array([])
                if terminal {
                    // Home the cursor and clear the screen, then draw the snapshot.
                    CtlOutput.raw("\u{1B}[H\u{1B}[2J" + "afmctl top — \(CtlOutput.field(socket)) — Ctrl-C exits\n\n")
                    let extra = CtlOutput.quotaLines(quotas) + CtlOutput.promptCacheLines(caches)
                    CtlOutput.print(
                        (CtlOutput.outline(.object(counters)) + (extra.isEmpty ? [] : [""] + extra))
                            .joined(separator: "\n"))
                } else {
                    let pairs =
                        [CtlOutput.line(.object(counters))] + CtlOutput.quotaPairs(quotas) + CtlOutput.promptCachePairs(caches)
                    CtlOutput.print(pairs.joined(separator: " "))
                }
            }
            if !reply.continues { return }
        }
    }

    /// Makes SIGTERM and SIGINT end the process with status 0: they are how a live monitor is stopped, so (like
    /// procps `top` and `watch`) that is a normal end, not a failure. A SIGINT ignored on entry (a background job of a
    /// script) stays ignored.
    ///
    /// The signals are taken by `SignalListener`'s `sigwait`, which needs them blocked in every thread; afmctl has no
    /// other thread yet. Output is unbuffered (`FileHandle` writes), so ending at once loses nothing already printed.
    /// Should the listener's thread not start, the signals get their default action back (death by the signal).
    private static func endOnStopSignals() {
        let signals = InheritedSignals.isIgnored(SIGINT) ? [SIGTERM] : [SIGTERM, SIGINT]
        SignalListener.blockInCallingThread(signals)
        do {
            try SignalListener.start(signals) { _ in CurrentProcess.exitImmediately(0) }
        } catch {
            InheritedSignals.reset()
        }
    }

    /// Prints the error and maps it to the exit status table.
    private func report(_ error: AdminClientError) -> Int32 {
        CtlOutput.error(error.description)
        switch error {
        case .cannotConnect(_, _, let denied):
            return denied ? Self.permissionStatus : Self.unavailableStatus
        case .timedOut:
            return AFMErrorCode.timeout.exitStatus
        case .connectionClosed, .protocolError:
            return AFMErrorCode.internal.exitStatus
        case .remote(let remote):
            switch remote.name {
            case "org.afm.Admin.PermissionDenied": return Self.permissionStatus
            case "org.afm.Admin.InvalidSetting", "org.varlink.service.InvalidParameter":
                return AFMErrorCode.invalidRequest.exitStatus
            case "org.afm.Admin.SettingNotDurable": return Self.notDurableStatus
            case "org.varlink.service.MethodNotFound", "org.varlink.service.InterfaceNotFound":
                return AFMErrorCode.incompatible.exitStatus
            default: return AFMErrorCode.internal.exitStatus
            }
        }
    }
}
