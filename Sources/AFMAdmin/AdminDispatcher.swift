// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMSystem

/// Turns one varlink call into handler calls and replies: parsing, method look-up, level check, parameters.
///
/// Socket-free, so the protocol rules are tested without a server. Every reply is a complete varlink message
/// (`{"parameters":…}`, `{"parameters":…,"continues":true}` or `{"error":…,"parameters":…}`).
public struct AdminDispatcher: Sendable {
    /// The `org.varlink.service.GetInfo` reply.
    public struct ServiceInfo: Sendable, Hashable {
        public var vendor = "AFM"
        public var product = "afmd"
        public var version = AFMVersion.string
        public var url = "https://github.com/afm/afm"

        /// Creates the default description of afmd.
        public init() {}

        var json: JSONValue {
            [
                "vendor": .string(vendor), "product": .string(product), "version": .string(version), "url": .string(url),
                "interfaces": ["org.varlink.service", .string(AdminMethod.interface)],
            ]
        }
    }

    let handler: any AdminHandler
    let info: ServiceInfo

    /// Creates a dispatcher for `handler`.
    public init(handler: any AdminHandler, info: ServiceInfo = ServiceInfo()) {
        self.handler = handler
        self.info = info
    }

    /// Runs the call in `frame` for a peer and sends its replies through `emit` (none for `oneway` calls).
    public func run(
        frame: [UInt8], credentials: PeerCredentials, level: AdminLevel, emit: @escaping @Sendable (JSONValue) -> Void
    ) async {
        let call: JSONObject
        do {
            guard case .object(let object) = try JSONParser.parse(frame) else {
                emit(AdminError.malformedCall("a call must be a JSON object").reply)
                return
            }
            call = object
        } catch {
            emit(AdminError.malformedCall("the call is not valid JSON: \(error)").reply)
            return
        }
        let oneway = call["oneway"]?.boolValue ?? false
        let discard: @Sendable (JSONValue) -> Void = { _ in }
        let send = oneway ? discard : emit
        do throws(AdminError) {
            try await dispatch(call, credentials: credentials, level: level, send: send)
        } catch {
            send(error.reply)
        }
    }

    private func dispatch(
        _ call: JSONObject, credentials: PeerCredentials, level: AdminLevel, send: @escaping @Sendable (JSONValue) -> Void
    ) async throws(AdminError) {
        guard let name = call["method"]?.stringValue else { throw .malformedCall("the call has no \"method\" string") }
        let more = call["more"]?.boolValue ?? false
        let parameters: JSONObject
        switch call["parameters"] {
        case nil, .null?: parameters = [:]
        case .object(let object)?: parameters = object
        default: throw .invalidParameter("parameters", "parameters must be an object")
        }
        @Sendable func reply(_ value: JSONValue, continues: Bool = false) {
            var message: JSONObject = ["parameters": value.objectValue.map(JSONValue.object) ?? ["value": value]]
            if continues { message["continues"] = true }
            send(.object(message))
        }

        switch name {
        case "org.varlink.service.GetInfo":
            return reply(info.json)
        case "org.varlink.service.GetInterfaceDescription":
            let interface = try Parameters(parameters).string("interface")
            guard interface == AdminMethod.interface || interface == "org.varlink.service" else {
                throw .interfaceNotFound(interface)
            }
            return reply(["description": .string(Self.describe(interface))])
        default:
            break
        }
        guard let method = AdminMethod(qualifiedName: name) else {
            if name.hasPrefix(AdminMethod.interface + ".") || name.hasPrefix("org.varlink.service.") {
                throw .methodNotFound(name)
            }
            let interface = name.split(separator: ".").dropLast().joined(separator: ".")
            throw .interfaceNotFound(interface.isEmpty ? name : interface)
        }
        guard level >= method.minimumLevel else {
            throw .permissionDenied(method: name, required: method.minimumLevel, granted: level)
        }
        let context = AdminCallContext(credentials: credentials, level: level, method: method, wantsMore: more)
        let arguments = Parameters(parameters)
        switch method {
        case .getInfo:
            reply(try await handler.getInfo(context))
        case .getStatus:
            reply(try await handler.getStatus(context))
        case .watchCounters:
            let interval = try arguments.optionalInt("intervalMs", in: 50...3_600_000) ?? 1000
            let stream = try await handler.watchCounters(context, intervalMilliseconds: interval)
            var last: JSONValue = [:]
            for await snapshot in stream {
                guard more else { return reply(snapshot) }
                reply(snapshot, continues: true)
                last = snapshot
            }
            reply(last)
        case .listBackends:
            reply(try await handler.listBackends(context))
        case .reload:
            let backend = try arguments.optionalString("backend")
            let progress = more ? AdminProgress { reply($0, continues: true) } : .discard
            reply(try await handler.reload(context, backend: backend, progress: progress))
        case .setListener:
            let state = try arguments.string("state")
            guard ["running", "start", "stopped", "stop", "draining", "drain"].contains(state) else {
                throw .invalidParameter("state", "state must be \"running\", \"stopped\" or \"draining\", not \"\(state)\"")
            }
            if state == "draining" || state == "drain" {
                reply(try await handler.drainListener(context))
                return
            }
            reply(try await handler.setListener(context, running: state == "running" || state == "start"))
        case .getPrompt:
            reply(try await handler.getPrompt(context))
        case .setPrompt:
            let text = try arguments.string("text")
            let revision = try arguments.optionalInt("ifRevision", in: 0...Int.max)
            reply(try await handler.setPrompt(context, text: text, ifRevision: revision))
        case .getConfig:
            let keys = try arguments.optionalStrings("keys") ?? []
            let withOrigin = try arguments.optionalBool("withOrigin") ?? false
            reply(try await handler.getConfig(context, keys: keys, withOrigin: withOrigin))
        case .setSetting:
            let key = try arguments.string("key")
            let value = try arguments.scalarText("value")
            reply(try await handler.setSetting(context, key: key, value: value))
        }
    }

