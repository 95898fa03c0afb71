// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// Linux-only C functions that the `Glibc` module does not expose, resolved once with `dlsym`.
///
/// Why: Swift's Glibc module map omits `<sys/epoll.h>`, `<sys/eventfd.h>` and `<malloc.h>` and is built without `_GNU_SOURCE`
/// (so no `accept4` or `pthread_setname_np`), and the package has no C shim target for AFMSystem. Looking the
/// symbols up in the already-loaded libc and calling them through `@convention(c)` pointers uses the real C
/// calling convention, unlike `@_silgen_name`. If a C shim target is added later, these move there.
enum LinuxSymbols {
    typealias EpollCreate1 = @convention(c) (Int32) -> Int32
    typealias EpollCtl = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    typealias EpollWait = @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32
    typealias EventFD = @convention(c) (UInt32, Int32) -> Int32
    typealias Accept4 =
        @convention(c) (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32)
        -> Int32
    typealias SetThreadName = @convention(c) (pthread_t, UnsafePointer<CChar>?) -> Int32
    typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
    typealias GetAffinity = @convention(c) (pid_t, Int, UnsafeMutableRawPointer?) -> Int32
    /// `prctl` is variadic in C, which Swift does not import; called with all five arguments, as the kernel takes them.
    typealias ProcessControl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
    /// `malloc_trim` (`<malloc.h>`, which the Glibc module map leaves out).
    typealias MallocTrim = @convention(c) (Int) -> Int32

    static let epollCreate1: EpollCreate1 = resolve("epoll_create1")
    static let epollCtl: EpollCtl = resolve("epoll_ctl")
    static let epollWait: EpollWait = resolve("epoll_wait")
    static let eventfd: EventFD = resolve("eventfd")
    static let accept4: Accept4 = resolve("accept4")
    static let setThreadName: SetThreadName = resolve("pthread_setname_np")
    static let pipe2: Pipe2 = resolve("pipe2")
    static let getAffinity: GetAffinity = resolve("sched_getaffinity")
    static let processControl: ProcessControl = resolve("prctl")
    static let mallocTrim: MallocTrim = resolve("malloc_trim")

    private static func resolve<F>(_ name: String) -> F {
        // `nil` is RTLD_DEFAULT: search the global scope, where libc is always loaded.
        guard let symbol = dlsym(nil, name) else {
            fatalError("libc does not export \(name); AFMSystem needs Linux with glibc")
        }
        return unsafeBitCast(symbol, to: F.self)
    }

    // Linux ABI constants from <sys/epoll.h> and <sys/eventfd.h>; identical on x86_64 and aarch64.
    static let epollCtlAdd: Int32 = 1
    static let epollCtlDel: Int32 = 2
    static let epollCtlMod: Int32 = 3
    /// `EPOLL_CLOEXEC` and `EFD_CLOEXEC` are defined as `O_CLOEXEC`; `EFD_NONBLOCK` as `O_NONBLOCK`.
    static let epollCloexec: Int32 = O_CLOEXEC
    static let eventfdCloexec: Int32 = O_CLOEXEC
    static let eventfdNonblock: Int32 = O_NONBLOCK

    /// `struct epoll_event` is packed on x86_64 (12 bytes, data at offset 4) and naturally aligned elsewhere.
    #if arch(x86_64)
        static let epollEventSize = 12
        static let epollEventDataOffset = 4
    #else
        static let epollEventSize = 16
        static let epollEventDataOffset = 8
    #endif
}
