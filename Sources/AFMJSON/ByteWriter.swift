// SPDX-License-Identifier: Apache-2.0

/// A growable output buffer over raw memory for the encoder.
///
/// Appending to `[UInt8]` one byte at a time costs a uniqueness check and a capacity check per call;
/// here a write is a bounds check and a store, and the result is copied into the caller's array once.
struct ByteWriter: ~Copyable {
    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    deinit {
        base.deallocate()
    }

    /// Makes room for at least `extra` more bytes.
    @inline(__always)
    mutating func reserve(_ extra: Int) {
        if count &+ extra > capacity { grow(to: count + extra) }
    }

    @inline(__always)
    mutating func write(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count &+= 1
    }

    /// Writes a byte after ``reserve(_:)`` made room for it.
    @inline(__always)
    mutating func writeReserved(_ byte: UInt8) {
        base[count] = byte
        count &+= 1
    }

    @inline(__always)
    mutating func write(_ bytes: UnsafePointer<UInt8>, count n: Int) {
        reserve(n)
        (base + count).update(from: bytes, count: n)
        count &+= n
    }

    mutating func write(_ string: StaticString) {
        write(string.utf8Start, count: string.utf8CodeUnitCount)
    }

    /// Writes the UTF-8 bytes of `string` unchanged.
    mutating func write(utf8 string: String) {
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { utf8 in
            if let p = utf8.baseAddress { write(p, count: utf8.count) }
        }
        if done == nil {
            for byte in string.utf8 { write(byte) }
        }
    }

    /// Appends everything written so far to `buffer`.
    func append(to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: base, count: count))
    }

    /// Everything written so far, as a new array.
    func makeArray() -> [UInt8] {
        Array(UnsafeBufferPointer(start: base, count: count))
    }

    private mutating func grow(to minimum: Int) {
        let newCapacity = max(minimum, capacity * 2)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
