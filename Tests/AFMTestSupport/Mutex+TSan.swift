// SPDX-License-Identifier: Apache-2.0
#if AFM_TSAN_LOCKS
import AFMLocks

/// In ThreadSanitizer builds only (`make test-tsan`): `Mutex` in this module is the pthread-backed lock TSan can see
/// (see `VisibleMutex`); everywhere else it is `Synchronization.Mutex`.
typealias Mutex<Value: ~Copyable> = VisibleMutex<Value>
#endif
