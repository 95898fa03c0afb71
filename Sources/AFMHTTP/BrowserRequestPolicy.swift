// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Which `Host`s and `Origin`s a loopback server answers (afmd, and the web chat of `afm chat --web`), and the media
/// type of its POSTs: the defences of a loopback API against the web pages its user's browser opens.
///
/// - **DNS rebinding.** A page re-resolves the attacker's own name to 127.0.0.1 and then reads afmd "same-origin"
///   (`/status`, answers); its requests carry the attacker's name in `Host`. Accepted `Host`s: loopback names
///   (`localhost`, `*.localhost`, `127.0.0.0/8`, `::1`), the listen address, any IP literal while listening on a
///   wildcard address (rebinding needs a name; an IP literal names the machine itself), and `[Server] AllowedHosts`
///   (`*`: any). The port is not compared. No `Host` at all is fine on HTTP/1.0 (HTTP/1.1 requires one: the parser).
///   An absolute-form target (`GET http://name/status`) names its host itself and `Host` is ignored (RFC 9112
///   §3.2.2), so the target's authority is what is checked (one with userinfo, `user@name`, is refused).
/// - **Cross-site requests (CSRF).** A page posts to afmd from its own origin, which its browser sends in `Origin`.
///   Accepted: no `Origin` (not a browser, or a same-origin GET), an origin on the same host as `Host` (any port), a
///   loopback page calling a loopback name, and `[Server] AllowedOrigins` (exact origins such as
///   `https://app.example:8443`; `*`: any). Accepted origins get CORS answers (see ``APIHandler``).
/// - **Media type.** A POST must be `application/json` (parameters such as `charset=utf-8` allowed): the types a page
///   may post without a CORS preflight (`text/plain`, forms, none) are refused, so even a browser that sends no
///   `Origin` cannot post.
///
/// `Origin` and `Content-Type` may appear once: with two, a check and a later reader could each take another one,
/// so the request is refused (400 `duplicate_header`, `param` names the field).
///
/// Refusals (``Refusal``) become OpenAI error envelopes: 403 `forbidden_host` / `forbidden_origin`, 415
/// `unsupported_media_type`, 400 `duplicate_header`; each server words their message (afmd names its settings).
/// Checks compare bytes in place: an accepted request costs no allocation.
public struct BrowserRequestPolicy: Sendable, Equatable {
    /// Why a request is refused.
    public enum Refusal: Error, Sendable, Equatable {
        /// `Host` (or an absolute target) names no address of this server: DNS rebinding.
        case forbiddenHost
        /// `Origin` names another site: a cross-site request.
        case forbiddenOrigin
        /// A field that must appear once appears more often (`Origin`, `Content-Type`).
        case duplicateHeader(String)
        /// A POST (PUT, DELETE) body not declared as JSON.
        case unsupportedMediaType

        /// The error code clients see.
        public var code: String {
            switch self {
            case .forbiddenHost: "forbidden_host"
            case .forbiddenOrigin: "forbidden_origin"
            case .duplicateHeader: "duplicate_header"
            case .unsupportedMediaType: "unsupported_media_type"
            }
        }

        /// The HTTP status.
        public var status: Int {
            switch self {
            case .forbiddenHost, .forbiddenOrigin: 403
            case .duplicateHeader: 400
            case .unsupportedMediaType: 415
            }
        }

        /// The field at fault (`duplicate_header`), else nil.
        public var param: String? {
            if case .duplicateHeader(let field) = self { return field }
            return nil
        }

        /// A message that names no server setting.
        public var message: String {
            switch self {
            case .forbiddenHost: "The Host header names no address of this server (a protection against DNS rebinding)."
            case .forbiddenOrigin: "Requests from the web origin in the Origin header are not allowed (a protection against cross-site requests)."
            case .duplicateHeader(let field): "The \(field) header field appears more than once; send it once."
            case .unsupportedMediaType: "A POST body must be sent with Content-Type: application/json."
            }
        }

