import Foundation

/// Tiny shared libraries built with `cc`, linked with or without a GNU build-id note, and the
/// text hash of an ELF file computed here from its bytes, independently of the C code.
package enum TextHashFixture {
    /// Builds `lib<name>.so` from C `source` into `directory`; `buildID: false` links it with
    /// `--build-id=none`, so it has no note.
    package static func library(_ name: String, source: String, buildID: Bool, in directory: String) throws -> String {
        let sourcePath = "\(directory)/\(name).c"
        let output = "\(directory)/lib\(name).so"
        try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
        guard let cc = Tool.which("cc") else { throw Tool.Failure(description: "cc is not on PATH") }
        let r = try Tool.run(
            cc, ["-shared", "-fPIC", "-O1", "-Wl,--build-id=\(buildID ? "sha1" : "none")", sourcePath, "-o", output])
        guard r.status == 0 else { throw Tool.Failure(description: "cc failed: \(r.stderr)") }
        return output
    }

    /// The first min(4096, p_filesz) bytes at p_offset of the file's first executable PT_LOAD
    /// segment, XOR-folded into 16 bytes (byte i into hash[i % 16]).
    package static func textHash(ofFile path: String) throws -> [UInt8] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func word(_ at: Int, _ size: Int) -> UInt64 {
            (0..<size).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        let phoff = Int(word(32, 8)), phentsize = Int(word(54, 2)), phnum = Int(word(56, 2))
        for i in 0..<phnum {
            let ph = phoff + i * phentsize
            let type = word(ph, 4), flags = word(ph + 4, 4)
            guard type == 1, flags & 1 != 0 else { continue }  // PT_LOAD, PF_X
            let offset = Int(word(ph + 8, 8)), size = min(4096, Int(word(ph + 32, 8)))
            var hash = [UInt8](repeating: 0, count: 16)
            for k in 0..<size { hash[k % 16] ^= bytes[offset + k] }
            return hash
        }
        throw Tool.Failure(description: "\(path) has no executable PT_LOAD segment")
    }

    /// C source of a library whose code differs with `value`.
    package static func source(_ value: Int) -> String {
        "int text_hash_fixture_\(value)(int x) { return x * \(value) + \(value * 7); }\n"
    }
}
