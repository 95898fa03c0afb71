// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation

/// Images made for tests: PNGs written by Python's zlib (python3 is a bootstrap package), so no image tool is needed.
enum TestImages {
    /// A `width`×`height` RGB PNG; `noise` fills it with random bytes (incompressible), else a gradient.
    static func png(width: Int, height: Int, noise: Bool = false) throws -> [UInt8] {
        let path = TestPaths.makeTemporaryDirectory("afm-img") + "/image.png"
        let script = """
            import os, struct, sys, zlib
            w, h, noise, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
            rows = b"".join(b"\\x00" + (os.urandom(w * 3) if noise else bytes((x * 7 + y) % 256 for x in range(w * 3))) for y in range(h))
            def chunk(kind, data):
                return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
            png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b"")
            open(path, "wb").write(png)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, "\(width)", "\(height)", noise ? "1" : "0", path]
        try process.run()
        process.waitUntilExit()
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }
}
