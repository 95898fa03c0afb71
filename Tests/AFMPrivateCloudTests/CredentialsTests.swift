// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import CAFMBackendABI
import Foundation
import Testing

/// Where the key comes from and where it may go: `APIKeyFile` is checked on the descriptor it is read from
/// (no symbolic link, owned by afmd's user or root, 0600 or stricter), a key from `APIKeyEnv` must be one line of
/// printable characters, and a key is never sent over plain http:// to another machine unless
/// `AllowInsecureHTTP=yes`.
@Suite(.serialized) struct CredentialsTests {
    private func keyFile(_ key: String = "sk-test-\(UUID().uuidString)") throws -> String {
        let path = TestPaths.makeTemporaryDirectory("afm-key") + "/cloud.key"
        try key.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    private func refusal(_ settings: [String: String]) -> PluginDriver.Failure? {
        do {
            let driver = try PluginDriver(settings: settings)
            driver.destroy()
            return nil
        } catch let failure as PluginDriver.Failure {
            return failure
        } catch {
            return PluginDriver.Failure(code: -1, description: "\(error)")
        }
    }

    private let base = ["Upstreams": "http://127.0.0.1:1/v1", "Model": "m", "ProbeIntervalSeconds": "3600"]

    /// A symbolic link is refused even when it points at a good key file: the checks and the read must concern
    /// one and the same file.
    @Test func aSymbolicLinkAsAPIKeyFileIsRefused() throws {
        let target = try keyFile()
        let link = TestPaths.makeTemporaryDirectory("afm-key-link") + "/cloud.key"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let failure = try #require(refusal(base.merging(["APIKeyFile": link]) { $1 }), "a symlinked key file was accepted")
        #expect(failure.code == AFM_ERR_INVALID_REQUEST)
        #expect(failure.description.contains(link) && failure.description.contains("symbolic link"), "\(failure.description)")
        // The file itself is fine.
        #expect(refusal(base.merging(["APIKeyFile": target]) { $1 }) == nil)
    }

    /// A file another user owns (who could rewrite the key) is refused; root's and afmd's own are accepted.
    @Test func aKeyFileOwnedByAnotherUserIsRefused() throws {
        let path = try keyFile()
        let other: uid_t = geteuid() == 1 ? 2 : 1
        // Only root can give a file away; as another user, make the file root's instead (also not afmd's user).
        let foreign: uid_t = geteuid() == 0 ? other : 0
        if geteuid() == 0 {
            #expect(chown(path, foreign, gid_t(foreign)) == 0)
        }
        let owner = try #require(try FileManager.default.attributesOfItem(atPath: path)[.ownerAccountID] as? NSNumber)
        if owner.uint32Value == geteuid() || owner.uint32Value == 0 {
            // Not root, and the file could not be given away: the acceptance side is all that can be shown.
            #expect(refusal(base.merging(["APIKeyFile": path]) { $1 }) == nil)
            return
        }
        let failure = try #require(refusal(base.merging(["APIKeyFile": path]) { $1 }), "a key file owned by uid \(owner) was accepted")
        #expect(failure.code == AFM_ERR_INVALID_REQUEST)
        #expect(failure.description.contains("owned by uid \(owner)"), "\(failure.description)")
    }

    /// A FIFO or directory is not a key file (and opening a FIFO does not hang create).
    @Test func aFIFOIsRefusedWithoutHanging() throws {
        let path = TestPaths.makeTemporaryDirectory("afm-key-fifo") + "/cloud.key"
        #expect(mkfifo(path, 0o600) == 0)
        let failure = try #require(refusal(base.merging(["APIKeyFile": path]) { $1 }))
        #expect(failure.description.contains("not a regular file"), "\(failure.description)")
    }

    /// CR/LF (or any control character) in a key from the environment would end the Authorization header and
    /// start another: such a key is refused, naming the variable but never showing the key.
    @Test(arguments: ["sk-abc\r\nX-Injected: 1", "sk-abc\nHost: evil", "sk-\u{1B}[2Jabc", "sk-abc\u{7F}"])
    func aKeyFromTheEnvironmentWithControlCharactersIsRefused(key: String) throws {
        let variable = "AFM_TEST_CLOUD_KEY_\(UUID().uuidString.prefix(8))"
        setenv(variable, key, 1)
        defer { unsetenv(variable) }
        let failure = try #require(refusal(base.merging(["APIKeyEnv": variable]) { $1 }), "a key with control characters was accepted")
        #expect(failure.code == AFM_ERR_INVALID_REQUEST)
        #expect(failure.description.contains(variable) && failure.description.contains("control characters"), "\(failure.description)")
        #expect(!failure.description.contains("sk-abc"))
    }

    @Test func aKeyFileWithControlCharactersIsRefused() throws {
        let path = try keyFile("sk-abc\rX-Injected: 1")
        let failure = try #require(refusal(base.merging(["APIKeyFile": path]) { $1 }))
        #expect(failure.code == AFM_ERR_INVALID_REQUEST)
        #expect(!failure.description.contains("sk-abc"))
    }

    /// With a key, an http:// upstream on a non-loopback host makes the backend unavailable (insecure_upstream)
    /// and it sends nothing there, not even a probe; AllowInsecureHTTP=yes lifts that. Without a key, or on
    /// loopback, http:// is fine.
    @Test func aKeyIsNotSentInClearToAnotherHost() throws {
        let address = nonLoopbackIPv4() ?? "192.0.2.1"
        let upstream = try RunawayUpstream(mode: "text", host: nonLoopbackIPv4() == nil ? "127.0.0.1" : "0.0.0.0")
        let remote = "http://\(address):\(upstream.port)/v1"
        let key = try keyFile()
        let settings = ["Upstreams": remote, "Model": "m", "APIKeyFile": key, "ProbeIntervalSeconds": "3600", "ConnectTimeoutSeconds": "1"]
        do {
            let driver = try PluginDriver(settings: settings)
            defer { driver.destroy() }
            let describe = try driver.describe()
            #expect(describe["available"]?.boolValue == false)
            #expect(describe["reason_code"]?.stringValue == "insecure_upstream")
            let reason = try #require(describe["reason"]?.stringValue)
            #expect(reason.contains(remote) && reason.contains("AllowInsecureHTTP=yes"), "\(reason)")
            do {
                _ = try driver.generate(id: 1, request: generationRequest(model: "private-cloud"))
                Issue.record("a generation was started towards a cleartext upstream")
            } catch let failure as PluginDriver.Failure {
                #expect(failure.code == AFM_ERR_MODEL_UNAVAILABLE)
            }
        }
        if nonLoopbackIPv4() != nil {
            #expect(upstream.requests.isEmpty, "the upstream was contacted: \(upstream.requests)")
        }
        // Explicitly allowed: the backend probes it (with the key).
        do {
            let driver = try PluginDriver(settings: settings.merging(["AllowInsecureHTTP": "yes"]) { $1 })
            defer { driver.destroy() }
            #expect(try driver.describe()["reason_code"]?.stringValue != "insecure_upstream")
        }
        if nonLoopbackIPv4() != nil {
            #expect(upstream.requests.contains("GET /v1/models auth=yes"), "\(upstream.requests)")
        }
        // Without a key there is nothing to leak; loopback never leaves the machine.
        let keyless = try PluginDriver(settings: settings.merging(["APIKeyFile": ""]) { $1 })
        defer { keyless.destroy() }
        #expect(try keyless.describe()["reason_code"]?.stringValue != "insecure_upstream")
        let local = try PluginDriver(settings: settings.merging(["Upstreams": upstream.baseURL()]) { $1 })
        defer { local.destroy() }
        #expect(try local.describe()["reason_code"]?.stringValue != "insecure_upstream")
    }

    /// Only a numeric loopback address in its strict form (`inet_pton`) counts as loopback: `127.0.0.08` or
    /// `127.1` is not an address libcurl connects to directly (it may resolve it as a name, over DNS), so with a
    /// key it is refused like any other remote host.
    @Test(arguments: ["127.0.0.08", "127.000.000.001", "127.1", "0177.0.0.1"])
    func aLoopbackLookalikeIsNotLoopback(host: String) throws {
        let key = try keyFile()
        let driver = try PluginDriver(
            settings: ["Upstreams": "http://\(host):1/v1", "Model": "m", "APIKeyFile": key, "ProbeIntervalSeconds": "3600",
                "ConnectTimeoutSeconds": "1"])
        defer { driver.destroy() }
        #expect(try driver.describe()["reason_code"]?.stringValue == "insecure_upstream", "\(host)")
    }

    /// The upstream's error body is redacted before it is shortened: a key that straddles the cut (position 300)
    /// leaves no part of itself in the error the client sees.
    @Test func aKeyStraddlingTheCutOfAnErrorBodyIsRedacted() throws {
        let upstream = try RunawayUpstream(mode: "echo400")
        let key = "sk-test-\(UUID().uuidString)"
        let driver = try PluginDriver(
            settings: ["Upstreams": upstream.baseURL(), "Model": "m", "Protocol": "chat-completions",
                "APIKeyFile": try keyFile(key), "ProbeIntervalSeconds": "3600"])
        defer { driver.destroy() }
        let events = try driver.generate(id: 1, request: generationRequest())
        #expect(events.waitForTerminal(seconds: 20))
        let last = try #require(events.last)
        #expect(last.type == AFM_EVENT_ERROR)
        #expect(last.text.contains("HTTP 400"), "\(last.text)")
        let characters = Array(key)
        let leaked = (0...(characters.count - 8)).map { String(characters[$0..<($0 + 8)]) }.filter { last.text.contains($0) }
        #expect(leaked.isEmpty, "part of the key reached the client: \(leaked) in \(last.text)")
    }

    /// `http_proxy`/`ALL_PROXY` from the environment are not used for a plain http:// upstream: libcurl would
    /// send the request, Authorization header included, in clear to the proxy.
    @Test(arguments: ["http_proxy", "ALL_PROXY"])
    func aProxyFromTheEnvironmentGetsNoKeyInClear(variable: String) throws {
        let proxy = try RunawayUpstream(mode: "done", host: "127.0.0.2")
        let upstream = try RunawayUpstream(mode: "done")
        setenv(variable, "http://127.0.0.2:\(proxy.port)", 1)
        defer { unsetenv(variable) }
        let driver = try PluginDriver(
            settings: ["Upstreams": upstream.baseURL(), "Model": "m", "Protocol": "chat-completions",
                "APIKeyFile": try keyFile(), "ProbeIntervalSeconds": "3600"])
        defer { driver.destroy() }
        let events = try driver.generate(id: 1, request: generationRequest())
        #expect(events.waitForTerminal(seconds: 20))
        #expect(events.last?.type == AFM_EVENT_DONE)
        #expect(!proxy.requests.contains { $0.hasSuffix("auth=yes") }, "the proxy got the key: \(proxy.requests)")
        #expect(upstream.requests.contains { $0.hasPrefix("POST ") && $0.hasSuffix("auth=yes") }, "\(upstream.requests)")
    }

    /// The same refusal as afmd shows it in /status.
    @Test func statusShowsTheInsecureUpstreamReason() throws {
        let key = try keyFile()
        let gateway = try CloudDaemon(
            cloud: "Upstreams=http://192.0.2.1:9/v1\nModel=m\nAPIKeyFile=\(key)\nConnectTimeoutSeconds=1\nProbeIntervalSeconds=3600")
        let status = try #require(try gateway.status())
        #expect(status["state"]?.stringValue == "unavailable")
        #expect(status["reason_code"]?.stringValue == "insecure_upstream")
        #expect(status["reason"]?.stringValue?.contains("AllowInsecureHTTP=yes") == true)
        let response = try gateway.respond(#"{"model":"private-cloud","input":"hi"}"#)
        #expect(response.status == 503)
        #expect(response.json?["error"]?["code"]?.stringValue == "model_unavailable")
    }

    /// Credentials an upstream (or a proxy before it) may echo in an error body in other shapes than
    /// `Authorization: Bearer …`: each secret is redacted in the error event, the plugin's log and describe.
    @Test(arguments: [
        (#"{\"headers\": {\"Authorization\": \"Basic dXNlcjpzZWNyZXQ=\"}}"#, "dXNlcjpzZWNyZXQ"),
        ("you sent x-api-key: xk-SECRET-one and more", "xk-SECRET-one"),
        ("you sent api-key: ak-SECRET-two and more", "ak-SECRET-two"),
        ("GET /v1/models?token=tk-SECRET-three&x=1", "tk-SECRET-three"),
        ("GET /v1/models?api_key=ak-SECRET-four&x=1", "ak-SECRET-four"),
        (#"Authorization: Digest username="bob", realm="r", nonce="n-SECRET-five", response="r-SECRET-six""#, "SECRET-"),
        ("proxy saw Bearer sk-abc:def-SECRET-seven then gave up", "def-SECRET-seven"),
    ])
    func otherShapesOfCredentialsAreRedacted(body: String, secret: String) throws {
        let upstream = try EchoingUpstream(rawBody: body)
        let driver = try PluginDriver(settings: [
            "Upstreams": upstream.baseURL, "Model": "smol", "ProbeIntervalSeconds": "3600",
        ])
        defer { driver.destroy() }
        let events = try driver.generate(id: 1, request: generationRequest())
        #expect(events.waitForTerminal())
        let error = try #require(events.last)
        #expect(error.type == AFM_EVENT_ERROR)
        #expect(error.text.contains("[redacted]"), "\(error.text)")
        let seen = [error.text, try driver.describeText(), PluginDriver.logged.joined(separator: "\n")]
        for text in seen {
            #expect(!text.contains(secret), "the secret leaked: \(text)")
        }
    }
}
