// SPDX-License-Identifier: Apache-2.0
// Test helper for the crash-safety test of SettingsStore: rewrites the settings file in a loop until killed.
//
// Usage: afm-atomic-writer SETTINGS_FILE
// Each round stores a common prompt of 64 KiB made of one repeated character derived from the revision, so
// a reader can tell a complete file (all characters equal, matching the revision) from a torn one.
import AFMConfig
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: afm-atomic-writer SETTINGS_FILE\n".utf8))
    exit(64)
}
do {
    let store = try SettingsStore(path: arguments[1])
    while true {
        let next = store.current.revision + 1
        let marker = Character(UnicodeScalar(UInt8(97 + next % 26)))
        try store.setCommonPrompt(String(repeating: marker, count: 65_536))
    }
} catch {
    FileHandle.standardError.write(Data("afm-atomic-writer: \(error)\n".utf8))
    exit(1)
}
