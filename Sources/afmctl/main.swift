// SPDX-License-Identifier: Apache-2.0
// afmctl: the command-line client of afmd's admin socket. See CtlHelp for the commands.
import AFMCore
import AFMJSON
import Foundation

let environment = ProcessInfo.processInfo.environment
let options: CtlOptions
do {
    options = try CtlOptions(arguments: Array(CommandLine.arguments.dropFirst()))
} catch {
    CtlOutput.error(error.message)
    CtlOutput.error("Usage: afmctl [--socket PATH] [--json] COMMAND (see afmctl --help)", prefix: false)
    exit(CtlRunner.usageStatus)
}
let runner = CtlRunner(options: options, socket: options.socket ?? CtlOptions.defaultSocket(environment: environment))
exit(runner.run())
