// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import AFMTestSupport
import Foundation
import Testing

@Suite struct ConfigurationLoaderTests {
    @Test func defaultsWhenNothingIsConfigured() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let config = try tree.load()
        #expect(config.listen == .tcp(HostPort(host: "127.0.0.1", port: 11535)))
        #expect(config.shutdownTimeout == .seconds(30))
        #expect(config.drainTimeout == .seconds(120))
        #expect(config.backendDirectory == nil)
        #expect(config.operatorGroups == ["afm"])
        #expect(config.cloudPreference == false)
        #expect(config.commonPrompt == "")
        #expect(config.adminSocket == tree.root + "/run/afm/admin.sock")
        #expect(config.filesRead.isEmpty)
        for key in ConfigSchema.keys { #expect(config.origin(of: key) == .defaultValue) }
    }

    /// One row per layer: Server.Listen is set in every layer up to `top`; the top one wins.
    @Test(arguments: [
        (0, "127.0.0.1:11535", "default"),
        (1, "127.0.0.1:1001", "main"),
        (2, "127.0.0.1:1002", "drop-in"),
        (3, "127.0.0.1:1003", "control"),
        (4, "127.0.0.1:1004", "environment"),
        (5, "127.0.0.1:1005", "command-line"),
    ])
    func precedence(top: Int, expected: String, layer: String) throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        if top >= 1 { tree.write("etc/afm/afmd.conf", "[Server]\nListen=127.0.0.1:1001\n") }
        if top >= 2 { tree.write("usr/lib/afm/afmd.conf.d/50-port.conf", "[Server]\nListen=127.0.0.1:1002\n") }
        if top >= 3 { tree.write("var/lib/afm/control.json", #"{"schema":"AFM.serverSettings.v1","version":1,"port":1003}"#) }
        let environment = top >= 4 ? ["AFM_SERVER_LISTEN": "127.0.0.1:1004"] : [:]
        let commandLine = top >= 5 ? [("--listen", "127.0.0.1:1005")] : []
        let config = try tree.load(environment: environment, commandLine: commandLine)
        #expect(config.string(.serverListen) == expected)
        #expect(config.origin(of: .serverListen).layer == layer)
        #expect(config.entry("Server.Listen")?.shadows.count == top)
        if top > 0 { #expect(config.entry("Server.Listen")?.shadows.last?.origin == .defaultValue) }
    }

    @Test func originsNameFileAndLine() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let main = tree.write("etc/afm/afmd.conf", "# comment\n[Server]\n\nShutdownTimeoutSeconds=7\n[Backends]\nDisabled=a, b\n")
        let config = try tree.load(
            environment: ["AFM_BACKENDS_DRAIN_TIMEOUT_SECONDS": "9"], commandLine: [("--backend-dir", "/opt/b")])
        #expect(config.origin(of: .serverShutdownTimeout).description == "\(main):4")
        #expect(config.origin(of: .backendsDisabled) == .mainFile(path: main, line: 6))
        #expect(config.disabledBackends == ["a", "b"])
        #expect(config.origin(of: .backendsDrainTimeout).description == "environment AFM_BACKENDS_DRAIN_TIMEOUT_SECONDS")
        #expect(config.drainTimeout == .seconds(9))
        #expect(config.origin(of: .backendsDirectory).description == "command line --backend-dir")
        #expect(config.backendDirectory == "/opt/b")
        let json = config.json(keys: ["Server.ShutdownTimeoutSeconds"])
        #expect(json["values"]?[0]?["origin"]?.stringValue == "\(main):4")
        #expect(json["values"]?[0]?["shadows"]?[0]?["origin"]?.stringValue == "default")
        #expect(json["values"]?[0]?["shadows"]?[0]?["value"]?.stringValue == "30")
    }

    @Test func onlyTheFirstMainFileIsRead() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let etc = tree.write("etc/afm/afmd.conf", "[Server]\nShutdownTimeoutSeconds=11\n")
        tree.write("usr/lib/afm/afmd.conf", "[Server]\nShutdownTimeoutSeconds=22\nRequestHeaderTimeoutSeconds=33\n")
        let config = try tree.load()
        #expect(config.mainFile == etc)
        #expect(config.integer(.serverShutdownTimeout) == 11)
        #expect(config.integer(.serverRequestHeaderTimeout) == 30)
    }

