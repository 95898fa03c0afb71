// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMJSON
import Testing

@Suite struct VarlinkFramerTests {
    @Test func splitsAtNulAcrossChunks() {
        var framer = VarlinkFramer(limit: 100)
        framer.append(Array(#"{"a":1}"#.utf8) + [0] + Array(#"{"b""#.utf8))
        #expect(framer.next() == .message(Array(#"{"a":1}"#.utf8)))
        #expect(framer.next() == nil)
        framer.append(Array(":2}".utf8) + [0])
        #expect(framer.next() == .message(Array(#"{"b":2}"#.utf8)))
        #expect(framer.next() == nil)
        #expect(framer.pendingByteCount == 0)
    }

    @Test func refusesFramesOverTheLimit() {
        var framer = VarlinkFramer(limit: 10)
        framer.append([UInt8](repeating: 0x20, count: 11))
        #expect(framer.next() == .tooLarge)
        var exact = VarlinkFramer(limit: 10)
        exact.append([UInt8](repeating: 0x20, count: 10) + [0])
        #expect(exact.next() == .message([UInt8](repeating: 0x20, count: 10)))
    }

    @Test func encodeAppendsNul() {
        #expect(VarlinkFramer.encode(["method": "x"]) == Array(#"{"method":"x"}"#.utf8) + [0])
    }

    @Test func methodTableLevels() {
        let user: Set<AdminMethod> = [.getInfo, .getStatus, .watchCounters, .listBackends, .getConfig, .getPrompt]
        for method in AdminMethod.allCases {
            let expected: AdminLevel = user.contains(method) ? .user : [.reload, .setListener].contains(method) ? .operator : .admin
            #expect(method.minimumLevel == expected, "\(method)")
            #expect(AdminMethod(qualifiedName: method.qualifiedName) == method)
        }
        #expect(AdminMethod(qualifiedName: "org.afm.AdminX.GetInfo") == nil)
    }
}
