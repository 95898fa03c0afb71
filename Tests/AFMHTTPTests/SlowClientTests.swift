// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import AFMSystem
import Glibc
import Synchronization
import Testing

/// Slowloris: a thousand connections that each send a header byte per second must neither slow ordinary requests
/// down nor live past the header deadline.
///
/// Both clients run on their own threads with blocking waits (`poll`), never on the cooperative pool, so what is
/// measured is the server, not the test's own scheduling.
@Suite struct SlowClientTests {
    static let slowCount = 1000
    static let headerDeadline = Duration.seconds(5)

    @Test func aThousandSlowHeaderSendersGet408AtTheDeadlineWhileOrdinaryRequestsStayFast() async throws {
        // Both ends of every connection live in this process: 2,000 descriptors and change.
        let soft = ResourceLimits.raiseOpenFilesSoftLimit(to: 8192)
        try #require(
            soft >= UInt64(2 * Self.slowCount + 512),
            "RLIMIT_NOFILE is \(soft) and its hard limit does not allow \(2 * Self.slowCount + 512)")
        var configuration = HTTPServer.Configuration()
        configuration.requestHeaderTimeout = Self.headerDeadline
        configuration.maxConnections = Self.slowCount + 100
        configuration.ioThreadCount = 2  // as afmd runs on a 2-core machine (IOThreads=0: one per CPU)
        try await withTestServer(configuration: configuration) { server, port in
            // A first request pays for lazily made things (the handler executor, the date cache): not measured.
            let warmUp = try TestClient(port: port)
            try await warmUp.send("GET /warm-up HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            #expect(try await warmUp.readResponse().status == 200)
            let done = StopFlag()
            let crowdConnected = StopFlag()
            let crowdAccepted = StopFlag()
            async let ordinary = onThread("ordinary") {
                try OrdinaryClient.run(port: port, after: crowdAccepted, until: done)
            }
            // Measuring starts once the server holds the whole crowd.
            async let accepted: Bool = {
                let held = try await eventually {
                    crowdConnected.isSet && server.activeConnectionCount >= Self.slowCount
                }
                crowdAccepted.set()
                return held
            }()
            let slow: [SlowOutcome]
            do {
                slow = try await onThread("slow-crowd") {
                    try SlowCrowd.run(
                        port: port, count: Self.slowCount, giveUpAfter: Self.headerDeadline + .seconds(15),
                        connected: crowdConnected)
                }
            } catch {
                crowdAccepted.set()
                done.set()
                _ = try? await ordinary
                throw error
            }
            done.set()
            let latencies = try await ordinary.sorted()
            #expect(try await accepted, "the server never held all \(Self.slowCount) slow connections")

            // Every slow connection got 408 (with the JSON envelope) at the deadline, and was closed.
            let answered = slow.filter { $0.status == 408 }
            #expect(answered.count == Self.slowCount, "statuses: \(Dictionary(grouping: slow, by: \.status).mapValues(\.count))")
            #expect(slow.allSatisfy { $0.closed })
            #expect(slow.allSatisfy { $0.envelope })
            let times = slow.compactMap(\.answeredAfter).sorted()
            try #require(!times.isEmpty)
            #expect(times.first! >= Self.headerDeadline - .milliseconds(10))
            #expect(times.last! < Self.headerDeadline + .seconds(2), "the last 408 came \(times.last!) after its first byte")

            // Ordinary requests were served throughout, fast.
            try #require(latencies.count >= 50, "only \(latencies.count) ordinary requests completed")
            let p50 = latencies[latencies.count / 2]
            let p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
            print("slow clients: \(Self.slowCount) answered 408 after \(times.first!)…\(times.last!); ordinary requests: "
                + "\(latencies.count), p50 \(p50), p99 \(p99), max \(latencies.last!)")
            // Not starved: had the slow connections held the server, ordinary requests would have waited for their
            // 408s at the header deadline. (How fast is a benchmark's question: docs/PERFORMANCE.md, bench-http.)
            #expect(latencies.last! < Self.headerDeadline / 2, "ordinary p99 \(p99) (p50 \(p50), max \(latencies.last!))")
            #expect(try await eventually { server.activeConnectionCount == 0 })
        }
    }
}

/// What one slow connection saw.
struct SlowOutcome: Sendable {
    var status: Int?
    /// From its first byte to the arrival of the answer.
    var answeredAfter: Duration?
    /// The answer carried the JSON error envelope.
    var envelope = false
    var closed = false
}

/// A one-way flag between the test and a client thread.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// Runs `body` on a dedicated thread and returns its result without blocking the cooperative pool.
func onThread<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        do {
            try IOThread.spawn(name: name) { continuation.resume(with: Result { try body() }) }.detach()
        } catch {
            continuation.resume(throwing: error)
        }
    }
}

