// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMJSON
import AFMLogging
import AFMResponses
import AFMTestSupport
import Foundation
import Testing

/// The common prompt is snapshotted per request: an edit during a long stream affects later requests only.
@Suite struct CommonPromptTests {
    @Test func anEditDuringALongStreamAffectsOnlyLaterRequests() async throws {
        let root = TestPaths.makeTemporaryDirectory("afm-prompt")
        let script = root + "/script.json"
        let record = root + "/record.jsonl"
        try #"{"script_version":1,"models":[{"id":"long","steps":[{"repeat":30,"steps":[{"text":"x"},{"delay_ms":10}]}]}]}"#
            .write(toFile: script, atomically: true, encoding: .utf8)
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let registry = BackendRegistry(
            configuration: .init(
                backendDirectory: directory.path, copyDirectory: root + "/copies", stateDirectory: root + "/state",
                settings: ["scripted": ["Script": script, "RecordFile": record]]),
            logger: Logger(label: "test", sink: LogSink(capturing: ())))
        await registry.loadAll()
        let service = ResponsesService(registry: registry, logger: Logger(label: "test", sink: LogSink(capturing: ())), commonPrompt: "old rules")

        let first = try service.start(body: Array(#"{"model":"long","input":"a","stream":true}"#.utf8))
        let consumer = Task { await service.complete(first) }
        try await Task.sleep(for: .milliseconds(50))
        service.setCommonPrompt("new rules")
        let (status, body, _) = await consumer.value
        #expect(status == 200)
        let object = try JSONParser.parse(String(decoding: body, as: UTF8.self))
        #expect(object["output"]?[0]?["content"]?[0]?["text"] == .string(String(repeating: "x", count: 30)))

        let second = try service.start(body: Array(#"{"model":"long","input":"b"}"#.utf8))
        _ = await service.complete(second)

        let text = try String(contentsOfFile: record, encoding: .utf8)
        let systems = text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
            .filter { $0["event"] == "generate" }.map { $0["request"]?["system"] }
        #expect(systems == [["old rules"], ["new rules"]])
    }
}
