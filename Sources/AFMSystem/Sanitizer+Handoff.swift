// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

extension Sanitizer {
    /// Tells ThreadSanitizer that what this thread wrote so far is handed over through `token` to whoever calls
    /// ``receive(through:)`` with the same object next. A no-op unless the process runs under ThreadSanitizer.
    ///
    /// Why it exists: a value handed from a thread to a task through `continuation.resume` is properly
    /// synchronized, but the concurrency runtime tells ThreadSanitizer so only when the task suspended first.
    /// When the resume comes before the task reached its `await` (a quick callback), the task continues at once
    /// on an atomic the runtime does not annotate, TSan sees no edge, and it reports the task's first read of
    /// what the thread wrote as a data race (swiftlang/swift#57803; reproduced with a 20-line program on this
    /// toolchain: 5 runs of 12 report, none with these calls). Use the pair around such a handoff: `handOff`
    /// just before `resume`, `receive` just after the `await`, with one object both sides hold.
    @inline(__always)
    public static func handOff(through token: AnyObject) {
        guard let annotations = threadAnnotations else { return }
        annotations.release(UnsafeRawPointer(Unmanaged.passUnretained(token).toOpaque()))
    }

    /// The other half of ``handOff(through:)``: what the handing thread wrote before it is visible here, as far
    /// as ThreadSanitizer is concerned. A no-op unless the process runs under ThreadSanitizer.
    @inline(__always)
    public static func receive(through token: AnyObject) {
        guard let annotations = threadAnnotations else { return }
        annotations.acquire(UnsafeRawPointer(Unmanaged.passUnretained(token).toOpaque()))
    }

    /// Whether ``handOff(through:)`` and ``receive(through:)`` reach ThreadSanitizer in this process.
    public static var annotatesHandoffs: Bool { threadAnnotations != nil }

    private typealias Annotation = @Sendable @convention(c) (UnsafeRawPointer?) -> Void

    /// ThreadSanitizer's `__tsan_release`/`__tsan_acquire`, found like the runtime itself (``current``): the
    /// runtime is linked statically into the executable, which exports them (they are in the toolchain's list of
    /// the runtime's exported entry points), and no C module is needed to call them.
    private static let threadAnnotations: (release: Annotation, acquire: Annotation)? = {
        guard current == .thread, let release = dlsym(nil, "__tsan_release"), let acquire = dlsym(nil, "__tsan_acquire") else {
            return nil
        }
        return (unsafeBitCast(release, to: Annotation.self), unsafeBitCast(acquire, to: Annotation.self))
    }()
}
