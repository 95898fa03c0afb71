// SPDX-License-Identifier: Apache-2.0

import AFMSystem

/// Bytes waiting to be sent on one connection: a queue of whole arrays plus an offset into the first.
///
/// Appending stores the caller's array (a reference, no copy) and sending uses `sendmsg` over several
/// arrays at once, so neither queuing nor partial writes ever copy payload bytes. Only the writer holding
/// the connection's write token removes from the front; anyone may append at the back.
struct HTTPOutputQueue {
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var headOffset = 0
    /// Unsent bytes.
    private(set) var byteCount = 0

    var isEmpty: Bool { byteCount == 0 }

    mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        chunks.append(bytes)
        byteCount += bytes.count
    }

    /// Up to `maxChunks` arrays from the front and the offset into the first, for one gather write.
    func snapshot(maxChunks: Int = 16) -> (chunks: ArraySlice<[UInt8]>, offset: Int) {
        (chunks[head..<min(chunks.count, head + maxChunks)], headOffset)
    }

    /// Drops `count` sent bytes from the front.
    mutating func consume(_ count: Int) {
        precondition(count <= byteCount, "consumed more than was queued")
        byteCount -= count
        var rest = count
        while rest > 0 {
            let available = chunks[head].count - headOffset
            if rest >= available {
                rest -= available
                head += 1
                headOffset = 0
            } else {
                headOffset += rest
                rest = 0
            }
        }
        if head == chunks.count {
            chunks.removeAll(keepingCapacity: chunks.capacity <= 64)
            head = 0
        } else if head >= 64 {
            chunks.removeFirst(head)
            head = 0
        }
    }

    /// Releases everything (the connection is gone).
    mutating func removeAll() {
        chunks = []
        head = 0
        headOffset = 0
        byteCount = 0
    }

    /// Sends a snapshot with one gather write.
    static func write(
        _ snapshot: (chunks: ArraySlice<[UInt8]>, offset: Int),
        to descriptor: FileDescriptor
    ) -> Result<IOResult<Int>, SystemCallError> {
        withRawBuffers(snapshot.chunks, firstOffset: snapshot.offset, collected: []) { buffers in
            do throws(SystemCallError) {
                if buffers.count == 1 {
                    return .success(try descriptor.write(buffers[0]))
                }
                return .success(try descriptor.writev(buffers))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Pins each array's storage (nested `withUnsafeBytes`) so all of them are valid during `body`.
    private static func withRawBuffers<R>(
        _ chunks: ArraySlice<[UInt8]>,
        firstOffset: Int,
        collected: [UnsafeRawBufferPointer],
        _ body: ([UnsafeRawBufferPointer]) -> R
    ) -> R {
        guard let first = chunks.first else { return body(collected) }
        return first.withUnsafeBytes { raw in
            var collected = collected
            collected.append(UnsafeRawBufferPointer(rebasing: raw[firstOffset...]))
            return withRawBuffers(chunks.dropFirst(), firstOffset: 0, collected: collected, body)
        }
    }
}
