// SPDX-License-Identifier: Apache-2.0
import AFMBridge
import AFMClient
import AFMJSON
import Synchronization

/// The bridge's message decoder (`JSONRPCRequest`) and its dispatcher (`Bridge`), fed newline-delimited messages
/// as `afm bridge` reads them from a host.
///
/// Properties: a line either decodes to a request that, encoded again, decodes to the same request, or fails with
/// a JSON-RPC protocol error (parse error, invalid request, invalid params); and the dispatcher answers every
/// non-blank line that carries an id, or that cannot be read as a request, exactly once — however malformed its
/// params — and shuts down afterwards.
enum BridgeMessageFuzz {
    /// Where agents would reach their gateway: a port nothing listens on (a fuzzer must not talk to a real afmd).
    static let gateway = ServerURL(string: "http://127.0.0.1:1")!

    static func run(_ bytes: [UInt8]) throws {
        var dispatched: [ArraySlice<UInt8>] = []
        var expectedAnswers = 0
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            // The dispatcher ignores blank lines (spaces, tabs, a CR) without an answer.
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            let decoded = Result { () throws(JSONRPCRequest.Failure) in try JSONRPCRequest(message: line) }
            switch decoded {
            case .success(let request):
                var object: JSONObject = ["jsonrpc": "2.0", "method": .string(request.method), "params": .object(request.params)]
                if let id = request.id { object["id"] = id }
                let again = try? JSONRPCRequest(message: JSONValue.object(object).encoded()[...])
                try check(again == request, "a request encoded again decoded to \(String(describing: again)), not \(request)")
                // A fuzzer never starts processes (MCP servers) or reaches a gateway an agent names itself.
                if request.params["mcp_servers"] != nil || request.params["url"] != nil { continue }
                if !request.isNotification { expectedAnswers += 1 }
            case .failure(let failure):
                let codes = [JSONRPCError.parseErrorCode, JSONRPCError.invalidRequestCode, JSONRPCError.invalidParamsCode]
                try check(codes.contains(failure.error.code), "a malformed message failed with code \(failure.error.code)")
                if failure.answer { expectedAnswers += 1 }
            }
            dispatched.append(line)
        }
        try checkAnswers(dispatched, expected: expectedAnswers)
    }

    /// Sends `lines` through a bridge, closes it, and counts its responses (messages with an id and a result or
    /// an error; `run.event` notifications aside).
    static func checkAnswers(_ lines: [ArraySlice<UInt8>], expected: Int) throws {
        let responses = Atomic(0)
        let outbox = try BridgeOutbox(name: "fuzz-bridge-out") { bytes in
            if let value = try? JSONParser.parse(Array(bytes)), let object = value.objectValue, object["id"] != nil,
                object["result"] != nil || object["error"] != nil
            {
                responses.add(1, ordering: .relaxed)
            }
            return true
        }
        let bridge = Bridge(configuration: BridgeConfiguration(url: gateway), outbox: outbox)
        for line in lines { bridge.receive(line) }
        bridge.close()
        // close() joined the delivery thread, so every delivery happened before this load.
        let answered = responses.load(ordering: .relaxed)
        try check(answered == expected, "\(lines.count) messages got \(answered) answers, not \(expected)")
    }
}
