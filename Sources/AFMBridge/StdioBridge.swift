// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc
import AFMLogging
import AFMSystem
import Dispatch

/// `afm bridge`: the bridge protocol over standard input and output, one JSON-RPC message per line in each
/// direction. Standard output carries protocol messages only; logs go to standard error.
///
/// ```
/// stdin ─► lines (at most maxMessageBytes each) ─► Bridge.receive ─► BridgeOutbox ─► stdout (one writer thread)
/// end of stdin │ `shutdown` answered │ SIGTERM/SIGINT │ stdout gone ─► Bridge.shutdown ─► exit 0
/// ```
///
/// The end of standard input means the host is gone (it exited, crashed or was killed): runs are cancelled, MCP
/// servers stopped, and the bridge exits 0.
public enum StdioBridge {
    /// Runs the bridge on descriptors 0 and 1 until the host leaves; returns the exit status. Call
    /// `SignalListener.blockInCallingThread([SIGTERM, SIGINT])` first, before any thread exists.
    public static func run(configuration: BridgeConfiguration, logger: Logger) -> Int32 {
        let wake: EventFD
        do {
            wake = try EventFD()
            try SignalListener.start([SIGTERM, SIGINT]) { signal in
                logger.info("signal \(signal): shutting down")
                wake.signal()
            }
        } catch {
            logger.error("cannot start: \(error)")
            return 70
        }
        let output = FileDescriptor(rawValue: 1)
        let outbox: BridgeOutbox
        do {
            outbox = try BridgeOutbox(
                deliver: { message in
                    do {
                        try output.writeAllToPipe(message + [0x0A])
                        return true
                    } catch {
                        return false
                    }
                },
                onHostGone: {
                    logger.info("standard output is closed: shutting down")
                    wake.signal()
                })
        } catch {
            logger.error("cannot start the output thread: \(error)")
            return 70
        }
        let bridge = Bridge(configuration: configuration, outbox: outbox, logger: logger) { wake.signal() }
        logger.info("ready: protocol \(Bridge.protocolVersion), gateway \(configuration.url), model \(configuration.model)")
        readLines(into: bridge, wake: wake, limit: configuration.maxMessageBytes, logger: logger)

        bridge.close()
        logger.info("stopped")
        return 0
    }

    /// Feeds standard input to the bridge line by line until it ends or `wake` fires.
    private static func readLines(into bridge: Bridge, wake: EventFD, limit: Int, logger: Logger) {
        let input = FileDescriptor(rawValue: 0)
        var pending: [UInt8] = []
        // After a line over the limit: its rest is skipped up to the next newline.
        var skipping = false
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let ready: [FileDescriptor]
            do {
                ready = try PollSet.waitReadable([input, wake.descriptor], timeoutMilliseconds: -1)
            } catch {
                logger.error("poll failed: \(error)")
                return
            }
            if ready.contains(wake.descriptor) { return }
            let count: Int
            do {
                let result = try chunk.withUnsafeMutableBytes { try input.read(into: $0) }
                guard case .processed(let read) = result else { continue }
                count = read
            } catch {
                logger.error("reading standard input failed: \(error)")
                return
            }
            if count == 0 {
                if !pending.isEmpty && !skipping { bridge.receive(pending[...]) }
                logger.info("standard input ended: shutting down")
                return
            }
            var start = 0
            while let newline = chunk[start..<count].firstIndex(of: 0x0A) {
                if skipping {
                    skipping = false
                } else if pending.isEmpty {
                    bridge.receive(chunk[start..<newline])
                } else {
                    pending += chunk[start..<newline]
                    bridge.receive(pending[...])
                    pending.removeAll(keepingCapacity: pending.count <= 1 << 20)
                }
                start = newline + 1
            }
            if !skipping { pending += chunk[start..<count] }
            if pending.count > limit {
                // Answered once (the bridge refuses a message over the limit), the rest of the line skipped.
                bridge.receive(pending[...])
                pending = []
                skipping = true
            }
        }
    }
}