    /// A varlink IDL sketch of the interface, for `GetInterfaceDescription`.
    static func describe(_ interface: String) -> String {
        if interface == "org.varlink.service" {
            return "interface org.varlink.service\nmethod GetInfo() -> (vendor: string, product: string, version: string, url: string, interfaces: []string)\n"
        }
        return AdminMethod.allCases.map { "# level: \($0.minimumLevel)\nmethod \($0.rawValue)(…) -> (…)" }
            .reduce("interface \(AdminMethod.interface)\n") { $0 + $1 + "\n" }
    }
}

/// Typed access to a call's parameters, with varlink `InvalidParameter` errors.
struct Parameters {
    let object: JSONObject
    init(_ object: JSONObject) { self.object = object }

    func string(_ name: String) throws(AdminError) -> String {
        guard let value = try optionalString(name) else { throw .invalidParameter(name, "\(name) is required") }
        return value
    }

    func optionalString(_ name: String) throws(AdminError) -> String? {
        switch object[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw .invalidParameter(name, "\(name) must be a string")
        }
    }

    func optionalInt(_ name: String, in range: ClosedRange<Int>) throws(AdminError) -> Int? {
        switch object[name] {
        case nil, .null?: return nil
        case .number(let number)?:
            guard let value = number.intValue, range.contains(value) else {
                throw .invalidParameter(name, "\(name) must be a whole number in \(range.lowerBound)…\(range.upperBound)")
            }
            return value
        default: throw .invalidParameter(name, "\(name) must be a number")
        }
    }

    func optionalBool(_ name: String) throws(AdminError) -> Bool? {
        switch object[name] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw .invalidParameter(name, "\(name) must be true or false")
        }
    }

    func optionalStrings(_ name: String) throws(AdminError) -> [String]? {
        switch object[name] {
        case nil, .null?: return nil
        case .array(let items)?:
            var result: [String] = []
            for item in items {
                guard let text = item.stringValue else { throw .invalidParameter(name, "\(name) must be an array of strings") }
                result.append(text)
            }
            return result
        default: throw .invalidParameter(name, "\(name) must be an array of strings")
        }
    }

    /// A string, number or boolean parameter as text (`SetSetting`'s value).
    func scalarText(_ name: String) throws(AdminError) -> String {
        switch object[name] {
        case .string(let text)?: return text
        case .number(let number)?: return number.literal
        case .bool(let flag)?: return flag ? "yes" : "no"
        default: throw .invalidParameter(name, "\(name) is required (a string, number or boolean)")
        }
    }
}
