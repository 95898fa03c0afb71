// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// The handles of libafm-bridge.so: what an `afm_bridge *` really is, a number looked up here on every call.
///
/// A handle is never a pointer to memory: ids count up from 1 and are never reused in a process, so a handle that
/// was closed (twice, or used after its close) or was never one (garbage, a pointer to something else) is simply
/// not found, and the call answers `AFM_BRIDGE_ERR_CLOSED` instead of reading freed memory. A call that found its
/// handle holds a strong reference to it, so a close racing a send never frees what the send uses.
///
/// It also keeps closes from deadlocking. `afm_bridge_close` waits for the handle's delivery thread; a callback (on
/// another handle's delivery thread) may call it. If the handle being closed is, through closes in progress, itself
/// waiting for the caller's delivery thread — A's callback closes B while B's callback closes A — both would wait
/// for ever. Every close made on a delivery thread records "this thread waits for that handle" here, and a close
/// that would close such a cycle is refused with `AFM_BRIDGE_ERR_WRONG_THREAD` (the handle stays open). The check
/// and the record are one critical section, so of two closes racing into a cycle exactly one is refused.
final class BridgeRegistry: Sendable {
    /// The registry of the library (one per process).
    static let shared = BridgeRegistry()

    /// Why a call found no handle to work on.
    enum Refusal: Error {
        /// Closed, being closed, or never a handle.
        case closed
        /// The close would wait for the thread that asks for it: this handle's own callback, or a cycle of closes.
        case wouldWaitForItself
    }

    private struct Entry {
        let handle: BridgeHandle
        /// Set when a close began: the handle takes no more messages and cannot be closed again.
        var closing = false
    }

    private struct State {
        var lastID: UInt = 0
        var entries: [UInt: Entry] = [:]
        /// `waits[a] == b`: handle `a`'s delivery thread is inside `afm_bridge_close(b)`.
        var waits: [UInt: UInt] = [:]
    }

    private let state = Mutex(State())

    /// Adds an open handle; returns its id (never 0, never reused).
    func register(_ handle: BridgeHandle) -> UInt {
        state.withLock { state in
            state.lastID += 1
            state.entries[state.lastID] = Entry(handle: handle)
            return state.lastID
        }
    }

    /// The open handle `id` names; nil when it is closed, closing or unknown.
    func handle(_ id: UInt) -> BridgeHandle? {
        state.withLock { state in
            guard let entry = state.entries[id], !entry.closing else { return nil }
            return entry.handle
        }
    }

    /// Starts closing `id`: marks it closing and, when the calling thread is a handle's delivery thread, records that
    /// it waits for `id`. Returns the handle and that caller's id, for ``endClose(_:caller:)``.
    func beginClose(_ id: UInt) -> Result<(handle: BridgeHandle, caller: UInt?), Refusal> {
        state.withLock { state in
            guard let entry = state.entries[id], !entry.closing else { return .failure(.closed) }
            // Closing handles count too: their delivery threads still deliver, and their callbacks may close others.
            let caller = state.entries.first { $0.value.handle.outbox.isDeliveryThread }?.key
            if let caller {
                // Follow what `id`'s delivery thread waits for, and what that one waits for, …: reaching the caller
                // means `id`'s close would wait for the thread that is asking for it.
                var current: UInt? = id
                for _ in 0...state.waits.count {
                    guard let node = current else { break }
                    if node == caller { return .failure(.wouldWaitForItself) }
                    current = state.waits[node]
                }
                state.waits[caller] = id
            }
            state.entries[id]?.closing = true
            return .success((entry.handle, caller))
        }
    }

    /// Forgets `id` once its close is done (the id stays unusable: ids are never reused).
    func endClose(_ id: UInt, caller: UInt?) {
        state.withLock { state in
            state.entries[id] = nil
            if let caller { state.waits[caller] = nil }
        }
    }
}
