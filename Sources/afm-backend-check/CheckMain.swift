// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import Foundation

/// `afm-backend-check LIBRARY.so`: the ABI conformance battery for a backend library (share/man/afm-backend-check.1).
@main
enum CheckMain {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.contains("--help") || arguments.contains("-h") {
            print(CheckOptions.usage)
            exit(0)
        }
        if arguments.contains("--version") {
            print("afm-backend-check \(AFMVersion.string) (AFM ABI \(AFMVersion.abiMajor).\(AFMVersion.abiMinor))")
            exit(0)
        }
        if arguments.contains("--list") {
            for check in ConformanceBattery.Check.allCases {
                print(check.rawValue.padding(toLength: 18, withPad: " ", startingAt: 0) + " " + check.summary)
            }
            exit(0)
        }
        var options: CheckOptions
        do { options = try CheckOptions(arguments: arguments) } catch {
            FileHandle.standardError.write(Data("afm-backend-check: \(error)\n\n\(CheckOptions.usage)\n".utf8))
            exit(2)
        }
        let ownDirectory = options.stateDirectory == nil
        let stateDirectory = options.stateDirectory ?? (NSTemporaryDirectory() + "/afm-backend-check-\(getpid())")
        options.stateDirectory = stateDirectory
        if let check = options.runOne {
            let resultDescriptor = CheckRunner.divertStandardOutput()
            try? FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
            let context = ConformanceBattery.Context(
                library: options.library, settings: options.settings, runnerPath: options.resolvedRunnerPath,
                stateDirectory: stateDirectory, maxOutputTokens: options.maxOutputTokens)
            CheckRunner.runOne(check, context, resultDescriptor: resultDescriptor)
        }
        let results = CheckRunner(options: options).runAll { result in
            if !options.json { print(result.line) }
        }
        if ownDirectory { try? FileManager.default.removeItem(atPath: stateDirectory) }
        let failed = results.filter { !$0.passed }.count
        if options.json {
            let document = JSONValue.object(
                JSONObject([
                    ("library", .string(options.library)), ("ok", .bool(failed == 0)),
                    ("passed", .number(JSONNumber(results.count - failed))), ("failed", .number(JSONNumber(failed))),
                    ("checks", .array(results.map(\.json))),
                ]))
            var bytes: [UInt8] = []
            JSONEncoding.appendPretty(document, to: &bytes)
            print(String(decoding: bytes, as: UTF8.self))
        } else {
            print("\(options.library): \(results.count) checks, \(results.count - failed) passed, \(failed) failed")
        }
        exit(failed == 0 ? 0 : 1)
    }
}
