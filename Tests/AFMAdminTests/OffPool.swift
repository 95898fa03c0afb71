// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Runs blocking test code (raw socket reads, child processes) on its own thread, so the cooperative pool
/// stays free for the server's handler tasks (this machine may have only two pool threads).
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
