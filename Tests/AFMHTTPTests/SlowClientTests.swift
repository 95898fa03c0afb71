// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import AFMSystem
import Foundation
import Glibc
import Synchronization
import Testing

/// Slowloris: a thousand connections that each send a header byte per second must neither slow ordinary requests
/// down nor live past the header deadline (issue 20: "the normal requests' p99 stays under 50 ms and the slow ones
/// are closed at the header deadline with 408").
///
/// Both clients run on their own threads with blocking waits (`epoll`, `poll`), never on the cooperative pool, so
/// what is measured is the server, not the test's own scheduling; and the crowd's client costs little (one epoll
/// set, sends taken from a schedule in order), so it does not compete with the server for the CPU it measures.
@Suite struct SlowClientTests {
    static let slowCount = 1000
    static let headerDeadline = Duration.seconds(5)
    /// The p99 bound of the issue, measured over at least ``minimumSamples`` ordinary requests. Under
    /// ThreadSanitizer (`make test-tsan`) every memory access of the server goes through the runtime, which makes
    /// it 5 to 15 times slower: there the bound is ten times the issue's (measured at load 39: p99 295 ms, max
    /// 532 ms during the crowd; 42 ms without it). Ordinary builds keep the issue's 50 ms.
    static let p99Bound = Duration.milliseconds(Sanitizer.current == .thread ? 500 : 50)
    static let minimumSamples = 200

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
            // The same requests without the crowd: what this machine gives now, for the report.
            let alone = try await onThread("ordinary-alone") {
                try OrdinaryClient.run(port: port, after: StopFlag(set: true), until: StopFlag(), count: Self.minimumSamples)
            }.sorted()
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
            let crowdCPU: Duration
            do {
                (slow, crowdCPU) = try await onThread("slow-crowd") {
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

            // Ordinary requests were served throughout, fast: p99 under the issue's 50 ms.
            try #require(
                latencies.count >= Self.minimumSamples,
                "only \(latencies.count) ordinary requests completed while the crowd was held (\(Self.minimumSamples) needed)")
            let (p50, p99) = (Self.percentile(latencies, 50), Self.percentile(latencies, 99))
            // Where the CPU went (the server's loops and the crowd's client share the machine with everything else).
            print("CPU: server loops \(processThreadsCPUTime(named: "afm-http-")), the crowd's client \(crowdCPU)")
            print(
                "slow clients: \(Self.slowCount) answered 408 after \(times.first!)…\(times.last!); ordinary requests alone: "
                    + "\(alone.count), p50 \(Self.percentile(alone, 50)), p99 \(Self.percentile(alone, 99)), max \(alone.last!); "
                    + "during the crowd: \(latencies.count), p50 \(p50), p99 \(p99), max \(latencies.last!)")
            #expect(
                p99 < Self.p99Bound,
                "ordinary p99 \(p99) during the crowd (p50 \(p50), max \(latencies.last!), \(latencies.count) requests); without it: p99 \(Self.percentile(alone, 99))"
            )
            #expect(try await eventually { server.activeConnectionCount == 0 })
        }
    }

    /// The `p`th percentile of sorted `values` (nearest rank).
    static func percentile(_ values: [Duration], _ p: Int) -> Duration {
        values[min(values.count - 1, max(0, (values.count * p + 99) / 100 - 1))]
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
    private let value: Atomic<Bool>
    init(set: Bool = false) { value = Atomic(set) }
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

/// Sequential requests, each on a new connection, from when `start` is set until `done` is (or `count` requests
/// were made); returns each one's latency (connect to end of response).
enum OrdinaryClient {
    static func run(port: Int, after start: StopFlag, until done: StopFlag, count: Int = .max) throws -> [Duration] {
        while !start.isSet { pauseThread(milliseconds: 5) }
        let address = try #require(SocketAddress(host: "127.0.0.1", port: port))
        let clock = ContinuousClock()
        let request = Array("GET /ordinary HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".utf8)
        var latencies: [Duration] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !done.isSet && latencies.count < count {
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
            pauseThread(milliseconds: 10)
        }
        return latencies
    }
}

/// `count` connections that send a request line and `Host` at once, then one more header byte per second, never
/// finishing the header block; each is watched until the server answers and closes it. The clients are
/// independent, so their bytes are spread over each second rather than sent in one burst: connection `number` sends
/// its `k`th byte `k + 1 + number/count` seconds after the first, which is slot `k × count + number` of one schedule
/// walked in order (each pass sends what fell due, about 10 bytes every 10 ms).
enum SlowCrowd {
    static func run(port: Int, count: Int, giveUpAfter: Duration, connected: StopFlag) throws -> (outcomes: [SlowOutcome], cpu: Duration) {
        let address = try #require(SocketAddress(host: "127.0.0.1", port: port))
        let clock = ContinuousClock()
        let opening = Array("GET /slow HTTP/1.1\r\nHost: t\r\n".utf8)
        let trickle = Array(("X-Slow: " + String(repeating: "a", count: 64)).utf8)
        let epoll = try Epoll()
        var sockets: [FileDescriptor] = []
        var started: [ContinuousClock.Instant] = []
        defer { for socket in sockets { socket.close() } }
        for number in 0..<count {
            let socket = try FileDescriptor.connectTCP(to: address, nonBlocking: true)
            sockets.append(socket)
            try epoll.add(socket, events: [.readable, .readHangup, .edgeTriggered], userData: UInt64(number))
            guard case .processed(opening.count) = try opening.withUnsafeBytes({ try socket.write($0) }) else {
                throw TestClientError(description: "the request line did not fit in an empty socket buffer")
            }
            started.append(clock.now)
        }
        connected.set()
        var outcomes = [SlowOutcome](repeating: SlowOutcome(), count: count)
        var received = [[UInt8]](repeating: [], count: count)
        var pendingCount = count
        var events = EpollEventBuffer(capacity: 256)
        var chunk = [UInt8](repeating: 0, count: 4096)
        let firstByte = clock.now
        let end = firstByte + giveUpAfter
        var nextSlot = 0
        while pendingCount > 0 && clock.now < end {
            let ready = try epoll.wait(into: &events, timeoutMilliseconds: 10)
            for index in 0..<ready {
                let number = Int(events.userData(at: index))
                guard !outcomes[number].closed else { continue }
                var finished = false
                reading: while true {
                    let result: IOResult<Int>
                    do {
                        result = try chunk.withUnsafeMutableBytes { try sockets[number].read(into: $0) }
                    } catch {
                        finished = true  // A reset after the answer counts as closed.
                        break
                    }
                    switch result {
                    case .wouldBlock: break reading
                    case .processed(0):
                        finished = true
                        break reading
                    case .processed(let n): received[number] += chunk[0..<n]
                    }
                }
                if outcomes[number].answeredAfter == nil, !received[number].isEmpty {
                    outcomes[number].answeredAfter = clock.now - started[number]
                }
                if finished {
                    let text = String(decoding: received[number], as: UTF8.self)
                    outcomes[number].status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) }
                    outcomes[number].envelope = text.contains(#""code":"request_timeout""#)
                    outcomes[number].closed = true
                    pendingCount -= 1
                }
            }
            // Send what fell due; connections already answered stop sending, as a real client would.
            let elapsed = clock.now - firstByte
            while Duration.seconds(1) + .seconds(1) * (Double(nextSlot) / Double(count)) <= elapsed {
                let number = nextSlot % count
                if !outcomes[number].closed && received[number].isEmpty {
                    let byte = trickle[(nextSlot / count) % trickle.count]
                    _ = try? [byte].withUnsafeBytes { try sockets[number].write($0) }
                }
                nextSlot += 1
            }
        }
        return (outcomes, threadCPUTime())
    }
}

/// CPU time the calling thread has used.
func threadCPUTime() -> Duration {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
}

/// CPU time used so far by this process's threads whose name starts with `prefix` (from /proc/self/task).
func processThreadsCPUTime(named prefix: String) -> Duration {
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    var total = Duration.zero
    for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
        guard let name = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8), name.hasPrefix(prefix),
            let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { continue }
        // Fields after the name: state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
        total += .seconds((user + system) / ticks)
    }
    return total
}

/// Sleeps the calling (dedicated) thread.
private func pauseThread(milliseconds: Int) {
    var interval = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
    var remaining = timespec()
    while nanosleep(&interval, &remaining) != 0 { interval = remaining }
}