/// Sequential requests, each on a new connection, from when the crowd is connected until told to stop; returns each
/// one's latency (connect to end of response).
enum OrdinaryClient {
    static func run(port: Int, after start: StopFlag, until done: StopFlag) throws -> [Duration] {
        while !start.isSet { pauseThread(milliseconds: 5) }
        let address = try #require(SocketAddress(host: "127.0.0.1", port: port))
        let clock = ContinuousClock()
        let request = Array("GET /ordinary HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".utf8)
        var latencies: [Duration] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !done.isSet {
            let start = clock.now
            let socket = try FileDescriptor.connectTCP(to: address)
            defer { socket.close() }
            _ = try request.withUnsafeBytes { try socket.write($0) }
            var response: [UInt8] = []
            while true {
                let ready = try socket.poll(readable: true, writable: false, timeoutMilliseconds: 5000)
                guard ready.readable || ready.hangup else {
                    throw TestClientError(description: "an ordinary request got no answer in 5 s")
                }
                guard case .processed(let count) = try buffer.withUnsafeMutableBytes({ try socket.read(into: $0) }),
                    count > 0
                else { break }
                response += buffer[0..<count]
            }
            latencies.append(clock.now - start)
            guard response.starts(with: Array("HTTP/1.1 200 ".utf8)) else {
                throw TestClientError(description: "an ordinary request got: \(String(decoding: response.prefix(80), as: UTF8.self))")
            }
            pauseThread(milliseconds: 20)
        }
        return latencies
    }
}

/// `count` connections that send a request line and `Host` at once, then one more header byte per second, never
/// finishing the header block; each is watched until the server answers and closes it. The clients are
/// independent, so their bytes are spread over each second rather than sent in one burst.
enum SlowCrowd {
    static func run(port: Int, count: Int, giveUpAfter: Duration, connected: StopFlag) throws -> [SlowOutcome] {
        let address = try #require(SocketAddress(host: "127.0.0.1", port: port))
        let clock = ContinuousClock()
        let opening = Array("GET /slow HTTP/1.1\r\nHost: t\r\n".utf8)
        let trickle = Array(("X-Slow: " + String(repeating: "a", count: 64)).utf8)
        var sockets: [FileDescriptor] = []
        var started: [ContinuousClock.Instant] = []
        var index: [Int32: Int] = [:]
        defer { for socket in sockets { socket.close() } }
        for number in 0..<count {
            let socket = try FileDescriptor.connectTCP(to: address, nonBlocking: true)
            sockets.append(socket)
            index[socket.rawValue] = number
            guard case .processed(opening.count) = try opening.withUnsafeBytes({ try socket.write($0) }) else {
                throw TestClientError(description: "the request line did not fit in an empty socket buffer")
            }
            started.append(clock.now)
        }
        connected.set()
        var outcomes = [SlowOutcome](repeating: SlowOutcome(), count: count)
        var received = [[UInt8]](repeating: [], count: count)
        var pending = Set(0..<count)
        // Connection `number` sends its next byte once a second at its own phase: number/count of a second.
        var sentBytes = [Int](repeating: 0, count: count)
        let firstByte = clock.now
        let end = clock.now + giveUpAfter
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !pending.isEmpty && clock.now < end {
            for socket in try PollSet.waitReadable(pending.map { sockets[$0] }, timeoutMilliseconds: 20) {
                guard let number = index[socket.rawValue] else { continue }
                var finished = false
                while !finished {
                    let result: IOResult<Int>
                    do {
                        result = try chunk.withUnsafeMutableBytes { try socket.read(into: $0) }
                    } catch {
                        finished = true  // A reset after the answer counts as closed.
                        break
                    }
                    switch result {
                    case .wouldBlock: break
                    case .processed(0): finished = true
                    case .processed(let n): received[number] += chunk[0..<n]
                    }
                    if case .wouldBlock = result { break }
                }
                if outcomes[number].answeredAfter == nil, !received[number].isEmpty {
                    outcomes[number].answeredAfter = clock.now - started[number]
                }
                if finished {
                    let text = String(decoding: received[number], as: UTF8.self)
                    outcomes[number].status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) }
                    outcomes[number].envelope = text.contains(#""code":"request_timeout""#)
                    outcomes[number].closed = true
                    pending.remove(number)
                }
            }
            let elapsed = clock.now - firstByte
            // Connections already answered stop sending, as a real client would.
            for number in pending where received[number].isEmpty {
                let due = Duration.seconds(sentBytes[number] + 1) + .seconds(1) * (Double(number) / Double(count))
                guard elapsed >= due else { continue }
                let byte = trickle[sentBytes[number] % trickle.count]
                sentBytes[number] += 1
                _ = try? [byte].withUnsafeBytes { try sockets[number].write($0) }
            }
        }
        return outcomes
    }
}

/// Sleeps the calling (dedicated) thread.
private func pauseThread(milliseconds: Int) {
    var interval = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
    var remaining = timespec()
    while nanosleep(&interval, &remaining) != 0 { interval = remaining }
}
