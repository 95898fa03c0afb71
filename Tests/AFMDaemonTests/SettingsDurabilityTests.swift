// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMConfig
import AFMJSON
import AFMLogging
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

@testable import AFMDaemon

/// An edit whose file was replaced but whose directory `fsync` failed (`.notDurable`) is in force: the daemon
/// applies it like any saved edit and reports the durability doubt under its own error name, not as an invalid
/// value.
@Suite struct SettingsDurabilityTests {
    /// A daemon (not started) whose settings store writes the file, then fails as an `fsync` of the directory can.
    private func daemon() throws -> (Daemon, String) {
        let root = TestPaths.makeTemporaryDirectory("afmd-durability")
        let paths = ConfigPaths.relocated(under: root)
        let loader = ConfigurationLoader(paths: paths)
        let loaded = try loader.load()
        let store = try SettingsStore(path: paths.controlFile) { (bytes, path, mode) throws(SystemCallError) in
            try AtomicFile.write(bytes, to: path, mode: mode)
            throw SystemCallError(call: "fsync", errno: Errno(rawValue: EIO))
        }
        let daemon = Daemon(
            loader: loader, loaded: loaded, environment: [:], logger: Logger(label: "test", sink: LogSink(capturing: ())),
            settings: store)
        return (daemon, paths.controlFile)
    }

    private func context(_ method: AdminMethod) -> AdminCallContext {
        AdminCallContext(credentials: PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()), level: .admin, method: method, wantsMore: false)
    }

    @Test func aPromptSavedButNotFlushedIsAppliedAndReportedAsNotDurable() async throws {
        let (daemon, path) = try daemon()
        let handler = DaemonAdminHandler(daemon: daemon)
        do {
            _ = try await handler.setPrompt(context(.setPrompt), text: "Saved anyway.", ifRevision: nil)
            Issue.record("a write whose fsync failed was reported as fully successful")
        } catch {
            #expect(error.name == "org.afm.Admin.SettingNotDurable", "\(error)")
            #expect(error.parameters["revision"]?.numberValue?.intValue == 1, "\(error)")
        }
        #expect(daemon.service.currentCommonPrompt == "Saved anyway.")
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains("Saved anyway."))
        let prompt = try await handler.getPrompt(context(.getPrompt))
        #expect(prompt["text"] == "Saved anyway." && prompt["revision"]?.numberValue?.intValue == 1)

        do {
            _ = try await handler.setSetting(context(.setSetting), key: "commonPrompt", value: "Second.")
            Issue.record("a write whose fsync failed was reported as fully successful")
        } catch {
            #expect(error.name == "org.afm.Admin.SettingNotDurable", "\(error)")
            #expect(error.parameters["key"] == "commonPrompt")
        }
        #expect(daemon.service.currentCommonPrompt == "Second.")
    }
}
