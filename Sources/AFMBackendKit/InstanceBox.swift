// SPDX-License-Identifier: Apache-2.0

/// What an `afm_instance *` points at: the backend's instance, and the same instance as a token counter when its
/// type counts tokens (looked up once, at `create`, not on every call).
///
/// `create` retains it (`Unmanaged.passRetained`); `destroy` calls the backend's `destroy()` and releases it.
final class InstanceBox: Sendable {
    let backend: any AFMBackend
    let tokenCounter: (any TokenCountingBackend)?

    init(_ backend: any AFMBackend) {
        self.backend = backend
        tokenCounter = backend as? any TokenCountingBackend
    }
}
