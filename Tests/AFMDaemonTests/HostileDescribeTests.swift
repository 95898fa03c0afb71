// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Testing

/// A backend's describe document with numbers the host cannot do budget arithmetic on (`context_tokens` 2^63-1,
/// no budgets): afmd refuses that backend, naming the field, and keeps serving the others. Before, the default
/// budget's `context * 3 / 4` trapped afmd (exit 132), even for a runner-hosted backend: the host parses describe.
@Suite struct HostileDescribeTests {
    @Test(arguments: ["in-process", "runner"])
    func aHugeContextIsRefusedAndAfmdKeepsServing(hosting: String) throws {
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        try directory.addCFixture(defines: ["FIXTURE_HUGE_CONTEXT"], hosting: hosting)
        let daemon = try DaemonProcess(backendDirectory: directory.path, config: "")
        let client = try TestHTTPClient(port: daemon.port)
        let served = try client.post("/v1/responses", json: responsesBody(model: "scripted-demo", input: "still here"))
        #expect(served.status == 200, "\(served)")
        let status = try TestHTTPClient(port: daemon.port).get("/status")
        let fixture = status.json?["backends"]?.arrayValue?.first { $0["id"] == "c-fixture" }
        #expect(fixture?["state"] != "ready", "\(String(describing: fixture))")
        #expect(fixture?["reason_code"] == "describe_failed", "\(String(describing: fixture))")
        #expect(fixture?["reason"]?.stringValue?.contains("context_tokens") == true, "\(String(describing: fixture))")
        let refused = try TestHTTPClient(port: daemon.port).post("/v1/responses", json: responsesBody(model: "c-echo"))
        #expect(refused.status == 404 || refused.status == 503, "\(refused)")
        #expect(daemon.stop() == 0)
    }
}
