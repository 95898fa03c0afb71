// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation

/// The command line of `afm-backend-check` (share/man/afm-backend-check.1).
struct CheckOptions {
    var library = ""
    var json = false
    var settings: [String: String] = [:]
    var runnerPath: String?
    /// The most output tokens any request of the checks asks for (nil: the model's budget, 64 for short answers).
    var maxOutputTokens: Int?
    var checks = ConformanceBattery.Check.allCases
    /// Child mode: run this one check in this process (internal; CheckRunner starts it).
    var runOne: ConformanceBattery.Check?
    var stateDirectory: String?

    static let usage = """
        usage: afm-backend-check [--json] [--setting KEY=VALUE]... [--only CHECK[,CHECK...]] [--runner PATH]
                                 [--max-output-tokens N] LIBRARY.so
               afm-backend-check --list | --help | --version

        Loads an AFM backend library and runs the ABI conformance battery (docs/backend-abi.md): one line per
        check, then a summary. Exit status 0 when every check passed, 1 when one failed, 2 for a usage error.

          --json               one JSON document instead of lines (for CI)
          --setting KEY=VALUE  a setting of the backend config document (as [Backend.<id>] KEY=VALUE); repeatable
          --only CHECKS        run only these checks (comma-separated names, see --list)
          --runner PATH        afm-backend-runner for the runner check (default: next to this program, or
                               ../lib/afm/runner/afm-backend-runner)
          --max-output-tokens N  ask for at most N output tokens in every request (for a real model on a slow
                               machine: 100 concurrent answers of 64 tokens may not fit the concurrency check's 120 s);
                               long answers then get a short prompt too
          --list               the checks and what each asserts
        """

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    /// Parses `arguments` (without the program name).
    init(arguments: [String]) throws(UsageError) {
        var index = 0
        func value(_ option: String) throws(UsageError) -> String {
            index += 1
            guard index < arguments.count else { throw UsageError(description: "\(option) needs a value") }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--json": json = true
            case "--setting":
                let pair = try value(argument)
                guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                    throw UsageError(description: "--setting takes KEY=VALUE, not \(pair)")
                }
                settings[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
            case "--only":
                var selected: [ConformanceBattery.Check] = []
                for name in try value(argument).split(separator: ",") {
                    guard let check = ConformanceBattery.Check(rawValue: String(name)) else {
                        throw UsageError(description: "unknown check \(name) (see --list)")
                    }
                    selected.append(check)
                }
                checks = ConformanceBattery.Check.allCases.filter(selected.contains)
            case "--runner": runnerPath = try value(argument)
            case "--max-output-tokens":
                let text = try value(argument)
                guard let tokens = Int(text), tokens >= 1 else {
                    throw UsageError(description: "--max-output-tokens takes a positive number, not \(text)")
                }
                maxOutputTokens = tokens
            case "--run-one":
                let name = try value(argument)
                guard let check = ConformanceBattery.Check(rawValue: name) else {
                    throw UsageError(description: "unknown check \(name)")
                }
                runOne = check
            case "--state-dir": stateDirectory = try value(argument)
            default:
                guard !argument.hasPrefix("-"), library.isEmpty else {
                    throw UsageError(description: argument.hasPrefix("-") ? "unknown option \(argument)" : "one library only")
                }
                library = argument
            }
            index += 1
        }
        guard !library.isEmpty else { throw UsageError(description: "no backend library given") }
        guard FileManager.default.isReadableFile(atPath: library) else {
            throw UsageError(description: "cannot read \(library)")
        }
        // dlopen needs a path with a slash to not search the library path.
        if !library.contains("/") { library = "./" + library }
    }

    /// The runner for the runner check.
    var resolvedRunnerPath: String {
        if let runnerPath { return runnerPath }
        let executable = CurrentProcess.executablePath() ?? CommandLine.arguments[0]
        let directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        let beside = directory.appendingPathComponent("afm-backend-runner").path
        let installed = directory.deletingLastPathComponent().appendingPathComponent("lib/afm/runner/afm-backend-runner").path
        return !FileManager.default.isExecutableFile(atPath: beside) && FileManager.default.isExecutableFile(atPath: installed)
            ? installed : beside
    }

    /// The arguments of the child process that runs `check`.
    func childArguments(for check: ConformanceBattery.Check) -> [String] {
        var arguments = ["--run-one", check.rawValue, "--runner", resolvedRunnerPath]
        if let maxOutputTokens { arguments += ["--max-output-tokens", String(maxOutputTokens)] }
        if let stateDirectory { arguments += ["--state-dir", stateDirectory + "/" + check.rawValue] }
        for (key, value) in settings.sorted(by: { $0.key < $1.key }) { arguments += ["--setting", "\(key)=\(value)"] }
        return arguments + [library]
    }
}