    @Test func vendorMainFileAndLegacyRootFileAreFallbacks() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        tree.write("afmd.conf", "[Server]\nShutdownTimeoutSeconds=3\n")
        #expect(try tree.load().integer(.serverShutdownTimeout) == 3)
        tree.write("usr/lib/afm/afmd.conf", "[Server]\nShutdownTimeoutSeconds=4\n")
        #expect(try tree.load().integer(.serverShutdownTimeout) == 4)
    }

    @Test func explicitConfigFileReplacesTheCandidates() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        tree.write("etc/afm/afmd.conf", "[Server]\nShutdownTimeoutSeconds=11\n")
        let other = tree.write("elsewhere.conf", "[Server]\nShutdownTimeoutSeconds=12\n")
        tree.write("etc/afm/afmd.conf.d/10-x.conf", "[Server]\nProcessingDeadlineSeconds=13\n")
        let config = try tree.load(configFile: other)
        #expect(config.integer(.serverShutdownTimeout) == 12)
        #expect(config.integer(.serverProcessingDeadline) == 13)
        #expect(throws: ConfigError.self) { try tree.load(configFile: tree.root + "/missing.conf") }
    }

    @Test func dropInsMergeByNameAcrossDirectories() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        tree.write("usr/lib/afm/afmd.conf.d/10-vendor.conf", "[Server]\nShutdownTimeoutSeconds=10\nRequestHeaderTimeoutSeconds=10\n")
        tree.write("usr/lib/afm/afmd.conf.d/60-same.conf", "[Server]\nProcessingDeadlineSeconds=100\n")
        let etcSame = tree.write("etc/afm/afmd.conf.d/60-same.conf", "[Server]\nProcessingDeadlineSeconds=200\n")
        let etcLate = tree.write("etc/afm/afmd.conf.d/90-late.conf", "[Server]\nShutdownTimeoutSeconds=90\n")
        tree.write("etc/afm/afmd.conf.d/notes.txt", "[Nonsense]\n")
        let config = try tree.load()
        #expect(config.dropIns.map { ($0 as NSString).lastPathComponent } == ["10-vendor.conf", "60-same.conf", "90-late.conf"])
        #expect(config.dropIns[1] == etcSame)
        #expect(config.integer(.serverProcessingDeadline) == 200)  // /etc shadows /usr/lib of the same name
        #expect(config.integer(.serverShutdownTimeout) == 90)  // later name wins
        #expect(config.origin(of: .serverShutdownTimeout) == .dropIn(path: etcLate, line: 2))
        #expect(config.integer(.serverRequestHeaderTimeout) == 10)
    }

    @Test func devNullSymlinkMasksAVendorDropIn() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        tree.write("usr/lib/afm/afmd.conf.d/20-x.conf", "[Server]\nShutdownTimeoutSeconds=20\n")
        try FileManager.default.createDirectory(atPath: tree.root + "/etc/afm/afmd.conf.d", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: tree.root + "/etc/afm/afmd.conf.d/20-x.conf", withDestinationPath: "/dev/null")
        let config = try tree.load()
        #expect(config.dropIns.isEmpty)
        #expect(config.integer(.serverShutdownTimeout) == 30)
    }

    @Test func backendSectionsPassThrough() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let file = tree.write(
            "etc/afm/afmd.conf", "[Backend.scripted]\nScript=/x.json\n[Backend.local.v2]\nModel=/m.gguf\nThreads=2\n")
        tree.write("etc/afm/afmd.conf.d/60-model.conf", "[Backend.local.v2]\nModel=/n.gguf\n")
        let config = try tree.load()
        #expect(config.backendSettings == ["scripted": ["Script": "/x.json"], "local.v2": ["Model": "/n.gguf", "Threads": "2"]])
        #expect(config.origin(of: "Backend.scripted.Script") == .mainFile(path: file, line: 2))
        #expect(config.entry("Backend.local.v2.Model")?.shadows.first?.value == "/m.gguf")
    }

    /// Keys may contain dots too (the private cloud's `Upstream.<n>.<Key>`): the section header, not the last dot
    /// of the flattened name, says where the backend id ends.
    @Test func backendKeysMayContainDots() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        tree.write(
            "etc/afm/afmd.conf",
            "[Backend.private-cloud]\nUpstreams=http://a/v1\nUpstream.1.DailyRequestQuota=5\n[Backend.local.v2]\nModel=/m.gguf\n")
        let config = try tree.load()
        #expect(
            config.backendSettings == [
                "private-cloud": ["Upstreams": "http://a/v1", "Upstream.1.DailyRequestQuota": "5"], "local.v2": ["Model": "/m.gguf"],
            ])
        #expect(config.entry("Backend.private-cloud.Upstream.1.DailyRequestQuota")?.value == "5")
    }

    @Test(arguments: [
        ("[Sever]\nListen=1.2.3.4:5\n", 1, "unknown section [Sever]"),
        ("[Server]\nLisen=1.2.3.4:5\n", 2, "unknown key 'Lisen' in [Server]"),
        ("[Server]\n\nListen=nope\n", 3, "Listen must be HOST:PORT"),
        ("[Server]\nListen=127.0.0.1:70000\n", 2, "Listen must be HOST:PORT"),
        ("[Server]\nShutdownTimeoutSeconds=0\n", 2, "between 1 and 86400"),
        ("[Server]\nShutdownTimeoutSeconds=ten\n", 2, "not 'ten'"),
        ("[Cloud]\nPreference=maybe\n", 2, "must be yes or no"),
        ("Listen=1.2.3.4:5\n", 1, "before any [Section]"),
        ("[Server]\nListen\n", 2, "expected Key=Value"),
        ("[Server\n", 1, "section header"),
        ("[Backend.a b]\nX=1\n", 1, "backend id"),
    ])
    func badFilesAreErrorsWithFileAndLine(text: String, line: Int, message: String) throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let file = tree.write("etc/afm/afmd.conf.d/70-bad.conf", text)
        let error = try #require(throws: ConfigError.self) { try tree.load() }
        #expect(error.file == file)
        #expect(error.line == line)
        #expect(error.message.contains(message), "\(error)")
        #expect(error.description.hasPrefix("\(file):\(line): "))
    }

    @Test func badEnvironmentAndCommandLineValuesNameTheirSource() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let environmentError = try #require(throws: ConfigError.self) {
            try tree.load(environment: ["AFM_SERVER_SHUTDOWN_TIMEOUT_SECONDS": "-1"])
        }
        #expect(environmentError.description.hasPrefix("environment AFM_SERVER_SHUTDOWN_TIMEOUT_SECONDS: Server.ShutdownTimeoutSeconds"))
        let commandLineError = try #require(throws: ConfigError.self) { try tree.load(commandLine: [("--listen", "x")]) }
        #expect(commandLineError.description.hasPrefix("command line --listen: Server.Listen must be HOST:PORT"))
        #expect(throws: ConfigError.self) { try tree.load(commandLine: [("--nonsense", "1")]) }
        // The generic form works for every key.
        let config = try tree.load(commandLine: [("--cloud.preference", "yes"), ("--Server.ShutdownTimeoutSeconds", "5")])
        #expect(config.cloudPreference)
        #expect(config.integer(.serverShutdownTimeout) == 5)
    }

    @Test func unknownEnvironmentVariablesOfKnownSectionsAreWarnedAbout() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let config = try tree.load(environment: ["AFM_SERVER_LISTN": "1", "AFM_BIN_DIR": "/x", "AFM_ADMIN_SOCKET": "/s"])
        #expect(config.warnings == ["environment AFM_SERVER_LISTN: no such configuration key; ignored"])
        #expect(config.adminSocket == "/s")
    }

    @Test func environmentNames() {
        #expect(ConfigKey.serverListen.environmentVariable == "AFM_SERVER_LISTEN")
        #expect(ConfigKey.serverShutdownTimeout.environmentVariable == "AFM_SERVER_SHUTDOWN_TIMEOUT_SECONDS")
        #expect(ConfigKey.adminOperatorGroups.environmentVariable == "AFM_ADMIN_OPERATOR_GROUPS")
        #expect(ConfigKey.responsesCommonPrompt.environmentVariable == "AFM_RESPONSES_COMMON_PROMPT")
        #expect(ConfigKey.cloudPreference.environmentVariable == "AFM_CLOUD_PREFERENCE")
        #expect(Set(ConfigSchema.keys.map(\.environmentVariable)).count == ConfigSchema.keys.count)
    }

    @Test func controlLayerSetsListenPromptAndCloud() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        tree.write("etc/afm/afmd.conf", "[Server]\nListen=10.0.0.1:2000\n")
        let control = tree.write(
            "var/lib/afm/control.json",
            #"{"schema":"AFM.serverSettings.v1","version":1,"revision":2,"host":"192.168.1.20","privateCloudPreference":true,"commonPrompt":"Be brief.\nReally."}"#)
        let config = try tree.load()
        #expect(config.listen == .tcp(HostPort(host: "192.168.1.20", port: 2000)))  // the port stays from the file
        #expect(config.cloudPreference)
        #expect(config.commonPrompt == "Be brief.\nReally.")
        #expect(config.origin(of: .responsesCommonPrompt) == .controlLayer(path: control))
        #expect(config.controlFile == control)
    }

    @Test func commonPromptEscapesInFiles() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        tree.write("etc/afm/afmd.conf", "[Responses]\nCommonPrompt=Line one.\\nLine two.\n")
        #expect(try tree.load().commonPrompt == "Line one.\nLine two.")
    }

    @Test func brokenControlLayerIsAnError() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        tree.write("var/lib/afm/control.json", #"{"version":9}"#)
        let error = try #require(throws: ConfigError.self) { try tree.load() }
        #expect(error.description.contains("newer"))
    }

    @Test func checkConfigReport() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let file = tree.write("etc/afm/afmd.conf", "[Server]\nListen=127.0.0.1:9\n")
        let good = ConfigCheck(loader: ConfigurationLoader(paths: tree.paths))
        #expect(good.exitStatus == 0)
        #expect(good.report.contains("read: \(file)"))
        #expect(good.report.contains("Server.Listen=127.0.0.1:9    # \(file):2"))
        #expect(good.report.hasSuffix("configuration OK"))
        tree.write("etc/afm/afmd.conf", "[Server]\nListen=127.0.0.1:9\nBogus=1\n")
        let bad = ConfigCheck(loader: ConfigurationLoader(paths: tree.paths))
        #expect(bad.exitStatus == 78)
        #expect(bad.report.hasSuffix("Error: \(file):3: unknown key 'Bogus' in [Server]; known keys: Listen, ShutdownTimeoutSeconds, RequestHeaderTimeoutSeconds, ProcessingDeadlineSeconds, IOThreads, MaxConnections, AllowedHosts, AllowedOrigins, ListenSocketMode, APIKeyFile, AllowUnauthenticated, MetricsRequireKey, DrainDelaySeconds, AccessLog"))
    }

    @Test func pathModes() {
        let user = ConfigPaths.resolve(
            configRoot: nil, configFile: nil, environment: ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"],
            effectiveUID: 1000)
        #expect(user.mode == .user)
        #expect(user.mainFileCandidates == ["/home/u/.config/afm/afmd.conf"])
        #expect(user.stateDirectory == "/home/u/.local/state/afm")
        #expect(user.defaultAdminSocket == "/run/user/1000/afm/admin.sock")
        let system = ConfigPaths.resolve(configRoot: nil, configFile: "/x.conf", environment: [:], effectiveUID: 0)
        #expect(system.mode == .system)
        #expect(system.controlFile == "/var/lib/afm/control.json")
        #expect(system.explicitMainFile == "/x.conf")
        #expect(system.dropInDirectories == ["/etc/afm/afmd.conf.d", "/usr/lib/afm/afmd.conf.d"])
        let service = ConfigPaths.resolve(
            configRoot: nil, configFile: nil, environment: ["STATE_DIRECTORY": "/var/lib/afm2", "RUNTIME_DIRECTORY": "/run/afm2"],
            effectiveUID: 105)
        #expect(service.mode == .system)
        #expect(service.defaultAdminSocket == "/run/afm2/admin.sock")
        let relocated = ConfigPaths.resolve(configRoot: "/t/", configFile: nil, environment: [:], effectiveUID: 0)
        #expect(relocated.stateDirectory == "/t/var/lib/afm")
        #expect(relocated.runtimeDirectory == "/t/run/afm")
    }

    @Test(arguments: ["127.0.0.1:1", "[::1]:8080", "localhost:0", "host-a.lan:65535", "0.0.0.0:11535"])
    func validHostPorts(text: String) { #expect(HostPort(text)?.description == text) }

    @Test(arguments: ["127.0.0.1", ":80", "::1:80", "a b:1", "h:-1", "h:65536", "[x]:1", "h:+1", "-h:1", "h/1:2"])
    func invalidHostPorts(text: String) { #expect(HostPort(text) == nil) }
}
