// swift-tools-version:6.2
// SPDX-License-Identifier: Apache-2.0
//
// AFM: a plugin-hosted inference gateway. One package; every target explicit; dependencies point down:
//
//   afmd ─► AFMDaemon ─► AFMResponses ─► AFMBackends ─► CAFMBackendABI (the C contract)
//   Swift backend plugins ─► AFMBackendKit ─► CAFMBackendABI
//                     └► AFMHTTP ─► AFMSystem (the only Glibc socket/epoll wrapper)
//   everything ─► AFMCore ─► AFMJSON, AFMLogging (which also holds TerminalSafeText, used by afmctl and afm)
//
// Backend plugins live under Plugins/ with an explicit `path:` (never SwiftPM `.plugin` targets).
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "afm",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "afmd", targets: ["afmd"]),
        .executable(name: "afmctl", targets: ["afmctl"]),
        .executable(name: "afm-backend-runner", targets: ["afm-backend-runner"]),
        .executable(name: "afm-backend-check", targets: ["afm-backend-check"]),
        .executable(name: "afm-bench-check", targets: ["afm-bench-check"]),
        .library(name: "afm-backend-scripted", type: .dynamic, targets: ["AFMScriptedBackend"]),
        .library(name: "afm-backend-private-cloud", type: .dynamic, targets: ["AFMPrivateCloudBackend"]),
        // The afm-dev example backend in Swift (docs/backend-abi.md, "Write a backend in ten minutes"); not packaged.
        .library(name: "afm-backend-example-swift", type: .dynamic, targets: ["AFMExampleSwiftBackend"]),
        // A kit backend with deliberate bugs the kit must absorb (BackendKitTests); not packaged.
        .library(name: "afm-backend-kit-fixture", type: .dynamic, targets: ["AFMKitFixtureBackend"]),
        .executable(name: "afm", targets: ["afm"]),
        // libafm-bridge.so: the bridge for hosts that embed it (afm_bridge.h; docs/bridge.md).
        .library(name: "afm-bridge", type: .dynamic, targets: ["AFMBridgeLibrary"]),
    ],
    targets: [
        // The C ABI between host and backends (header-only contract plus layout checks).
        .target(name: "CAFMBackendABI", path: "Sources/CAFMBackendABI"),

        // The lock ThreadSanitizer can see: `Mutex` in ThreadSanitizer builds only (`-D AFM_TSAN_LOCKS`).
        .target(name: "AFMLocks", swiftSettings: swiftSettings),
        .target(name: "AFMLogging", dependencies: ["AFMLocks"], swiftSettings: swiftSettings),
        .target(name: "AFMJSON", swiftSettings: swiftSettings),
        .target(name: "AFMSystem", swiftSettings: swiftSettings),
        .target(name: "AFMCore", dependencies: ["AFMJSON", "AFMLogging"], swiftSettings: swiftSettings),
        // libcrypto (Debian libssl-dev), used only for AES-256-GCM sealing of reasoning state.
        .systemLibrary(name: "CLibCrypto", path: "Sources/CLibCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "AFMSchema", dependencies: ["AFMJSON"], swiftSettings: swiftSettings),
        .target(name: "AFMImages", swiftSettings: swiftSettings),
        .target(name: "AFMSealing", dependencies: ["CLibCrypto"], swiftSettings: swiftSettings),
        .target(
            name: "AFMHTTP",
            dependencies: ["AFMLocks", "AFMSystem", "AFMLogging"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AFMBackends",
            dependencies: ["AFMLocks", "CAFMBackendABI", "AFMCore", "AFMJSON", "AFMLogging", "AFMSystem"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AFMResponses",
            dependencies: ["AFMLocks", "AFMBackends", "AFMCore", "AFMJSON", "AFMSchema", "AFMImages", "AFMSealing"],
            swiftSettings: swiftSettings
        ),
        // The Chat Completions and Anthropic Messages dialects: decoders into the pipeline's request, encoders of
        // its answer (the Responses dialect lives with the pipeline in AFMResponses).
        .target(name: "AFMDialects", dependencies: ["AFMResponses", "AFMCore", "AFMJSON"], swiftSettings: swiftSettings),
        .target(
            name: "AFMDaemon",
            dependencies: [
                "AFMLocks", "AFMDialects", "AFMResponses", "AFMBackends", "AFMHTTP", "AFMConfig", "AFMAdmin", "AFMCore", "AFMJSON", "AFMLogging", "AFMSystem",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "afmd", dependencies: ["AFMDaemon", "AFMConfig", "AFMSystem"], swiftSettings: swiftSettings),
        // Runner hosting: loads one backend .so (AFMBackends' loader) in its own process and relays the ABI.
        .executableTarget(
            name: "afm-backend-runner",
            dependencies: ["AFMBackends", "AFMLogging", "AFMSystem"],
            swiftSettings: swiftSettings
        ),
        // afm-backend-check: the ABI conformance battery for any backend library (afm-dev). The bare ABI in-process,
        // each check in a child process of its own; runner hosting through AFMBackends' registry.
        .executableTarget(
            name: "afm-backend-check",
            dependencies: [
                "AFMLocks", "AFMBackends", "AFMSchema", "AFMCore", "AFMJSON", "AFMLogging", "AFMSystem", "CAFMBackendABI",
            ],
            resources: [.embedInCode("describe.schema.json")],
            swiftSettings: swiftSettings
        ),
        // Times the host's check of structured answers (scripts/bench-structured-check).
        .executableTarget(name: "afm-bench-check", dependencies: ["AFMResponses", "AFMJSON"], swiftSettings: swiftSettings),
        // Operations plane: layered configuration and versioned settings (the control layer).
        .target(
            name: "AFMConfig",
            dependencies: ["AFMLocks", "AFMJSON", "AFMCore", "AFMLogging", "AFMSystem"],
            swiftSettings: swiftSettings
        ),
        // The admin socket (varlink, org.afm.Admin): server, client, levels; and its command-line client.
        .target(
            name: "AFMAdmin",
            dependencies: ["AFMLocks", "AFMJSON", "AFMCore", "AFMLogging", "AFMSystem"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "afmctl",
            dependencies: ["AFMAdmin", "AFMCore", "AFMJSON", "AFMLogging", "AFMSystem"],
            swiftSettings: swiftSettings
        ),

        // Storage: SQLite (Debian libsqlite3-dev) behind AFMStore, its only importer.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "AFMStore", dependencies: ["CSQLite"], swiftSettings: swiftSettings),
        // Image decoding/encoding for `afm chat` attachments: libgd (Debian libgd-dev) behind AFMImageCodec.
        .systemLibrary(name: "CGD", path: "Sources/CGD", providers: [.apt(["libgd-dev"])]),
        .target(name: "AFMImageCodec", dependencies: ["CGD"], swiftSettings: swiftSettings),
        // The one HTTP/SSE client of afmd's Responses API, shared by `afm chat` and the agent runtime.
        // The one server-sent-events reader, with caps: AFMClient reads afmd's streams with it, the private-cloud
        // backend its upstream's.
        .target(name: "AFMSSE", swiftSettings: swiftSettings),
        .target(name: "AFMClient", dependencies: ["AFMJSON", "AFMSSE", "AFMSystem"], swiftSettings: swiftSettings),
        // The agent runtime: turns with per-step steering, local/external/MCP tools, schema turns. A client of the
        // gateway's HTTP API only (through AFMClient); AFMCore for the shared error table.
        .target(
            name: "AFMAgent",
            dependencies: ["AFMLocks", "AFMClient", "AFMCore", "AFMImages", "AFMJSON", "AFMSystem"],
            swiftSettings: swiftSettings
        ),
        // The game layer over agents: NPCs (persona, memory), the world's facts, decisions among options.
        .target(name: "AFMGame", dependencies: ["AFMLocks", "AFMAgent", "AFMClient", "AFMJSON"], swiftSettings: swiftSettings),
        // The bridge: one JSON-RPC dispatcher for every host, its stdio transport (`afm bridge`) and its C ABI.
        .target(
            name: "AFMBridge",
            dependencies: ["AFMLocks", "AFMGame", "AFMAgent", "AFMClient", "AFMCore", "AFMJSON", "AFMLogging", "AFMSystem"],
            swiftSettings: swiftSettings
        ),
        // afm_bridge.h: the C contract of libafm-bridge.so (header plus compile checks).
        .target(name: "CAFMBridge", path: "Sources/CAFMBridge"),
        .target(
            name: "AFMBridgeLibrary",
            dependencies: ["AFMLocks", "AFMBridge", "CAFMBridge", "AFMCore"],
            swiftSettings: swiftSettings
        ),
        // The chat client: history store, inference window, Markdown, import; and `afm`.
        .target(
            name: "AFMChat",
            dependencies: ["AFMClient", "AFMStore", "AFMImageCodec", "AFMJSON", "AFMCore", "AFMLogging", "AFMSystem"],
            swiftSettings: swiftSettings
        ),
        // The web chat of `afm chat --web`: a page compiled in, a JSON/SSE API over the same history (AFMHTTP's server).
        .target(
            name: "AFMWebChat",
            dependencies: ["AFMLocks", "AFMChat", "AFMClient", "AFMHTTP", "AFMImageCodec", "AFMJSON", "AFMLogging", "AFMSystem"],
            resources: [
                .embedInCode("Assets/index.html"), .embedInCode("Assets/app.js"), .embedInCode("Assets/app.css"),
                .embedInCode("Assets/icon.svg"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "afm",
            dependencies: [
                "AFMLocks", "AFMAgent", "AFMBridge", "AFMChat", "AFMClient", "AFMConfig", "AFMWebChat", "AFMImageCodec", "AFMStore",
                "AFMCore", "AFMJSON", "AFMLogging", "AFMSystem",
            ],
            swiftSettings: swiftSettings
        ),

        // Backend plugins. AFMBackendKit holds what every Swift backend needs around the ABI (the negotiation, the
        // vtable, the event sink, the host's log, errors, JSON, the describe document) behind one protocol,
        // AFMBackend; it is linked into each backend's library, whose dynamic symbols its exports.map reduces to
        // afm_backend_negotiate.
        .target(
            name: "AFMBackendKit",
            dependencies: ["AFMLocks", "CAFMBackendABI"],
            exclude: ["exports.map"],
            swiftSettings: swiftSettings,
            linkerSettings: [
                .unsafeFlags(["-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/AFMBackendKit/exports.map"])
            ]
        ),
        .target(
            name: "AFMScriptedBackend",
            dependencies: ["AFMLocks", "AFMBackendKit"],
            path: "Plugins/scripted",
            exclude: ["scripted.json"],
            swiftSettings: swiftSettings
        ),
        // The private-cloud backend: libcurl (Debian libcurl4-openssl-dev) for HTTP, SQLite for the daily quota.
        .target(
            name: "CPrivateCloudSupport",
            path: "Plugins/private-cloud/CSupport",
            linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("sqlite3")]
        ),
        .target(
            name: "AFMPrivateCloudBackend",
            dependencies: ["AFMLocks", "AFMBackendKit", "AFMSSE", "CPrivateCloudSupport"],
            path: "Plugins/private-cloud",
            exclude: ["private-cloud.json", "README.md", "CSupport"],
            swiftSettings: swiftSettings
        ),

        .target(
            name: "AFMExampleSwiftBackend",
            dependencies: ["AFMBackendKit"],
            path: "share/afm-dev/examples/swift",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AFMKitFixtureBackend",
            dependencies: ["AFMBackendKit"],
            path: "Tests/Fixtures/kit-backend",
            swiftSettings: swiftSettings
        ),

        // Tests.
        .target(
            name: "AFMTestSupport",
            dependencies: ["AFMLocks", "AFMJSON", "AFMSystem"],
            path: "Tests/AFMTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "AFMJSONTests", dependencies: ["AFMJSON"], swiftSettings: swiftSettings),
        .testTarget(name: "AFMLoggingTests", dependencies: ["AFMLogging"], swiftSettings: swiftSettings),
        .testTarget(name: "AFMSchemaTests", dependencies: ["AFMSchema", "AFMJSON"], swiftSettings: swiftSettings),
        .testTarget(name: "AFMImagesTests", dependencies: ["AFMImages"], swiftSettings: swiftSettings),
        .testTarget(name: "AFMSealingTests", dependencies: ["AFMSealing"], swiftSettings: swiftSettings),
        .testTarget(
            name: "AFMHTTPTests",
            dependencies: ["AFMLocks", "AFMHTTP", "AFMSystem", "AFMLogging", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AFMBackendsTests",
            dependencies: ["AFMLocks", "AFMBackends", "AFMCore", "AFMJSON", "AFMLogging", "AFMSystem", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AFMResponsesTests",
            dependencies: ["AFMResponses", "AFMBackends", "AFMJSON", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AFMDaemonTests",
            dependencies: ["AFMLocks", "AFMDaemon", "AFMDialects", "AFMResponses", "AFMJSON", "AFMTestSupport", "AFMSystem"],
            swiftSettings: swiftSettings
        ),
        // Rewrites the settings file in a loop until killed (the crash-safety test of SettingsStore).
        .executableTarget(
            name: "afm-atomic-writer",
            dependencies: ["AFMConfig"],
            path: "Tests/Fixtures/atomic-writer",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AFMConfigTests",
            dependencies: ["AFMConfig", "AFMJSON", "AFMSystem", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AFMAdminTests",
            dependencies: ["AFMLocks", "AFMAdmin", "AFMJSON", "AFMSystem", "AFMLogging", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "AFMStoreTests", dependencies: ["AFMStore"], swiftSettings: swiftSettings),
        .testTarget(
            name: "AFMChatTests",
            dependencies: ["AFMChat", "AFMClient", "AFMSSE", "AFMCore", "AFMStore", "AFMImageCodec", "AFMJSON", "AFMSystem", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AFMLocalBackendTests",
            dependencies: ["AFMJSON", "AFMSystem", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AFMPrivateCloudTests",
            dependencies: ["AFMLocks", "CAFMBackendABI", "AFMJSON", "AFMSystem", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        // afm chat in a pseudo-terminal (tmux) against a real afmd; crash safety of the history.
        .testTarget(
            name: "AFMChatCLITests",
            dependencies: ["AFMLocks", "AFMChat", "AFMStore", "AFMTestSupport", "AFMWebChat"],
            swiftSettings: swiftSettings
        ),
        // The agent runtime against real daemons (scripted backend, local model) and real MCP servers; `afm agent`.
        .testTarget(
            name: "AFMAgentTests",
            dependencies: ["AFMLocks", "AFMAgent", "AFMClient", "AFMJSON", "AFMSystem", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The fuzz targets' properties (also compiled into the libFuzzer binaries by scripts/fuzz) and the test
        // that runs every seed and regression input of Fuzz/ through them.
        .testTarget(
            name: "AFMFuzzTests",
            dependencies: [
                "AFMHTTP", "AFMJSON", "AFMSchema", "AFMResponses", "AFMDialects", "AFMCore", "AFMImages", "AFMConfig",
                "AFMAdmin", "AFMBackends", "AFMClient", "AFMSSE", "AFMChat", "AFMBridge", "AFMTestSupport",
            ],
            swiftSettings: swiftSettings
        ),
        // The game layer and the bridge: the dispatcher, `afm bridge`, libafm-bridge.so from C, NPCs on the local model.
        .testTarget(
            name: "AFMBridgeTests",
            dependencies: ["AFMLocks", "AFMBridge", "AFMGame", "AFMAgent", "AFMJSON", "AFMSystem", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AFMCtlTests",
            dependencies: ["AFMLocks", "AFMTestSupport"],
            swiftSettings: swiftSettings
        ),
    ]
)