        /// The JSON error envelope (``HTTPErrorBody``) with ``message``.
        public var body: [UInt8] {
            HTTPErrorBody.json(message: message, type: "invalid_request_error", code: code, param: param)
        }
    }

    /// The listen host, lower-cased, without brackets.
    private var listenHost: String
    private var listenIsWildcard: Bool
    /// `[Server] AllowedHosts`, lower-cased, without port, brackets and a trailing dot.
    private var allowedHosts: [String]
    private var anyHost: Bool
    /// `[Server] AllowedOrigins`, lower-cased, without a trailing slash.
    private var allowedOrigins: [String]
    private var anyOrigin: Bool

    /// - Parameters:
    ///   - listenHost: the address listened on.
    ///   - allowedHosts: further names accepted in `Host` (`*`: any).
    ///   - allowedOrigins: further origins accepted in `Origin` (`*`: any).
    public init(listenHost: String, allowedHosts: [String] = [], allowedOrigins: [String] = []) {
        self.listenHost = listenHost.lowercased()
        listenIsWildcard = Self.isWildcard(self.listenHost)
        anyHost = allowedHosts.contains("*")
        // A name written with a port or brackets (`gateway.lan:8080`, `[fd00::1]`) means its host: ports are not compared.
        self.allowedHosts = allowedHosts.filter { $0 != "*" }.map { String(Self.hostPart(Substring($0.lowercased()))) }
        anyOrigin = allowedOrigins.contains("*")
        self.allowedOrigins = allowedOrigins.filter { $0 != "*" }.map { origin in
            let lower = origin.lowercased()
            return lower.hasSuffix("/") ? String(lower.dropLast()) : lower
        }
    }

    /// The same policy for a listener moved to `host`.
    public func listening(on host: String) -> Self {
        var copy = self
        copy.listenHost = host.lowercased()
        copy.listenIsWildcard = Self.isWildcard(copy.listenHost)
        return copy
    }

    // MARK: - Checks

    /// Why `request` must be refused before routing (its target's or `Host`'s name, its `Origin`, a repeated
    /// `Origin` or `Content-Type`), or nil.
    public func refusal(for request: HTTPRequest) -> Refusal? {
        // One pass over the fields for all three names (a handful of fields; compared by length first).
        var hostField: String?
        var origin: String?
        var origins = 0
        var contentTypes = 0
        for field in request.headers {
            let name = Substring(field.name)
            switch name.utf8.count {
            case 4 where hostField == nil && Self.equalsIgnoringCase(name, "host"): hostField = field.value
            case 6 where Self.equalsIgnoringCase(name, "origin"):
                origins += 1
                if origin == nil { origin = field.value }
            case 12 where Self.equalsIgnoringCase(name, "content-type"): contentTypes += 1
            default: break
            }
        }
        if origins > 1 { return .duplicateHeader("Origin") }
        if contentTypes > 1 { return .duplicateHeader("Content-Type") }
        let host = Self.targetHost(request.target) ?? hostField.map { Self.hostPart(Substring($0)) }
        if let host, !accepts(host: host) { return .forbiddenHost }
        if let origin, !accepts(origin: Substring(origin), host: host) { return .forbiddenOrigin }
        return nil
    }

    /// Why the body of POST `request` must be refused (it is not declared as JSON), or nil.
    public static func mediaTypeRefusal(for request: HTTPRequest) -> Refusal? {
        if let type = request.headers["Content-Type"], isJSON(Substring(type)) { return nil }
        return .unsupportedMediaType
    }

    func accepts(host: Substring) -> Bool {
        if anyHost || Self.isLoopbackName(host) { return true }
        if listenIsWildcard ? Self.isIPLiteral(host) : Self.equalsIgnoringCase(host, listenHost) { return true }
        return allowedHosts.contains { Self.equalsIgnoringCase(host, $0) }
    }

