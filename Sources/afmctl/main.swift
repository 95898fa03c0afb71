// SPDX-License-Identifier: Apache-2.0
// afmctl: the command-line client of afmd's admin socket. See CtlHelp for the commands.
import AFMCore
import AFMJSON
import AFMSystem
import Foundation

// First, before any other thread: a mask and dispositions inherited from the starter (a test's dispatch worker
// blocks SIGTERM) would make afmctl ignore the signals that should end it.
InheritedSignals.reset()
let environment = ProcessInfo.processInfo.environment
let options: CtlOptions
do {
    options = try CtlOptions(arguments: Array(CommandLine.arguments.dropFirst()))
} catch {
    CtlOutput.error(error.message)
    CtlOutput.error("Usage: afmctl [--socket PATH] [--json] COMMAND (see afmctl --help)", prefix: false)
    exit(CtlRunner.usageStatus)
}
var socket = options.socket ?? ""
if options.socket == nil && options.needsSocket {
    do {
        socket = try CtlOptions.defaultSocket(environment: environment)
    } catch {
        CtlOutput.error(error.description)
        exit(CtlRunner.permissionStatus)
    }
}
let runner = CtlRunner(options: options, socket: socket)
exit(runner.run())
