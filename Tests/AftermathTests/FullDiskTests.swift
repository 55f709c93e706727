import Foundation
import Testing
import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import TestSupport

/// Crashing on a full disk: the process still dies exactly as it would have, and the next
/// launch reports what fit (a salvaged partial crash) without crashing or losing other files.
@Suite("Full disk", .enabled(if: getuid() == 0, "mounting a small tmpfs needs root (CI runs as root)"))
struct FullDiskTests {
    static func run(_ arguments: [String]) -> Int32 {
        BrokenPipe.ignoreSIGPIPE()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// A fresh tmpfs of the given size; unmount it with ``unmount(_:)``.
    static func mountTmpfs(_ tag: String, size: String) throws -> String {
        let mountPoint = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-\(tag)-\(UUID())")
            .path
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try #require(run(["mount", "-t", "tmpfs", "-o", "size=\(size)", "tmpfs", mountPoint]) == 0)
        return mountPoint
    }

    static func unmount(_ mountPoint: String) {
        _ = run(["umount", mountPoint])
        try? FileManager.default.removeItem(atPath: mountPoint)
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("ENOSPC while the handler writes")
    func fullDisk() async throws {
        let mountPoint = try Self.mountTmpfs("full", size: "64k")
        defer { Self.unmount(mountPoint) }
        let reports: String = mountPoint + "/reports"
        try ReportDirectory(root: reports).prepare()
        let other = reports + "/crashes/older.crash"
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        try TestSupport.write(golden, to: other)
        // Fill the rest of the file system, leaving less than one crash file's worth.
        #expect(FileManager.default.createFile(atPath: mountPoint + "/filler", contents: nil))
        let filler = try #require(FileHandle(forWritingAtPath: mountPoint + "/filler"))
        while (try? filler.write(contentsOf: Data(count: 4096))) != nil {}
        try? filler.close()
        // 8 KiB left: one page for the run's record (written at start), one for the crash.
        _ = Self.run(["truncate", "-s", "-8192", mountPoint + "/filler"])

        await #expect(processExitsWith: .signal(SIGSEGV)) { [reports = reports as String] in
            // An exporter that never acknowledges: the older report must stay (and keep the disk full).
            let refusing = InMemoryExporter()
            refusing.failNext(Int.max)
            let config = Aftermath.Configuration(
                serviceName: "full", serviceVersion: "1", exporter: refusing,
                reportsDirectory: reports, fsyncReports: false)
            try? Aftermath.start(config)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        try? FileManager.default.removeItem(atPath: mountPoint + "/filler")
        let collection = ReportCollector(directory: ReportDirectory(root: reports)).collect()
        // The older report is intact; the new crash is there as far as it fit: its context,
        // signal and stack (written first), without the images that did not fit.
        #expect(collection.reports.contains { $0.path == other })
        #expect(collection.rejected.isEmpty)
        let partial = try #require(collection.reports.first { $0.path != other && $0.kind == .crash })
        #expect(!collection.reports.contains { $0.kind == .abnormalExit }, "a crash report of the run wins")
        #expect(partial.crash?.isPartial == true)
        #expect(partial.crash?.frames.isEmpty == false)
        #expect(partial.record[attribute: "exception.type"]?.stringValue == "SIGSEGV (SEGV_MAPERR)")
        #expect(partial.record[attribute: "apsio.crash.partial"]?.boolValue == true)
    }

    @Test("A disk that fills up after start: the crash file's space was reserved, the report is whole")
    func fillsAfterStart() async throws {
        let mountPoint = try Self.mountTmpfs("fills", size: "512k")
        defer { Self.unmount(mountPoint) }
        let reports: String = mountPoint + "/reports"
        await #expect(processExitsWith: .signal(SIGSEGV)) {
            [reports = reports as String, mountPoint = mountPoint as String] in
            let refusing = InMemoryExporter()
            refusing.failNext(Int.max)
            let config = Aftermath.Configuration(
                serviceName: "fills", serviceVersion: "1", exporter: refusing,
                reportsDirectory: reports, fsyncReports: false)
            guard (try? Aftermath.start(config)) != nil else { _exit(90) }
            // The app then fills the disk, to the last block.
            let fd = open(mountPoint + "/filler", O_WRONLY | O_CREAT, 0o600)
            var block = [UInt8](repeating: 1, count: 4096)
            while block.withUnsafeMutableBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
            var byte: UInt8 = 1
            while write(fd, &byte, 1) > 0 {}
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        try? FileManager.default.removeItem(atPath: mountPoint + "/filler")
        let collection = ReportCollector(directory: ReportDirectory(root: reports)).collect()
        #expect(collection.rejected.isEmpty)
        let crash = try #require(collection.reports.compactMap(\.crash).first)
        #expect(!crash.isPartial, "whole: committed, not salvaged")
        #expect(crash.images.contains { $0.isMainExecutable && !$0.buildID.isEmpty })
        // Committed to its real size: the reserve beyond it was given back.
        let named = try FileManager.default.contentsOfDirectory(atPath: reports + "/crashes").filter {
            $0.hasSuffix(".crash")
        }
        let path = reports + "/crashes/" + (try #require(named.first))
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(
            Int(st.st_blocks) * 512 <= (Int(st.st_size) + 4095) / 4096 * 4096,
            "blocks \(st.st_blocks), size \(st.st_size)")
    }
    #endif
}
