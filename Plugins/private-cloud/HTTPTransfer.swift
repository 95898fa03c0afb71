// SPDX-License-Identifier: Apache-2.0
import CPrivateCloudSupport
import Synchronization

/// One HTTP request to an upstream over libcurl, run on the calling (backend-owned) thread, with the response
/// body streamed to a handler as it arrives.
///
/// ```
/// run ─► easy handle (URL, headers, body, timeouts) ─► multi handle ─► loop { perform; poll ≤ 1 s }
///          write callback ─► handler(status, bytes) ─► false aborts the transfer
/// cancel (any thread) ─► flag + curl_multi_wakeup ─► the loop returns .cancelled and closes the connection
/// ```
///
/// libcurl is used through its multi interface so that `cancel()` wakes a transfer that is waiting for bytes at
/// once (`curl_multi_wakeup`), instead of waiting for the next progress callback. The handler may block (the
/// host's `emit` applies backpressure); libcurl then simply stops reading, and TCP slows the upstream down.
///
/// Safety: `@unchecked Sendable` because it holds the multi handle's raw pointer. The pointer is only set, read
/// and cleared under `multi`'s lock, and `curl_multi_wakeup` is documented as callable from any thread; every
/// other libcurl call happens on the thread that runs `run`.
final class HTTPTransfer: @unchecked Sendable {
    /// What to send.
    struct Request: Sendable {
        var url: String
        /// Header lines (`Name: value`).
        var headers: [String]
        /// The POST body; nil sends a GET.
        var body: [UInt8]?
        var connectTimeoutMilliseconds: Int
        /// Abort when no byte arrives for this long (0: never).
        var idleTimeoutSeconds: Int
        /// Abort after this long in total (0: never).
        var totalTimeoutMilliseconds: Int = 0
    }

    /// How a transfer ended.
    enum Outcome: Sendable, Equatable {
        /// The response was read completely.
        case completed(status: Int)
        /// The connection failed, timed out or was cut; `status` is 0 when no status line arrived.
        case failed(message: String, timedOut: Bool, status: Int)
        /// `cancel()` stopped it.
        case cancelled
        /// The handler returned false.
        case stopped(status: Int)
    }

    /// libcurl's process-wide initialisation, done once (thread-safe lazy global).
    private static let globalInit: Int32 = afm_pc_curl_global_init()

    private let multi = Mutex<MultiHandle?>(nil)

    /// The multi handle, to wake it from another thread.
    ///
    /// Safety: `@unchecked Sendable` because it wraps a raw pointer; it is only used under `multi`'s lock, for
    /// `curl_multi_wakeup` (thread-safe by libcurl's contract), while `run` keeps the handle alive.
    private struct MultiHandle: @unchecked Sendable {
        var pointer: UnsafeMutableRawPointer
    }
    private let cancelled = Atomic<Bool>(false)

    init() {}

    /// True once `cancel()` was called.
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Stops the transfer (now or, if it has not started, as soon as it does) and closes its connection.
    /// Non-blocking, idempotent, callable from any thread.
    func cancel() {
        cancelled.store(true, ordering: .releasing)
        multi.withLock { handle in
            if let handle { _ = curl_multi_wakeup(handle.pointer) }
        }
    }