    /// `origin` is the `Origin` field; `host` the request's `Host` name (nil on HTTP/1.0 without one).
    func accepts(origin: Substring, host: Substring?) -> Bool {
        if anyOrigin || allowedOrigins.contains(where: { Self.equalsIgnoringCase(origin, $0) }) { return true }
        // `null` (sandboxed frames, file: pages) and anything without a scheme name no site.
        guard let authority = Self.authority(ofOrigin: origin) else { return false }
        let originHost = Self.hostPart(authority)
        let requestHost = host ?? Substring(listenHost)
        if Self.sameIgnoringCase(originHost, requestHost) { return true }
        return Self.isLoopbackName(originHost) && Self.isLoopbackName(requestHost)
    }

    // MARK: - Names

    /// The host named by a request target that is not in origin form (`/path`) or asterisk form (`*`): the host of
    /// `http://authority/path` (or of a bare `authority`), without port and brackets; an authority with userinfo
    /// (`user@host`), which no client may send (RFC 9110 §4.2.4) and parsers split differently, gives "" (refused).
    static func targetHost(_ target: String) -> Substring? {
        let whole = Substring(target)
        guard let first = whole.utf8.first, first != UInt8(ascii: "/"), first != UInt8(ascii: "*") else { return nil }
        var authority = authority(ofOrigin: whole) ?? whole
        if let end = authority.utf8.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            authority = authority[..<end]
        }
        if authority.utf8.contains(UInt8(ascii: "@")) { return authority[authority.startIndex..<authority.startIndex] }
        return hostPart(authority)
    }

    /// What follows `scheme://` in an origin, or nil (`null`, garbage).
    private static func authority(ofOrigin origin: Substring) -> Substring? {
        let bytes = origin.utf8
        var index = bytes.startIndex
        while index != bytes.endIndex, bytes[index] != UInt8(ascii: ":") { index = bytes.index(after: index) }
        guard index != bytes.startIndex, index != bytes.endIndex else { return nil }
        let slashes = bytes[bytes.index(after: index)...]
        guard slashes.starts(with: "//".utf8) else { return nil }
        let start = bytes.index(index, offsetBy: 3)
        return start < bytes.endIndex ? origin[start...] : nil
    }

    /// The host of an authority (`name:port`, `[v6]:port`, `1.2.3.4`), without brackets, port and a trailing dot.
    static func hostPart(_ authority: Substring) -> Substring {
        var host = authority
        let bytes = authority.utf8
        if bytes.first == UInt8(ascii: "[") {
            if let close = bytes.firstIndex(of: UInt8(ascii: "]")) {
                host = authority[bytes.index(after: bytes.startIndex)..<close]
            }
        } else if let end = bytes.firstIndex(where: { $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "/") }) {
            host = authority[..<end]
        }
        if host.utf8.last == UInt8(ascii: ".") { host = host.dropLast() }
        return host
    }

    /// Whether `host` names loopback: `localhost` and `*.localhost`, `::1`, and 127.0.0.0/8. afmd also uses it to
    /// decide whether a listen address needs API keys.
    public static func isLoopbackName(_ host: Substring) -> Bool {
        if equalsIgnoringCase(host, "localhost") || host == "::1" { return true }
        if hasSuffixIgnoringCase(host, ".localhost") { return true }  // RFC 6761: always loopback, never DNS
        return ipv4FirstOctet(host) == 127
    }

    static func isIPLiteral(_ host: Substring) -> Bool {
        if ipv4FirstOctet(host) != nil { return true }
        let bytes = host.utf8
        return bytes.contains(UInt8(ascii: ":"))
            && bytes.allSatisfy { byte in
                let lower = lowercase(byte)
                return (lower >= UInt8(ascii: "0") && lower <= UInt8(ascii: "9"))
                    || (lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "f"))
                    || lower == UInt8(ascii: ":") || lower == UInt8(ascii: ".")
            }
    }

    private static func isWildcard(_ host: String) -> Bool {
        host == "0.0.0.0" || host == "::" || host == "0:0:0:0:0:0:0:0"
    }

    /// The first octet of a dotted-quad IPv4 literal (four decimal parts of 0…255), or nil.
    private static func ipv4FirstOctet(_ host: Substring) -> Int? {
        var dots = 0
        var value = 0
        var digits = 0
        var first = 0
        for byte in host.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0 else { return nil }
                if dots == 0 { first = value }
                dots += 1
                value = 0
                digits = 0
            } else if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                guard digits <= 3, value <= 255 else { return nil }
            } else {
                return nil
            }
        }
        return dots == 3 && digits > 0 ? first : nil
    }

    // MARK: - Media type

    /// Whether a `Content-Type` value is `application/json`, parameters ignored.
    static func isJSON(_ value: Substring) -> Bool {
        withBytes(value) { bytes in
            var end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex
            var start = bytes.startIndex
            while end > start, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\t") { end -= 1 }
            while start < end, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
            return withBytes("application/json") { equalBytesIgnoringCase(UnsafeBufferPointer(rebasing: bytes[start..<end]), $0) }
        }
    }

    // MARK: - ASCII

    // These run on every request (each field name, `Host`, `Origin`, `Content-Type`): they compare the UTF-8 bytes in
    // place. Iterating the strings' UTF-8 views with `zip` cost thousands of instructions per request
    // (docs/PERFORMANCE.md, session 9).

    /// ASCII case-insensitive equality; `lowered` is already lower-case.
    static func equalsIgnoringCase(_ text: Substring, _ lowered: some StringProtocol) -> Bool {
        guard text.utf8.count == lowered.utf8.count else { return false }
        return withBytes(text) { left in withBytes(lowered) { equalBytesIgnoringCase(left, $0) } }
    }

    /// ASCII case-insensitive equality of two texts in any case.
    static func sameIgnoringCase(_ left: Substring, _ right: Substring) -> Bool {
        guard left.utf8.count == right.utf8.count else { return false }
        return withBytes(left) { left in
            withBytes(right) { right in
                for index in 0..<left.count where lowercase(left[index]) != lowercase(right[index]) { return false }
                return true
            }
        }
    }

    private static func hasSuffixIgnoringCase(_ text: Substring, _ lowered: String) -> Bool {
        let count = lowered.utf8.count
        guard text.utf8.count > count else { return false }
        return withBytes(text) { text in
            withBytes(lowered) { equalBytesIgnoringCase(UnsafeBufferPointer(rebasing: text[(text.count - count)...]), $0) }
        }
    }

    /// Whether `left` equals `lowered` (lower-case) ignoring ASCII case; same lengths are not assumed.
    private static func equalBytesIgnoringCase(_ left: UnsafeBufferPointer<UInt8>, _ lowered: UnsafeBufferPointer<UInt8>) -> Bool {
        guard left.count == lowered.count else { return false }
        for index in 0..<left.count where lowercase(left[index]) != lowered[index] { return false }
        return true
    }

    /// Runs `body` on the UTF-8 bytes of `text`: in place for a native string (every string here), else on a copy.
    private static func withBytes<Text: StringProtocol, Result>(
        _ text: Text, _ body: (UnsafeBufferPointer<UInt8>) -> Result
    ) -> Result {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = String(text)
        return copy.withUTF8(body)
    }

    private static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}

extension BrowserRequestPolicy {
    /// The policy in force: read by the handler for every request, replaced by the server on a reload or a rebind.
    public final class Shared: Sendable {
        private let policy: Mutex<BrowserRequestPolicy>

        public init(_ policy: BrowserRequestPolicy) { self.policy = Mutex(policy) }

        /// ``BrowserRequestPolicy/refusal(for:)`` of the policy in force.
        public func refusal(for request: HTTPRequest) -> Refusal? { policy.withLock { $0.refusal(for: request) } }

        /// Replaces the policy in force.
        public func set(_ value: BrowserRequestPolicy) { policy.withLock { $0 = value } }
    }
}
