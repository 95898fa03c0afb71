// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The symbols an ELF shared object exports: the defined entries of its dynamic symbol table with global, weak or
/// unique binding (what another object could bind to; `nm -D --defined-only --extern-only`).
///
/// Read from the file itself, so the check needs no binutils on the machine.
enum ELFExports {
    /// Symbols the static linker and the C runtime define in every shared object; not the backend's own.
    static let linkerSymbols: Set<String> = ["_edata", "_end", "__bss_start", "_init", "_fini"]

    /// The exported symbol names of the 64-bit little-endian ELF file at `path`.
    static func names(ofFileAt path: String) throws(CheckFailure) -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else { throw CheckFailure("cannot read \(path)") }
        let bytes = [UInt8](data)
        guard bytes.count >= 64, bytes[0..<4] == [0x7F, 0x45, 0x4C, 0x46] else { throw CheckFailure("not an ELF file") }
        guard bytes[4] == 2, bytes[5] == 1 else { throw CheckFailure("not a 64-bit little-endian ELF file") }
        func integer(_ offset: Int, _ width: Int) throws(CheckFailure) -> Int {
            guard offset >= 0, offset + width <= bytes.count else { throw CheckFailure("truncated ELF file") }
            var value = 0
            for index in (0..<width).reversed() { value = value << 8 | Int(bytes[offset + index]) }
            return value
        }
        let sectionTable = try integer(0x28, 8)
        let sectionSize = try integer(0x3A, 2)
        let sectionCount = try integer(0x3C, 2)
        guard sectionSize >= 64 else { throw CheckFailure("unexpected ELF section header size \(sectionSize)") }
        var names: [String] = []
        for section in 0..<sectionCount {
            let header = sectionTable + section * sectionSize
            guard try integer(header + 4, 4) == 11 else { continue }  // SHT_DYNSYM
            let offset = try integer(header + 0x18, 8)
            let size = try integer(header + 0x20, 8)
            let link = try integer(header + 0x28, 4)
            let entrySize = max(24, try integer(header + 0x38, 8))
            let strings = try integer(sectionTable + link * sectionSize + 0x18, 8)
            for entry in stride(from: offset + entrySize, to: offset + size, by: entrySize) {  // entry 0 is null
                let binding = try integer(entry + 4, 1) >> 4
                let sectionIndex = try integer(entry + 6, 2)
                guard [1, 2, 10].contains(binding), sectionIndex != 0 else { continue }  // GLOBAL, WEAK, GNU_UNIQUE
                var end = strings + (try integer(entry, 4))
                let start = end
                while end < bytes.count, bytes[end] != 0 { end += 1 }
                names.append(String(decoding: bytes[start..<end], as: UTF8.self))
            }
        }
        return names.sorted()
    }
}
