// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// Runs async work from `afm`'s synchronous main thread and waits for it there.
///
/// The main thread is not one of the cooperative pool's threads, so blocking it on a semaphore while the work
/// runs on the pool is safe; this is only ever called from the main thread.
enum BlockingTask {
    static func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let value = await body()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        // The semaphore is signalled only after the value is stored.
        return result.withLock { $0 }!
    }
}
