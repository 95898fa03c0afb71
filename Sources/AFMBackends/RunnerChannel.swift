// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation
import Synchronization

/// One end of the runner protocol's socketpair: frame writes from any thread, frame reads on one thread.
///
/// Writes take a lock so a frame's bytes are never interleaved with another thread's frame (an `NSLock`, not a
/// `Mutex<State>`: it serializes I/O, and holds no state). Once the channel is closed, writes are dropped: a
/// cancel or credit for a runner that just died must not raise anything.
final class RunnerChannel: Sendable {
    private let descriptor: FileDescriptor
    private let writeLock = NSLock()
    /// Set once, while `writeLock` is held, so no write can follow `close` onto a reused descriptor number.
    private let closed = Atomic<Bool>(false)

    init(descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    /// Sends one frame. Returns false when the channel is closed or the write failed (the peer is gone, or a
    /// send timeout expired).
    @discardableResult
    func send(_ frame: RunnerFrame) -> Bool {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        frame.encode(into: &bytes)
        writeLock.lock()
        defer { writeLock.unlock() }
        guard !closed.load(ordering: .relaxed) else { return false }
        do {
            try descriptor.writeAll(bytes)
            return true
        } catch {
            return false
        }
    }

    /// Sends bytes that are already encoded frames (the runner's outbox). Returns false when the channel is
    /// closed or the write failed.
    func sendRaw(_ bytes: [UInt8]) -> Bool {
        writeLock.lock()
        defer { writeLock.unlock() }
        guard !closed.load(ordering: .relaxed) else { return false }
        do {
            try descriptor.writeAll(bytes)
            return true
        } catch {
            return false
        }
    }

    /// Reads frames until end of file, a read error or a malformed frame, calling `handle` for each on the
    /// calling thread (a dedicated reader thread). Returns why it stopped.
    func readFrames(_ handle: (RunnerFrame) -> Void) -> String {
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        var start = 0
        var end = 0
        while true {
            // Decode every complete frame in the buffer.
            while end - start >= 4 {
                let length = buffer.withUnsafeBytes { raw -> Int in
                    Int(raw.loadUnaligned(fromByteOffset: start, as: UInt32.self).littleEndian)
                }
                guard length >= 1, length <= RunnerFrame.maximumLength else { return "frame length \(length) out of range" }
                guard end - start - 4 >= length else {
                    if 4 + length > buffer.count { buffer += [UInt8](repeating: 0, count: 4 + length - buffer.count) }
                    break
                }
                let decoded = buffer.withUnsafeBytes { raw -> Result<RunnerFrame, RunnerFrame.DecodeError> in
                    do throws(RunnerFrame.DecodeError) {
                        return .success(try RunnerFrame.decode(UnsafeRawBufferPointer(rebasing: raw[(start + 4)..<(start + 4 + length)])))
                    } catch {
                        return .failure(error)
                    }
                }
                switch decoded {
                case .success(let frame): handle(frame)
                case .failure(let error): return "malformed frame: \(error.message)"
                }
                start += 4 + length
            }
            if start == end {
                start = 0
                end = 0
            } else if start > 0 && buffer.count - end < 4096 {
                buffer.withUnsafeMutableBytes { raw in
                    raw.baseAddress!.copyMemory(from: raw.baseAddress! + start, byteCount: end - start)  // Safety: non-empty buffer.
                }
                end -= start
                start = 0
            }
            let result: Result<IOResult<Int>, SystemCallError> = buffer.withUnsafeMutableBytes { raw in
                do throws(SystemCallError) {
                    return .success(try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[end...])))
                } catch {
                    return .failure(error)
                }
            }
            switch result {
            case .success(.processed(0)): return "end of file"
            case .success(.processed(let count)): end += count
            case .success(.wouldBlock): return "unexpected EAGAIN"
            case .failure(let error): return error.description
            }
        }
    }

    /// Wakes a reader blocked in `readFrames` (it then sees end of file) without closing the descriptor.
    func shutdown() {
        writeLock.lock()
        defer { writeLock.unlock() }
        guard !closed.load(ordering: .relaxed) else { return }
        descriptor.shutdown(.both)
    }

    /// Closes the descriptor once; later sends are dropped. Call it after the reader thread returned.
    func close() {
        writeLock.lock()
        defer { writeLock.unlock() }
        guard !closed.load(ordering: .relaxed) else { return }
        closed.store(true, ordering: .relaxed)
        descriptor.close()
    }
}