    /// Runs the request to its end on the calling thread.
    ///
    /// - Parameter handler: Receives the HTTP status and each piece of the body; returns false to stop.
    func run(_ request: Request, handler: @escaping (Int, UnsafeRawBufferPointer) -> Bool) -> Outcome {
        guard Self.globalInit == 0 else {
            return .failed(message: "libcurl could not be initialised", timedOut: false, status: 0)
        }
        guard let easy = curl_easy_init() else {
            return .failed(message: "libcurl could not create a handle", timedOut: false, status: 0)
        }
        let receiver = Receiver(easy: easy, handler: handler)
        var headerList: UnsafeMutablePointer<curl_slist>?
        for line in request.headers { headerList = curl_slist_append(headerList, line) }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let context = Unmanaged.passUnretained(receiver).toOpaque()
        // COPYPOSTFIELDS copies exactly POSTFIELDSIZE bytes; the array is never empty, so its pointer is valid.
        let body: [CChar] = (request.body ?? []).map { CChar(bitPattern: $0) } + [0]
        let prepared: Int32 = errorBuffer.withUnsafeMutableBufferPointer { errors in
            body.withUnsafeBufferPointer { bytes in
                afm_pc_curl_prepare(
                    easy, request.url, headerList, request.body == nil ? nil : bytes.baseAddress,
                    request.body == nil ? -1 : body.count - 1, request.connectTimeoutMilliseconds,
                    request.idleTimeoutSeconds, request.totalTimeoutMilliseconds, Self.write, context,
                    errors.baseAddress)
            }
        }
        guard prepared == 0, let handle = curl_multi_init() else {
            curl_easy_cleanup(easy)
            curl_slist_free_all(headerList)
            return .failed(message: Self.message(code: prepared, buffer: errorBuffer), timedOut: false, status: 0)
        }
        curl_multi_add_handle(handle, easy)
        let wakeable = MultiHandle(pointer: handle)
        multi.withLock { $0 = wakeable }
        defer {
            multi.withLock { $0 = nil }
            curl_multi_remove_handle(handle, easy)
            curl_easy_cleanup(easy)
            curl_multi_cleanup(handle)  // closes the connection: a cancelled upstream request ends here
            curl_slist_free_all(headerList)
            withExtendedLifetime(receiver) {}
        }
        var running: Int32 = 1
        while true {
            if isCancelled { return .cancelled }
            let code = curl_multi_perform(handle, &running)
            guard code == CURLM_OK else {
                return .failed(
                    message: String(cString: curl_multi_strerror(code)), timedOut: false,
                    status: afm_pc_curl_response_code(easy))
            }
            if receiver.stopped { return .stopped(status: afm_pc_curl_response_code(easy)) }
            if running == 0 { break }
            _ = curl_multi_poll(handle, nil, 0, 1000, nil)
        }
        if isCancelled { return .cancelled }
        var remaining: Int32 = 0
        var result = CURLE_OK
        while let message = curl_multi_info_read(handle, &remaining) {
            if message.pointee.msg == CURLMSG_DONE { result = message.pointee.data.result }
        }
        let status = afm_pc_curl_response_code(easy)
        if receiver.stopped { return .stopped(status: status) }
        guard result == CURLE_OK else {
            return .failed(
                message: Self.message(code: Int32(result.rawValue), buffer: errorBuffer),
                timedOut: result == CURLE_OPERATION_TIMEDOUT, status: status)
        }
        return .completed(status: status)
    }

    /// libcurl's message for a failed transfer: its error buffer, else the code's description.
    private static func message(code: Int32, buffer: [CChar]) -> String {
        let detail = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }  // NUL-terminated above
        if !detail.isEmpty { return detail }
        return String(cString: curl_easy_strerror(CURLcode(rawValue: UInt32(bitPattern: code))))
    }

    /// The write callback: hands each piece of the body to the receiver's handler.
    private static let write: afm_pc_data_fn = { data, size, count, context in
        guard let context else { return 0 }
        let receiver = Unmanaged<Receiver>.fromOpaque(context).takeUnretainedValue()
        let total = size * count
        let bytes = UnsafeRawBufferPointer(start: data, count: total)
        return receiver.receive(bytes) ? total : 0
    }

    /// The write callback's context: the handler and whether it asked to stop.
    private final class Receiver {
        let easy: UnsafeMutableRawPointer
        let handler: (Int, UnsafeRawBufferPointer) -> Bool
        var stopped = false

        init(easy: UnsafeMutableRawPointer, handler: @escaping (Int, UnsafeRawBufferPointer) -> Bool) {
            self.easy = easy
            self.handler = handler
        }

        func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
            if handler(afm_pc_curl_response_code(easy), bytes) { return true }
            stopped = true
            return false
        }
    }
}
