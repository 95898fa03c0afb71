// SPDX-License-Identifier: Apache-2.0
//
// The libFuzzer entry points of `afm-fuzz` (built by scripts/fuzz, never by SwiftPM). One binary holds every target;
// it is linked as `fuzz-<target>` and picks the target from its own name, so a crash input found by
// `fuzz-json` is reproduced with `.build/fuzz/bin/fuzz-json CRASH-FILE`.
@preconcurrency import Glibc

nonisolated(unsafe) private var selected: FuzzTarget?

@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    // The force unwraps are safe: libFuzzer passes main's argv, whose first element is the program name.
    let program = String(cString: argv.pointee![0]!)
    let name = String(program.split(separator: "/").last ?? "").replacingPrefix("fuzz-")
    guard let target = FuzzTargets.named(name) else {
        let names = FuzzTargets.all.map(\.name).joined(separator: ", ")
        fputs("afm-fuzz: run me as fuzz-<target>; targets: \(names)\n", stderr)
        exit(2)
    }
    selected = target
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    // The force unwrap is safe: LLVMFuzzerInitialize ran first and exited unless it chose a target.
    let target = selected!
    let bytes = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    do {
        try target.run(bytes)
    } catch {
        // A broken property is a crash, so libFuzzer keeps the input.
        fatalError("fuzz-\(target.name): \(error)")
    }
    return 0
}

extension String {
    fileprivate func replacingPrefix(_ prefix: String) -> String {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : self
    }
}
