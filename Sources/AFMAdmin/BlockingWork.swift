// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// Runs blocking work (socket I/O, joins) on a fresh dedicated thread and suspends the caller until it is done,
/// so the cooperative thread pool never blocks.
func onDedicatedThread<T: Sendable, E: Error>(
    _ name: String, _ body: @escaping @Sendable () throws(E) -> T
) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
        do {
            let thread = try IOThread.spawn(name: name) {
                do throws(E) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            thread.detach()
        } catch {
            // No thread could be made (resource exhaustion): run inline rather than never resuming.
            do throws(E) {
                continuation.resume(returning: .success(try body()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try result.get()
}
