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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    #if compiler(>=6.2) // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("ENOSPC while the handler writes")
    func fullDisk() async throws {
        let mountPoint = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-full-\(UUID())").path
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try #require(Self.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mountPoint]) == 0)
        defer {
            _ = Self.run(["umount", mountPoint])
            try? FileManager.default.removeItem(atPath: mountPoint)
        }
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
            let config = Aftermath.Configuration(serviceName: "full", serviceVersion: "1", exporter: refusing,
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
    #endif
}
