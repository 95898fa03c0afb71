// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The private-cloud plugin inside a real afmd, against real upstreams on loopback: llama-server (SmolLM2) in
/// both protocols, and a second afmd whose scripted backend emits tool calls and reasoning state.
@Suite(.serialized) struct DaemonTests {

    private func cloud(_ upstreams: String, protocol wire: String, model: String = "smol", extra: String = "") -> String {
        "Upstreams=\(upstreams)\nProtocol=\(wire)\nModel=\(model)\nContextTokens=2048\nProbeIntervalSeconds=2\n\(extra)"
    }

    @Test func unconfiguredPrivateCloudIs503WithTheReason() throws {
        let gateway = try CloudDaemon(cloud: "")
        let status = try #require(try gateway.status())
        #expect(status["state"]?.stringValue == "unavailable")
        #expect(status["reason"]?.stringValue == "private cloud is not configured")
        #expect(status["reason_code"]?.stringValue == "not_configured")
        let response = try gateway.respond(#"{"model":"private-cloud","input":"hi"}"#)
        #expect(response.status == 503)
        #expect(response.json?["error"]?["code"]?.stringValue == "model_unavailable")
    }

    @Test(arguments: ["chat-completions", "responses"])
    func streamsTextFromLlamaServer(wire: String) throws {
        let upstream = try LlamaServer()
        let gateway = try CloudDaemon(cloud: cloud(upstream.baseURL, protocol: wire))
        let response = try gateway.respond(
            #"{"model":"private-cloud","input":"Name three colors.","stream":true,"max_output_tokens":12}"#)
        #expect(response.status == 200)
        let events = response.events
        #expect(events.first?.event == "response.created")
        #expect(!outputText(events).isEmpty)
        let last = try #require(events.last)
        #expect(["response.completed", "response.incomplete"].contains(last.event))
        #expect((last.data["response"]?["usage"]?["input_tokens"]?.numberValue?.intValue ?? 0) > 0)
        #expect((last.data["response"]?["usage"]?["output_tokens"]?.numberValue?.intValue ?? 0) > 0)
        #expect(last.data["response"]?["model"]?.stringValue == "private-cloud")
        // The upstream's own model name is logged.
        #expect(waitFor { gateway.daemon.log.contains("upstream model \"") && gateway.daemon.log.contains("smollm2") })
    }

    @Test(arguments: ["chat-completions", "responses"])
    func toolCallHistoryReachesLlamaServer(wire: String) throws {
        let upstream = try LlamaServer()
        let gateway = try CloudDaemon(cloud: cloud(upstream.baseURL, protocol: wire))
        let body = #"""
            {"model":"private-cloud","max_output_tokens":16,"stream":true,
             "tools":[{"type":"function","name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
             "input":[{"role":"user","content":"What is the weather in Paris?"},
                      {"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
                      {"type":"function_call_output","call_id":"call_1","output":"sunny, 21 C"}]}
            """#
        let response = try gateway.respond(body)
        #expect(response.status == 200)
        #expect(!outputText(response.events).isEmpty, "\(response.text.suffix(600))")
        #expect(["response.completed", "response.incomplete"].contains(response.events.last?.event ?? ""))
    }

    @Test func clientDisconnectClosesTheUpstreamRequest() throws {
        let upstream = try LlamaServer()
        let gateway = try CloudDaemon(cloud: cloud(upstream.baseURL, protocol: "chat-completions"))
        let client = try gateway.client()
        try client.sendRequest(
            "POST", "/v1/responses",
            body: Array(#"{"model":"private-cloud","input":"Write a long story about a dragon.","stream":true,"max_output_tokens":400}"#.utf8),
            headers: ["Content-Type": "application/json"])
        _ = try client.readUntil { $0.components(separatedBy: "response.output_text.delta").count > 3 }
        #expect(upstream.anySlotProcessing() == true)
        let closed = Date()
        client.close()
        #expect(waitFor(seconds: 10) { upstream.anySlotProcessing() == false }, "llama-server kept generating")
        let seconds = Date().timeIntervalSince(closed)
        print("private-cloud: upstream slot released \(Int(seconds * 1000)) ms after the client disconnected")
        #expect(seconds < 3, "the upstream slot was released \(seconds) s after the disconnect")
        #expect(try gateway.client().get("/health").status == 200)
    }

    @Test func upstreamKilledMidStreamFailsTheResponseAndTheDaemonStaysUp() throws {
        let upstream = try LlamaServer()
        let gateway = try CloudDaemon(cloud: cloud(upstream.baseURL, protocol: "responses"))
        let client = try gateway.client()
        try client.sendRequest(
            "POST", "/v1/responses",
            body: Array(#"{"model":"private-cloud","input":"Write a long story about a dragon.","stream":true,"max_output_tokens":400}"#.utf8),
            headers: ["Content-Type": "application/json"])
        _ = try client.readUntil { $0.contains("response.output_text.delta") }
        upstream.kill()
        let text = try client.readUntil { $0.contains("response.failed") }
        #expect(text.contains("response.failed"))
        #expect(try gateway.client().get("/health").status == 200)
        #expect(try gateway.client().get("/status").status == 200)
    }

    @Test func upstreamDownAtStartFailsOverToTheSecondURL() throws {
        let upstream = try LlamaServer()
        let down = "http://127.0.0.1:\(closedLoopbackPort())/v1"
        let gateway = try CloudDaemon(cloud: cloud("\(down), \(upstream.baseURL)", protocol: "chat-completions"))
        #expect(try gateway.status()?["state"]?.stringValue == "ready")
        let response = try gateway.respond(#"{"model":"private-cloud","input":"Say hi.","stream":true,"max_output_tokens":8}"#)
        #expect(response.status == 200)
        #expect(!outputText(response.events).isEmpty)
        #expect(gateway.daemon.log.contains("served by \(upstream.baseURL)"))
    }

    @Test func allUpstreamsDownIs503WithTheReason() throws {
        let gateway = try CloudDaemon(cloud: cloud("http://127.0.0.1:\(closedLoopbackPort())/v1", protocol: "responses"))
        let status = try #require(try gateway.status())
        #expect(status["state"]?.stringValue == "unavailable")
        #expect(status["reason_code"]?.stringValue == "upstream_unreachable")
        #expect(status["reason"]?.stringValue?.contains("connection failed") == true)
        #expect(try gateway.respond(#"{"model":"private-cloud","input":"hi"}"#).status == 503)
    }

    /// A second afmd is the upstream. Its scripted model calls a tool, then answers; the outer gateway turns the
    /// upstream's function_call item back into a function_call, and the tool output reaches the inner backend.
    @Test func toolRoundTripThroughASecondAfmd() throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"It is sunny."}],"else":[{"tool_call":{"name":"get_weather","call_id":"call_7","arguments":"{\"city\":\"Paris\"}","chunks":3}}]}]"#
        let inner = try CloudDaemon(cloud: nil, scriptedModels: [scriptedModel("weather-bot", steps: steps)])
        let outer = try CloudDaemon(cloud: cloud(inner.baseURL, protocol: "responses", model: "weather-bot"))
        let tools = #""tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]"#
        let first = try outer.respond(#"{"model":"private-cloud","input":"Weather in Paris?",\#(tools)}"#)
        #expect(first.status == 200, "\(first)")
        let call = try #require(first.json?["output"]?.arrayValue?.first { $0["type"]?.stringValue == "function_call" })
        #expect(call["name"]?.stringValue == "get_weather")
        #expect(call["call_id"]?.stringValue == "call_7")
        #expect(call["arguments"]?.stringValue == #"{"city":"Paris"}"#)
        let second = try outer.respond(
            #"{"model":"private-cloud",\#(tools),"input":[{"role":"user","content":"Weather in Paris?"},{"type":"function_call","call_id":"call_7","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_7","output":"sunny"}]}"#)
        #expect(second.status == 200)
        #expect(second.json?["output_text"]?.stringValue == "It is sunny." || second.text.contains("It is sunny."))
        let generate = try #require(inner.records().last { $0["event"]?.stringValue == "generate" })
        let items = generate["request"]?["input"]?.arrayValue ?? []
        #expect(items.contains { $0["type"]?.stringValue == "function_call_output" && $0["output"]?.stringValue == "sunny" })
        #expect(items.contains { $0["type"]?.stringValue == "function_call" && $0["call_id"]?.stringValue == "call_7" })
    }

    /// The inner afmd's backend emits reasoning state; the inner host seals it into encrypted_content; the
    /// private-cloud plugin hands that blob to the outer host as opaque state, which seals it again. Replaying the
    /// outer item brings the inner blob back to the inner afmd, whose backend receives its own state. A tampered
    /// outer blob is refused by the outer host.
    @Test func reasoningRoundTripsThroughBothGatewaysAndTamperingIsCaught() throws {
        let steps = #"[{"reasoning_text":"Let me think."},{"reasoning_state":"inner-state-42"},{"text":"Done."}]"#
        let inner = try CloudDaemon(cloud: nil, scriptedModels: [scriptedModel("thinker", steps: steps, reasoning: true)])
        let outer = try CloudDaemon(
            cloud: cloud(inner.baseURL, protocol: "responses", model: "thinker", extra: "Reasoning=optional"))
        let first = try outer.respond(#"{"model":"private-cloud","input":"Think.","reasoning":{"effort":"low"}}"#)
        #expect(first.status == 200, "\(first)")
        let reasoning = try #require(first.json?["output"]?.arrayValue?.first { $0["type"]?.stringValue == "reasoning" })
        let sealed = try #require(reasoning["encrypted_content"]?.stringValue)
        #expect(!sealed.contains("inner-state-42"))
        // The effort reached the inner afmd's backend.
        let firstRecord = try #require(inner.records().last { $0["event"]?.stringValue == "generate" })
        #expect(firstRecord["request"]?["reasoning_effort"]?.stringValue == "low")

        let replay = #"{"model":"private-cloud","input":[{"role":"user","content":"Think."},{"type":"reasoning","summary":[],"encrypted_content":"\#(sealed)"},{"role":"assistant","content":"Done."},{"role":"user","content":"Again."}]}"#
        let second = try outer.respond(replay)
        #expect(second.status == 200, "\(second)")
        let record = try #require(inner.records().last { $0["event"]?.stringValue == "generate" })
        let replayed = record["request"]?["input"]?.arrayValue?.first { $0["type"]?.stringValue == "reasoning" }
        let state = try #require(replayed?["state_base64"]?.stringValue)
        #expect(Data(base64Encoded: state).map { String(decoding: $0, as: UTF8.self) } == "inner-state-42")

        var tampered = Array(sealed)
        let position = tampered.count / 2
        tampered[position] = tampered[position] == "A" ? "B" : "A"
        let refused = try outer.respond(replay.replacingOccurrences(of: sealed, with: String(tampered)))
        #expect(refused.status == 400)
        #expect(refused.json?["error"]?["code"]?.stringValue == "invalid_encrypted_content")
    }

    @Test func quotaExceededIs429WithTheResetTime() throws {
        let inner = try CloudDaemon(cloud: nil)
        let outer = try CloudDaemon(
            cloud: cloud(inner.baseURL, protocol: "responses", model: "scripted-demo", extra: "DailyRequestQuota=1"))
        #expect(try outer.respond(#"{"model":"private-cloud","input":"one"}"#).status == 200)
        let refused = try outer.respond(#"{"model":"private-cloud","input":"two"}"#)
        #expect(refused.status == 429)
        #expect(refused.json?["error"]?["code"]?.stringValue == "quota_exceeded")
        #expect(refused.text.contains("T00:00:00Z"))
    }

    /// The key reaches the upstream (llama-server --api-key refuses requests without it) and appears nowhere:
    /// not in afmd's log, /status, the admin socket's replies, error bodies or the describe document.
    @Test func credentialsNeverLeak() throws {
        let key = "sk-afm-test-\(UUID().uuidString)"
        let upstream = try LlamaServer(extraArguments: ["--api-key", key])
        let keyFile = TestPaths.makeTemporaryDirectory("afm-key") + "/cloud.key"
        try (key + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let down = "http://127.0.0.1:\(closedLoopbackPort())/v1"
        let gateway = try CloudDaemon(
            cloud: cloud("\(down), \(upstream.baseURL)", protocol: "chat-completions", extra: "APIKeyFile=\(keyFile)"))
        var seen: [String] = []
        let ok = try gateway.respond(#"{"model":"private-cloud","input":"Say hi.","max_output_tokens":8}"#)
        #expect(ok.status == 200, "the key did not reach the upstream: \(ok)")
        seen.append(ok.text)
        // An upstream error (a 400 from llama-server), and a refused request.
        seen.append(try gateway.respond(#"{"model":"private-cloud","input":"x","max_output_tokens":8,"temperature":-5}"#).text)
        seen.append(try gateway.respond(#"{"model":"private-cloud","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}"#).text)
        seen.append(try gateway.client().get("/status").text)
        seen.append(try gateway.client().get("/v1/models").text)
        for command in [["status", "--json"], ["status"], ["backends", "--json"]] {
            if let reply = try? gateway.daemon.afmctl(command) { seen.append(reply.output + reply.errors) }
        }
        seen.append(gateway.daemon.log)
        // The same key through the environment, and the plugin's own describe document and log lines.
        let driver = try PluginDriver(settings: ["Upstreams": upstream.baseURL, "Model": "smol", "APIKeyFile": keyFile])
        let events = try driver.generate(id: 1, request: generationRequest())
        #expect(events.waitForTerminal())
        seen.append(try driver.describeText())
        seen.append(events.all.map(\.text).joined())
        driver.destroy()
        seen.append(PluginDriver.logged.joined(separator: "\n"))
        for (index, text) in seen.enumerated() {
            #expect(!text.contains(key), "the key leaked in output \(index)")
            #expect(!text.contains(String(key.suffix(20))), "part of the key leaked in output \(index)")
        }
    }

    /// An upstream error body that echoes the Authorization header (and another bearer token), forges a log line
    /// after a newline and carries terminal escapes: the key and the token are redacted everywhere, every log event
    /// stays one line, and afmctl prints no control sequence.
    @Test func upstreamErrorTextIsRedactedAndNeutralizedInLogsStatusAndAfmctl() throws {
        let key = "sk-afm-test-\(UUID().uuidString)"
        let upstream = try EchoingUpstream()
        let keyFile = TestPaths.makeTemporaryDirectory("afm-key") + "/cloud.key"
        try (key + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        // Probes every 60 s: the request comes before the next scheduled probe (a failure brings that forward).
        let gateway = try CloudDaemon(
            cloud: cloud(upstream.baseURL, protocol: "chat-completions", extra: "APIKeyFile=\(keyFile)\nProbeIntervalSeconds=60"))
        let refused = try gateway.respond(#"{"model":"private-cloud","input":"hi"}"#)
        #expect(refused.status == 503)
        #expect(waitFor { gateway.daemon.log.contains("trying the next one") })
        #expect(gateway.daemon.log.contains("[redacted]"))
        // The probes now fail with the same body, which becomes the backend's reason in /status (described every 5 s).
        #expect(waitFor(seconds: 30) { (try? gateway.status()?["reason"]?.stringValue?.contains("overloaded")) == true })

        var outputs: [(String, String)] = [("response", refused.text), ("/status", try gateway.client().get("/status").text)]
        outputs.append(("log", gateway.daemon.log))
        for command in [["status"], ["backends"], ["status", "--json"], ["backends", "--json"]] {
            let reply = try gateway.daemon.afmctl(command)
            #expect(reply.status == 0, "afmctl \(command): \(reply.errors)")
            outputs.append(("afmctl \(command.joined(separator: " "))", reply.output + reply.errors))
            if command.contains("--json") { #expect((try? JSONParser.parse(reply.output)) != nil, "not JSON: \(reply.output)") }
        }
        #expect(outputs.contains { $0.1.contains("overloaded; you sent Authorization: [redacted]") })
        for (name, text) in outputs {
            #expect(!text.contains(key) && !text.contains(String(key.suffix(12))), "the key leaked in \(name)")
            #expect(!text.contains(EchoingUpstream.proxyToken), "the proxy's token leaked in \(name)")
            #expect(!text.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" }, "a control character reached \(name)")
            let forged = text.split(separator: "\n").filter { $0.hasPrefix(EchoingUpstream.forgedLine) }
            #expect(forged.isEmpty, "a forged line in \(name): \(forged)")
        }
    }
}
