// SPDX-License-Identifier: Apache-2.0
// afm-backend-runner: hosts one backend library in its own process for afmd (runner hosting). Wiring only:
// the loader, the protocol and the relay live in AFMBackends (RunnerService), shared with in-process hosting.
import AFMBackends
import AFMLogging
import AFMSystem
import Foundation

@main
struct RunnerMain {
    static func main() {
        let environment = ProcessInfo.processInfo.environment
        let level = environment["AFM_LOG_LEVEL"].flatMap(Logger.Level.init(name:)) ?? .info
        var logger = Logger(label: "afm-backend-runner", level: level)
        let options: RunnerOptions
        do {
            options = try RunnerOptions(arguments: Array(CommandLine.arguments.dropFirst()))
        } catch {
            logger.error("usage: afm-backend-runner --channel-fd N --backend ID [--base-nice N] [--memory-limit-mb N] [--open-files N] [--nice N]: \(error)")
            CurrentProcess.exitImmediately(64)
        }
        logger = logger.with("pid", String(CurrentProcess.id))
        do {
            for warning in try options.applyLimits() { logger.warning(warning) }
        } catch {
            logger.error("cannot apply resource limits", ["error": error.description])
            CurrentProcess.exitImmediately(71)
        }
        RunnerService.serve(descriptor: FileDescriptor(rawValue: options.channelDescriptor), logger: logger)
    }
}
