// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The model aliases: `auto`, `on-device`, `private-cloud`.
@Suite struct RoutingTests {
    @Test func aliasesResolveToUsableModelsAndTheCloudIsGatedUntilConfigured() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"from demo"}]"#])
        let client = try harness.client()
        for alias in ["auto", "on-device"] {
            let response = try client.post("/v1/responses", json: responsesBody(model: alias))
            #expect(response.status == 200, "\(alias): \(response)")
            // The response names the actual model, not the alias.
            #expect(response.json?["model"] == "demo")
        }
        let cloud = try client.post("/v1/responses", json: responsesBody(model: "private-cloud"))
        #expect(cloud.status == 503)
        #expect(cloud.json?["error"]?["code"] == "model_unavailable")
        #expect(cloud.json?["error"]?["message"]?.stringValue?.contains("private cloud is not configured") == true)
        #expect(cloud.header("Retry-After") != nil)

        let ids = try client.get("/v1/models").json?["data"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(ids.contains("demo") && ids.contains("auto") && ids.contains("on-device"))
        #expect(!ids.contains("private-cloud"))
        // Setting the cloud preference does not send `auto` to an unavailable cloud.
        #expect(try harness.daemon.afmctl(["settings", "set", "privateCloudPreference", "yes"]).status == 0)
        #expect(try client.post("/v1/responses", json: responsesBody(model: "auto")).json?["model"] == "demo")
    }
}
