// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMLogging
import AFMTestSupport
import Foundation

/// A registry over a fresh backend directory, with logs captured for assertions.
struct RegistryHarness {
    let directory: BackendDirectoryBuilder
    let registry: BackendRegistry
    let sink = LogSink(capturing: ())
    let root: String
    /// Removes `root` when the harness goes (the backend directory may be the caller's, shared by several harnesses).
    private let owned: TemporaryDirectory

    init(
        directory: BackendDirectoryBuilder = BackendDirectoryBuilder(),
        settings: [String: [String: String]] = [:],
        limits: GenerationLimits = .init(),
        drainTimeout: Duration = .seconds(120),
        restartPolicy: RestartPolicy = .init()
    ) {
        self.directory = directory
        owned = TemporaryDirectory("afm-registry")
        root = owned.path
        registry = BackendRegistry(
            configuration: .init(
                backendDirectory: directory.path, copyDirectory: root + "/copies", stateDirectory: root + "/state",
                settings: settings, limits: limits, drainTimeout: drainTimeout, runnerPath: TestPaths.runner,
                restartPolicy: restartPolicy),
            logger: Logger(label: "test", level: .debug, sink: sink))
    }

    /// A harness whose directory holds the C fixture in `hosting`, loaded: the start of most ABI tests.
    static func loadingTheCFixture(hosting: String) async throws -> RegistryHarness {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(hosting: hosting)
        await harness.registry.loadAll()
        return harness
    }

    func status(_ id: String) -> BackendStatus? {
        registry.statuses().first { $0.id == id }
    }

    /// Writes a scripted-backend script with one model and returns its path.
    func writeScript(model: String, steps: String, context: Int = 4096) throws -> String {
        let path = root + "/script-\(UUID().uuidString.prefix(6)).json"
        let script = """
            {"script_version":1,"models":[{"id":"\(model)","context_tokens":\(context),"capabilities":{"streaming":true,"tools":true,"vision":false,"reasoning":false},"steps":\(steps)}]}
            """
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

/// The two hostings every ABI test runs in.
enum Hosting {
    static let both = ["in-process", "runner"]
}

/// A minimal generation request document for `model`.
func requestDocument(model: String, text: String = "hello there", maxOutputTokens: Int = 1024) -> [UInt8] {
    Array(
        """
        {"request_version":1,"response_id":"resp_test","model":"\(model)","system":[],"input":[{"type":"message","role":"user","content":[{"type":"text","text":"\(text)"}]}],"tools":[],"tool_choice":{"mode":"auto"},"parallel_tool_calls":true,"max_output_tokens":\(maxOutputTokens),"temperature":null,"top_p":null,"reasoning_effort":null,"stream":true}
        """.utf8)
}

/// Collects every event of a stream.
func collect(_ stream: GenerationStream) async -> [BackendEvent] {
    var events: [BackendEvent] = []
    for await event in stream { events.append(event) }
    return events
}

func text(of events: [BackendEvent]) -> String {
    events.compactMap { if case .textDelta(let text) = $0 { text } else { nil } }.joined()
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + timeout
    while clock.now < end {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}
