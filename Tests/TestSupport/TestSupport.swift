import Foundation
import AftermathNextLaunch
import AftermathOTLP
import CSignalShim

/// Helpers shared by the crash-format suites.
package enum TestSupport {
    /// The bytes of a fixture under Tests/TestSupport/Fixtures.
    package static func fixture(_ name: String) throws -> [UInt8] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures").appendingPathComponent(name)
        return Array(try Data(contentsOf: url))
    }

    /// Resident pages among [start, end) (mincore), or -1 when it fails.
    package static func residentPages(_ start: UInt, _ end: UInt) -> Int {
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        let count = Int((end - start) / page)
        var vector = [UInt8](repeating: 0, count: count)
        guard mincore(UnsafeMutableRawPointer(bitPattern: start), Int(end - start), &vector) == 0 else { return -1 }
        return vector.filter { $0 & 1 != 0 }.count
    }

    /// A fresh reports directory with its layout created.
    package static func reportsDirectory() throws -> ReportDirectory {
        let root = FileManager.default.temporaryDirectory
            .appendingPathComponent("aftermath-tests-\(UUID().uuidString)").path
        let directory = ReportDirectory(root: root)
        try directory.prepare()
        return directory
    }

    /// A fresh, not yet created reports directory for a child process (exit tests).
    package static func childDirectory(_ tag: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-\(tag)-\(UUID())").path
    }

    /// Writes the v1 crash fixture into dir's crashes/ under its own id, as the handler names
    /// crash files, and returns that crash.
    @discardableResult
    package static func pendingCrash(in dir: ReportDirectory) throws -> CrashReport {
        let bytes = try fixture("v1/sigsegv-null-depth12.crash")
        let crash = try ReportFile.decode(bytes).crashReport()
        try write(bytes, to: dir.crashes + "/\(crash.context.reportID.fileStem).crash")
        return crash
    }

    package static func write(_ bytes: [UInt8], to path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Rewrites the header's CRC and body size so a modified body is accepted as whole.
    package static func resealed(_ bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        let body = Array(b[64...])
        let crc = body.withUnsafeBytes { aftCRC($0) }
        withUnsafeBytes(of: UInt64(body.count).littleEndian) { b.replaceSubrange(16..<24, with: $0) }
        withUnsafeBytes(of: crc.littleEndian) { b.replaceSubrange(24..<28, with: $0) }
        return b
    }

    package static func aftCRC(_ raw: UnsafeRawBufferPointer) -> UInt32 {
        ReportFile.crc32(raw)
    }

    /// Reads a little-endian UInt32 at offset.
    package static func u32(_ b: [UInt8], _ offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(b[offset + $1]) << (8 * UInt32($1)) }
    }

    package static func setU32(_ b: inout [UInt8], _ offset: Int, _ v: UInt32) {
        withUnsafeBytes(of: v.littleEndian) { b.replaceSubrange(offset..<offset + 4, with: $0) }
    }
}
