// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMSystem
import AFMWebChat
import Dispatch
import Foundation

/// `afm chat --web`: serves the web chat until SIGINT or SIGTERM.
struct WebCommand {
    let console: Console
    let client: ResponsesClient
    let dataDirectory: String

    func run(host: String, port: Int, allowRemote: Bool) -> Int32 {
        // Taken by a signal thread, so Ctrl-C closes the history cleanly (its lease file goes, pending answers end).
        SignalListener.blockInCallingThread([SIGINT, SIGTERM])
        let server: WebChatServer
        let bound: Int
        do {
            server = try WebChatServer(dataDirectory: dataDirectory, client: client)
            bound = try server.start(host: host, port: port, allowRemote: allowRemote)
        } catch {
            console.error("afm: cannot serve the web chat on \(host):\(port): \(error)")
            return 69
        }
        let shown = host.contains(":") ? "[\(host)]" : host
        console.write("afm chat: serving the web chat on http://\(shown):\(bound)/ (history in \(dataDirectory); Ctrl-C stops)\n")
        let stopped = DispatchSemaphore(value: 0)
        do {
            try SignalListener.start([SIGINT, SIGTERM]) { _ in stopped.signal() }
        } catch {
            console.error("afm: cannot listen for signals: \(error)")
            return 70
        }
        stopped.wait()
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await server.stop()
            done.signal()
        }
        done.wait()
        return 0
    }
}
