// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// What a web page in a browser can make afmd do: cross-site `text/plain` POSTs (CSRF: no preflight), and reads of
/// `/status` and answers through DNS rebinding (a name of the attacker's that now resolves to 127.0.0.1). afmd
/// checks `Host`, `Origin` and, on POSTs, `Content-Type`; real clients send what passes.
@Suite struct CrossSiteRequestTests {
    static let models = ["demo": #"[{"text":"hi"}]"#]
    static let body = responsesBody(model: "demo")

    /// Sends `head` (request line and fields, without the final empty line) and `body`, reads the answer.
    static func exchange(_ client: TestHTTPClient, _ head: String, body: String? = nil) throws -> TestHTTPClient.Response {
        var text = head + "\r\n"
        if let body { text += "Content-Length: \(body.utf8.count)\r\n" }
        text += "\r\n" + (body ?? "")
        try client.send(text)
        return try client.readResponse()
    }

    static func expectRefusal(_ response: TestHTTPClient.Response, _ status: Int, _ code: String, _ label: String) {
        #expect(response.status == status, "\(label): \(response)")
        let error = response.json?["error"]
        #expect(error?["code"]?.stringValue == code, "\(label): \(response)")
        #expect(error?["message"]?.stringValue?.isEmpty == false, "\(label)")
        #expect(error?["type"]?.stringValue != nil, "\(label)")
        #expect(error?.objectValue?.keys.contains("param") == true, "\(label)")
    }

    func generations(_ harness: DaemonHarness) -> Int {
        harness.records().filter { $0["event"] == "generate" }.count
    }

    @Test func loopbackNamesAndAMissingHTTP10HostAreAccepted() throws {
        let harness = try DaemonHarness(models: Self.models)
        let port = harness.port
        for host in ["127.0.0.1:\(port)", "localhost:\(port)", "LOCALHOST", "[::1]:\(port)", "127.0.0.2", "localhost."] {
            let response = try Self.exchange(harness.client(), "GET /status HTTP/1.1\r\nHost: \(host)")
            #expect(response.status == 200, "Host: \(host): \(response)")
        }
        let old = try Self.exchange(harness.client(), "GET /status HTTP/1.0")
        #expect(old.status == 200, "\(old)")
    }

    /// DNS rebinding: the attacker's name arrives in `Host`.
    @Test func foreignHostNamesAreRefused() throws {
        let harness = try DaemonHarness(models: Self.models)
        let port = harness.port
        for host in ["evil.example:\(port)", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example", "10.1.2.3"] {
            let status = try Self.exchange(harness.client(), "GET /status HTTP/1.1\r\nHost: \(host)")
            Self.expectRefusal(status, 403, "forbidden_host", "GET /status, Host: \(host)")
        }
        let post = try Self.exchange(
            harness.client(), "POST /v1/responses HTTP/1.1\r\nHost: evil.example:\(port)\r\nContent-Type: application/json",
            body: Self.body)
        Self.expectRefusal(post, 403, "forbidden_host", "POST, foreign Host")
        #expect(generations(harness) == 0)
    }

    /// CSRF: a page posts from its own origin; only the gateway's own site and loopback pages may.
    @Test func crossSiteOriginsAreRefused() throws {
        let harness = try DaemonHarness(models: Self.models)
        for origin in ["https://evil.example", "http://evil.example:11535", "null"] {
            let post = try Self.exchange(
                harness.client(),
                "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: \(origin)\r\nContent-Type: application/json",
                body: Self.body)
            Self.expectRefusal(post, 403, "forbidden_origin", "POST, Origin: \(origin)")
            let status = try Self.exchange(harness.client(), "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: \(origin)")
            Self.expectRefusal(status, 403, "forbidden_origin", "GET, Origin: \(origin)")
        }
        #expect(generations(harness) == 0)
        // A page on the gateway's own loopback host (another local tool's web UI) is same-site.
        for origin in ["http://127.0.0.1:3000", "http://localhost:8080"] {
            let post = try Self.exchange(
                harness.client(),
                "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: \(origin)\r\nContent-Type: application/json",
                body: Self.body)
            #expect(post.status == 200, "Origin: \(origin): \(post)")
            #expect(post.header("Access-Control-Allow-Origin") == origin)
        }
    }

    /// A browser sends `text/plain`, form encodings or no type without a preflight; JSON needs one.
    @Test func postsMustBeJSON() throws {
        let harness = try DaemonHarness(models: Self.models)
        for type in ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", nil] {
            let field = type.map { "\r\nContent-Type: \($0)" } ?? ""
            let response = try Self.exchange(
                harness.client(), "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\(field)", body: Self.body)
            Self.expectRefusal(response, 415, "unsupported_media_type", "Content-Type: \(type ?? "none")")
        }
        #expect(generations(harness) == 0)
        for type in ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"] {
            let response = try Self.exchange(
                harness.client(), "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \(type)", body: Self.body)
            #expect(response.status == 200, "Content-Type: \(type): \(response)")
        }
    }

    /// `[Server] AllowedHosts` and `AllowedOrigins`: names of the gateway behind a proxy or on the LAN, and web apps
    /// allowed to call it (with CORS answers, preflight included).
    @Test func configuredHostsAndOriginsAreAccepted() throws {
        let harness = try DaemonHarness(
            models: Self.models, config: "[Server]\nAllowedHosts=gateway.lan, AI.Example.com\nAllowedOrigins=https://app.example\n")
        for host in ["gateway.lan:8080", "ai.example.com", "127.0.0.1"] {
            let response = try Self.exchange(harness.client(), "GET /status HTTP/1.1\r\nHost: \(host)")
            #expect(response.status == 200, "Host: \(host): \(response)")
        }
        let other = try Self.exchange(harness.client(), "GET /status HTTP/1.1\r\nHost: other.lan")
        Self.expectRefusal(other, 403, "forbidden_host", "Host: other.lan")

        let preflight = try Self.exchange(
            harness.client(),
            "OPTIONS /v1/responses HTTP/1.1\r\nHost: gateway.lan\r\nOrigin: https://app.example\r\n"
                + "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type, authorization")
        #expect(preflight.status == 204, "\(preflight)")
        #expect(preflight.header("Access-Control-Allow-Origin") == "https://app.example")
        #expect(preflight.header("Access-Control-Allow-Methods")?.contains("POST") == true)
        #expect(preflight.header("Access-Control-Allow-Headers")?.lowercased().contains("content-type") == true)
        let post = try Self.exchange(
            harness.client(),
            "POST /v1/responses HTTP/1.1\r\nHost: gateway.lan\r\nOrigin: https://app.example\r\nContent-Type: application/json",
            body: Self.body)
        #expect(post.status == 200, "\(post)")
        #expect(post.header("Access-Control-Allow-Origin") == "https://app.example")
        #expect(post.header("Vary")?.contains("Origin") == true)

        let refusedPreflight = try Self.exchange(
            harness.client(),
            "OPTIONS /v1/responses HTTP/1.1\r\nHost: gateway.lan\r\nOrigin: https://other.example\r\nAccess-Control-Request-Method: POST")
        Self.expectRefusal(refusedPreflight, 403, "forbidden_origin", "preflight from another origin")
        #expect(refusedPreflight.header("Access-Control-Allow-Origin") == nil)
    }

    @Test func aStarAllowsEveryOriginAndEveryHost() throws {
        let harness = try DaemonHarness(models: Self.models, config: "[Server]\nAllowedHosts=*\nAllowedOrigins=*\n")
        let response = try Self.exchange(
            harness.client(),
            "POST /v1/responses HTTP/1.1\r\nHost: anything.example\r\nOrigin: https://evil.example\r\nContent-Type: application/json",
            body: Self.body)
        #expect(response.status == 200, "\(response)")
        #expect(response.header("Access-Control-Allow-Origin") == "https://evil.example")
        // The media type is still required: it is what forces a browser's preflight.
        let plain = try Self.exchange(
            harness.client(), "POST /v1/responses HTTP/1.1\r\nHost: anything.example\r\nContent-Type: text/plain", body: Self.body)
        Self.expectRefusal(plain, 415, "unsupported_media_type", "text/plain with AllowedOrigins=*")
    }

    /// A reload takes new names into force without a restart.
    @Test func aReloadUpdatesTheAllowedNames() throws {
        let harness = try DaemonHarness(models: Self.models)
        let before = try Self.exchange(harness.client(), "GET /status HTTP/1.1\r\nHost: gateway.lan")
        Self.expectRefusal(before, 403, "forbidden_host", "before the reload")
        let config = try String(contentsOfFile: harness.daemon.root + "/afmd.conf", encoding: .utf8)
        try (config + "\n[Server]\nAllowedHosts=gateway.lan\n").write(
            toFile: harness.daemon.root + "/afmd.conf", atomically: true, encoding: .utf8)
        let reload = try harness.daemon.afmctl(["reload"])
        #expect(reload.status == 0, "\(reload)")
        let after = try Self.exchange(harness.client(), "GET /status HTTP/1.1\r\nHost: gateway.lan")
        #expect(after.status == 200, "\(after)")
    }

    /// RFC 9112 §3.2.2: an absolute-form target names the host itself, and `Host` is ignored. A rebinding page (or a
    /// proxy-style client) must not get past the check with `GET http://evil.example/… HTTP/1.1` and a loopback `Host`.
    @Test func anAbsoluteFormTargetIsCheckedByItsOwnAuthority() throws {
        let harness = try DaemonHarness(models: Self.models)
        let port = harness.port
        for target in ["http://evil.example/status", "http://evil.example:\(port)/status", "http://user@evil.example/status", "http:///status"] {
            let response = try Self.exchange(harness.client(), "GET \(target) HTTP/1.1\r\nHost: localhost:\(port)")
            Self.expectRefusal(response, 403, "forbidden_host", "GET \(target), Host: localhost")
        }
        let post = try Self.exchange(
            harness.client(),
            "POST http://evil.example:\(port)/v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json",
            body: Self.body)
        Self.expectRefusal(post, 403, "forbidden_host", "POST absolute-form to evil.example")
        #expect(generations(harness) == 0)
        // The gateway's own address in the target works, whatever Host says; its Origin is compared with it.
        let health = try Self.exchange(harness.client(), "GET http://127.0.0.1:\(port)/health HTTP/1.1\r\nHost: evil.example")
        #expect(health.status == 200, "\(health)")
        let local = try Self.exchange(
            harness.client(), "GET http://localhost:\(port)/status HTTP/1.1\r\nHost: localhost\r\nOrigin: http://localhost:3000")
        #expect(local.status == 200, "\(local)")
    }

    /// Two `Origin` or two `Content-Type` fields: which one a check reads and which one another component acts on may
    /// differ, so the request is refused (400 duplicate_header) instead of trusting the first.
    @Test func duplicateOriginOrContentTypeFieldsAreRefused() throws {
        let harness = try DaemonHarness(models: Self.models)
        let origins = try Self.exchange(
            harness.client(),
            "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1:3000\r\norigin: https://evil.example\r\n"
                + "Content-Type: application/json",
            body: Self.body)
        Self.expectRefusal(origins, 400, "duplicate_header", "two Origin fields")
        #expect(origins.json?["error"]?["param"]?.stringValue == "Origin", "\(origins)")
        let getOrigins = try Self.exchange(
            harness.client(), "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1\r\nOrigin: http://127.0.0.1")
        Self.expectRefusal(getOrigins, 400, "duplicate_header", "two equal Origin fields")
        let types = try Self.exchange(
            harness.client(),
            "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nCONTENT-TYPE: text/plain",
            body: Self.body)
        Self.expectRefusal(types, 400, "duplicate_header", "two Content-Type fields")
        #expect(types.json?["error"]?["param"]?.stringValue == "Content-Type", "\(types)")
        #expect(generations(harness) == 0)
        // One of each is fine.
        let single = try Self.exchange(
            harness.client(),
            "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1:3000\r\nContent-Type: application/json",
            body: Self.body)
        #expect(single.status == 200, "\(single)")
    }
}
