// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import AFMHTTP

/// The `Host`/`Origin`/media-type rules without a daemon: listen addresses the live tests cannot bind (a wildcard, a
/// LAN address), and the parsing corners of the fields.
@Suite struct BrowserRequestPolicyTests {
    func policy(_ listen: String, hosts: [String] = [], origins: [String] = []) -> BrowserRequestPolicy {
        BrowserRequestPolicy(listenHost: listen, allowedHosts: hosts, allowedOrigins: origins)
    }

    @Test func hostPartDropsPortBracketsAndATrailingDot() {
        #expect(BrowserRequestPolicy.hostPart("localhost:11535") == "localhost")
        #expect(BrowserRequestPolicy.hostPart("[::1]:11535") == "::1")
        #expect(BrowserRequestPolicy.hostPart("[::1]") == "::1")
        #expect(BrowserRequestPolicy.hostPart("Example.COM.") == "Example.COM")
        #expect(BrowserRequestPolicy.hostPart("10.0.0.1") == "10.0.0.1")
    }

    @Test func loopbackListenerAcceptsLoopbackNamesOnly() {
        let loopback = policy("127.0.0.1")
        for host in ["localhost", "LocalHost", "app.localhost", "127.0.0.1", "127.255.0.9", "::1"] {
            #expect(loopback.accepts(host: Substring(host)), "\(host)")
        }
        for host in ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.1", "1270.0.0.1", "127.0.0", "0.0.0.0", ""] {
            #expect(!loopback.accepts(host: Substring(host)), "\(host)")
        }
    }

    @Test func aWildcardListenerAcceptsItsAddressesAsIPLiteralsButNoForeignName() {
        for listen in ["0.0.0.0", "::"] {
            let wildcard = policy(listen)
            for host in ["192.168.1.20", "10.0.0.1", "fe80::1", "2001:db8::5", "localhost"] {
                #expect(wildcard.accepts(host: Substring(host)), "\(listen): \(host)")
            }
            for host in ["evil.example", "gateway.lan", "192.168.1.20.evil.example"] {
                #expect(!wildcard.accepts(host: Substring(host)), "\(listen): \(host)")
            }
        }
    }

    @Test func aSpecificListenAddressAndConfiguredNamesAreAccepted() {
        let lan = policy("192.168.1.20", hosts: ["Gateway.LAN.", "ai.example.com:8443", "[FD00::7]"])
        for host in ["192.168.1.20", "gateway.lan", "GATEWAY.lan", "ai.example.com", "fd00::7", "localhost"] {
            #expect(lan.accepts(host: Substring(host)), "\(host)")
        }
        for host in ["192.168.1.21", "other.lan", "sub.gateway.lan"] {
            #expect(!lan.accepts(host: Substring(host)), "\(host)")
        }
        #expect(policy("127.0.0.1", hosts: ["*"]).accepts(host: "anything.example"))
        // A listener moved to another address takes its new name along.
        #expect(lan.listening(on: "192.168.1.21").accepts(host: "192.168.1.21"))
        #expect(!lan.listening(on: "192.168.1.21").accepts(host: "192.168.1.20"))
    }

    @Test func originsMustBeSameHostLoopbackOrConfigured() {
        let loopback = policy("127.0.0.1", origins: ["https://App.Example:8443/"])
        let accepted: [(String, String?)] = [
            ("http://127.0.0.1:3000", "127.0.0.1"), ("http://localhost:5173", "127.0.0.1"), ("https://[::1]:8080", "localhost"),
            ("https://app.example:8443", "127.0.0.1"), ("http://gateway.lan:8080", "gateway.lan"), ("http://Gateway.LAN", "gateway.lan"), ("http://gateway.lan", "GATEWAY.lan"),
            ("http://localhost", nil),
        ]
        for (origin, host) in accepted {
            #expect(loopback.accepts(origin: Substring(origin), host: host.map { Substring($0) }), "\(origin) → \(host ?? "-")")
        }
        let refused: [(String, String?)] = [
            ("https://evil.example", "127.0.0.1"), ("null", "127.0.0.1"), ("https://app.example", "127.0.0.1"),
            ("http://localhost:3000", "gateway.lan"), ("127.0.0.1", "127.0.0.1"), ("http://", "127.0.0.1"),
            ("https://evil.example", nil),
        ]
        for (origin, host) in refused {
            #expect(!loopback.accepts(origin: Substring(origin), host: host.map { Substring($0) }), "\(origin) → \(host ?? "-")")
        }
        #expect(policy("127.0.0.1", origins: ["*"]).accepts(origin: "null", host: "127.0.0.1"))
    }

    @Test func onlyJSONIsAMediaTypeForPOSTs() {
        for type in ["application/json", "application/json; charset=utf-8", " Application/JSON ;charset=UTF-8", "application/json;"] {
            #expect(BrowserRequestPolicy.isJSON(Substring(type)), "\(type)")
        }
        for type in ["text/plain", "application/jsonx", "application/x-www-form-urlencoded", "multipart/form-data", "", "json"] {
            #expect(!BrowserRequestPolicy.isJSON(Substring(type)), "\(type)")
        }
    }
}
