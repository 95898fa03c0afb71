// SPDX-License-Identifier: Apache-2.0

/// A growable stack over manually managed memory, used by the parser to collect the elements of every
/// open array and object in one place.
///
/// Closing a container *moves* its elements into an exactly sized `Array` (one allocation, no
/// reference-count traffic: elements are moved, not copied), instead of growing a fresh array per container through 1, 2, 4, …
/// capacities. The owner must call ``release()`` exactly once.
struct UnsafeStack<Element> {
    private(set) var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        base = .allocate(capacity: self.capacity)
    }

    @inline(__always)
    mutating func push(_ element: consuming Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    /// Moves the elements from `start` to the top into a new array and pops them.
    mutating func popArray(from start: Int) -> [Element] {
        let n = count - start
        guard n > 0 else { return [] }
        // `reserveCapacity` + `append` specialize for the element type; `init(unsafeUninitializedCapacity:)`
        // calls an unspecialized runtime path that looks up generic metadata on every call.
        var array: [Element] = []
        array.reserveCapacity(n)
        for k in start..<count {
            array.append((base + k).move())
        }
        count = start
        return array
    }

    /// Destroys any remaining elements and frees the memory.
    func release() {
        base.deinitialize(count: count)
        base.deallocate()
    }

    private mutating func grow() {
        let newCapacity = capacity * 2
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        newBase.moveInitialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
