// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import AFMTestSupport
import Foundation
import Testing

/// Line ends, byte order marks and encodings of configuration files, in the parser, the loader and `afmd`.
@Suite struct INIDocumentTests {
    /// Writes raw bytes (a BOM, invalid UTF-8) into the tree.
    @discardableResult
    func write(_ tree: ConfigTree, _ relative: String, _ bytes: [UInt8]) -> String {
        let path = tree.root + "/" + relative
        try? FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        return path
    }

    @Test(arguments: [
        ("[Server]\r\nShutdownTimeoutSeconds=7\r\n", 2),
        ("# c\r\n[Server]\r\nShutdownTimeoutSeconds=7\r\n", 3),
        ("\u{FEFF}[Server]\r\nShutdownTimeoutSeconds=7\r\n", 2),
        ("\u{FEFF}[Server]\nShutdownTimeoutSeconds=7", 2),
        ("[Server]\n\r\n  ; c\r\nShutdownTimeoutSeconds = 7 \r\n", 4),
    ])
    func crlfAndByteOrderMarkAreAccepted(text: String, line: Int) throws {
        let document = try INIDocument(bytes: Array(text.utf8), file: "f.conf")
        #expect(document.sections.map(\.name) == ["Server"])
        #expect(document.assignments.map(\.key) == ["ShutdownTimeoutSeconds"])
        #expect(document.assignments.map(\.value) == ["7"])
        #expect(document.assignments.map(\.line) == [line])
        #expect(try INIDocument(text: text, file: "f.conf") == document)
    }

    @Test func aCRLFFileIsValidatedLineByLine() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let main = tree.write("etc/afm/afmd.conf", "# c\r\n[Server]\r\nIOThreads=-5\r\n")
        let error = try #require(throws: ConfigError.self) { try tree.load() }
        #expect(error.file == main && error.line == 3)
        #expect(error.message.hasPrefix("IOThreads "))
        tree.write("etc/afm/afmd.conf", "[Server]\r\nShutdownTimeoutSeconds=7\r\n")
        let config = try tree.load()
        #expect(config.shutdownTimeout == .seconds(7))
        #expect(config.origin(of: .serverShutdownTimeout) == .mainFile(path: main, line: 2))
    }

    @Test func invalidUTF8IsRefusedAtItsLine() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let main = write(tree, "etc/afm/afmd.conf", Array("[Server]\r\n".utf8) + [0x23, 0xC3, 0x28, 0x0D, 0x0A])
        let error = try #require(throws: ConfigError.self) { try tree.load() }
        #expect(error.description == "\(main):2: the line is not valid UTF-8")
    }

    @Test func anUnreadableFileNamesThePathAndTheErrno() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let directory = tree.root + "/etc/afm/afmd.conf"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let error = try #require(throws: ConfigError.self) { try tree.load(configFile: directory) }
        #expect(error.description == "\(directory): cannot read: `read`: Is a directory (errno 21)")
    }

    /// `afmd --check-config` itself, on a CRLF file with a BOM: the bad value is found, at its line.
    @Test func checkConfigOfTheRealAfmdReadsCRLFFiles() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let main = write(tree, "etc/afm/afmd.conf", [0xEF, 0xBB, 0xBF] + Array("# c\r\n[Server]\r\nIOThreads=-5\r\n".utf8))
        let bad = try Self.checkConfig(root: tree.root)
        #expect(bad.status == 78)
        #expect(bad.output.contains("Error: \(main):3: IOThreads "), "\(bad.output)")
        tree.write("etc/afm/afmd.conf", "[Server]\r\nShutdownTimeoutSeconds=7\r\n")
        let good = try Self.checkConfig(root: tree.root)
        #expect(good.status == 0)
        #expect(good.output.contains("Server.ShutdownTimeoutSeconds=7    # \(main):2"), "\(good.output)")
    }

    /// `afmd --check-config` prints values and errors that came from files (a hand-edited control.json, the
    /// config file): their control characters are escaped, one line per value, no ESC reaches the terminal.
    @Test func checkConfigEscapesControlCharactersInValuesAndErrors() throws {
        let tree = ConfigTree()
        defer { tree.remove() }
        let control = tree.paths.controlFile
        try FileManager.default.createDirectory(
            atPath: (control as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let hostile = #"\u001b]0;PWN\u0007\nforged"#
        try #"{"schema":"AFM.serverSettings.v1","version":1,"revision":1,"commonPrompt":"\#(hostile)"}"#
            .write(toFile: control, atomically: true, encoding: .utf8)
        let good = try Self.checkConfig(root: tree.root)
        #expect(good.status == 0, "\(good.output)")
        #expect(!good.output.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(good.output)")
        #expect(good.output.contains(#"Responses.CommonPrompt=\x1b]0;PWN\x07\nforged    # control layer"#), "\(good.output)")
        #expect(!good.output.split(separator: "\n").contains { $0.hasPrefix("forged") })

        try #"{"schema":"AFM.serverSettings.v1","version":1,"revision":1,"host":"\#(hostile)"}"#
            .write(toFile: control, atomically: true, encoding: .utf8)
        let bad = try Self.checkConfig(root: tree.root)
        #expect(bad.status == 78, "\(bad.output)")
        #expect(!bad.output.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(bad.output)")
        #expect(bad.output.contains(#"\x1b]0;PWN\x07\nforged"#), "\(bad.output)")
        #expect(!bad.output.split(separator: "\n").contains { $0.hasPrefix("forged") })
    }

    static func checkConfig(root: String) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestPaths.afmd)
        process.arguments = ["--config-root", root, "--check-config"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }
}
