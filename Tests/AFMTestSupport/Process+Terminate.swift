// SPDX-License-Identifier: Apache-2.0
import Foundation

extension Process {
    /// Sends `SIGTERM` and waits up to `seconds` for the process to end; one that does not is killed with `SIGKILL`
    /// so no test leaves it behind. Returns whether it ended by itself. The process has exited when this returns.
    public func terminateGracefully(within seconds: Double = 2) -> Bool {
        kill(processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning && Date() < deadline { usleep(10_000) }
        let stopped = !isRunning
        if !stopped { kill(processIdentifier, SIGKILL) }
        waitUntilExit()
        return stopped
    }
}
