import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import TestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Hang files as the watchdog writes them: decoding, the live block, and the next launch's pass.
@Suite("Hang files")
struct HangFileTests {
    static let begin: UInt64 = 1_760_000_000_123_000_000

    /// A committed hang file in the writer's layout: header, context, hang, frames, images.
    static func hangFile(
        runID: UUID = UUID(), reportID: UUID = UUID(), sessionID: UUID = UUID(),
        durationMs: UInt64 = 1234, finished: Bool, liveValid: Bool = true,
        state: UInt8 = UInt8(ascii: "S"), syscall: UInt64 = 202, target: aft_hang_target? = nil
    ) -> [UInt8] {
        var context = aft_context()
        withUnsafeMutableBytes(of: &context.report_id) { $0.copyBytes(from: reportID.bytes) }
        withUnsafeMutableBytes(of: &context.session_id) { $0.copyBytes(from: sessionID.bytes) }
        withUnsafeMutableBytes(of: &context.run_id) { $0.copyBytes(from: runID.bytes) }
        context.pid = 4242
        context.start_realtime_ns = begin - 5_000_000_000
        CString.write("shop", into: &context.service_name)
        CString.write("2.0.1", into: &context.service_version)
        CString.write("Debian GNU/Linux", into: &context.os_name)
        CString.write("12", into: &context.os_version)
        CString.write("/app/bin/shop", into: &context.executable_path)
        CString.write("/app/bin", into: &context.app_root)
        context.arch = UInt32(AFT_ARCH_X86_64)

        var hang = aft_hang_info()
        hang.begin_realtime_ns = begin
        hang.begin_monotonic_ns = 77_000_000_000
        hang.thread_id = 4242
        hang.threshold_ms = 250
        hang.capture_pause_ns = 90_000
        hang.syscall_number = syscall
        hang.capture_method = UInt32(AFT_CAPTURE_SIGNAL)
        hang.thread_state = CChar(bitPattern: state)
        CString.write("shop", into: &hang.thread_name)
        CString.write("futex_do_wait", into: &hang.wait_channel)

        var image = aft_image()
        image.start = 0x5555_0000_0000
        image.end = 0x5555_0010_0000
        image.flags = UInt32(AFT_IMAGE_MAIN_EXECUTABLE)
        image.build_id_size = 20
        withUnsafeMutableBytes(of: &image.build_id) { for i in 0..<20 { $0[i] = UInt8(i + 1) } }
        image.arch = UInt32(AFT_ARCH_X86_64)
        CString.write("/app/bin/shop", into: &image.path)
        let frames: [UInt64] = [0x5555_0000_1000, 0x5555_0000_2345]

        var body: [UInt8] = []
        func section<T>(_ type: UInt32, _ entries: [T]) {
            var header = aft_section_header(
                type: type, entry_size: UInt32(MemoryLayout<T>.size),
                count: UInt32(entries.count), flags: 0)
            withUnsafeBytes(of: &header) { body += $0 }
            for var e in entries { withUnsafeBytes(of: &e) { body += $0 } }
        }
        section(UInt32(AFT_SECTION_CONTEXT), [context])
        section(UInt32(AFT_SECTION_HANG), [hang])
        if let target { section(UInt32(AFT_SECTION_HANG_TARGET), [target]) }
        section(UInt32(AFT_SECTION_FRAMES), frames)
        section(UInt32(AFT_SECTION_IMAGES), [image])

        var header = aft_file_header()
        header.magic = AFT_MAGIC
        header.version = UInt16(AFT_FORMAT_VERSION)
        header.header_size = UInt16(MemoryLayout<aft_file_header>.size)
        header.kind = UInt32(AFT_KIND_HANG)
        header.body_size = UInt64(body.count)
        header.body_crc = body.withUnsafeBytes { aft_crc32(0, $0.baseAddress, $0.count) }
        header.commit = AFT_COMMIT_MARKER
        header.live_value = durationMs
        header.live_updated_ns = begin + durationMs * 1_000_000
        header.live_check = liveValid ? aft_live_check(header.live_value, header.live_updated_ns) : 0x1234
        header.live_flags = finished ? UInt32(AFT_FLAG_HANG_FINISHED) : 0
        var bytes: [UInt8] = []
        withUnsafeBytes(of: &header) { bytes += $0 }
        return bytes + body
    }

    static func write(
        _ bytes: [UInt8], in directory: ReportDirectory, name: String = "\(UUID().uuidString.lowercased()).hang"
    ) throws -> String {
        let path = (directory.hangs as NSString).appendingPathComponent(name)
        try TestSupport.write(bytes, to: path)
        return path
    }

    @Test("A finished hang decodes with its live duration, thread state and stack")
    func finishedDecodes() throws {
        let file = try ReportFile.decode(Self.hangFile(durationMs: 1234, finished: true))
        let hang = try HangReport(file: file)
        #expect(hang.isFinished)
        #expect(hang.durationMilliseconds == 1234)
        #expect(hang.timeUnixNano == Self.begin)
        #expect(hang.threadStateName == "sleeping")
        #expect(hang.syscallNumber == 202)
        #expect(hang.waitChannel == "futex_do_wait")
        #expect(hang.captureMethod == .signal)
        #expect(hang.frames == [0x5555_0000_1000, 0x5555_0000_2345])
        #expect(hang.images.first?.buildID == "0102030405060708090a0b0c0d0e0f1011121314")
    }

    @Test("A live block whose check does not match is not trusted: unfinished, no duration")
    func badLiveCheck() throws {
        let file = try ReportFile.decode(Self.hangFile(durationMs: 999, finished: true, liveValid: false))
        let hang = try HangReport(file: file)
        #expect(!hang.isFinished)
        #expect(hang.durationMilliseconds == 0)
    }

    @Test("A dead run's unfinished hang becomes apsio.hang, unfinished, with its last duration")
    func unfinishedRecord() throws {
        let directory = try TestSupport.reportsDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory.root) }
        let session = UUID(), report = UUID()
        let path = try Self.write(
            Self.hangFile(reportID: report, sessionID: session, durationMs: 1850, finished: false), in: directory)
        let collection = ReportCollector(directory: directory, currentRunID: UUID()).collect()
        #expect(collection.rejected.isEmpty)
        let records = collection.reports.filter { $0.kind == .hang }
        try #require(records.count == 1)
        let r = records[0].record
        #expect(records[0].path == path)
        #expect(r.eventName == "apsio.hang")
        #expect(r.severityNumber == .error)
        #expect(r.timeUnixNano == Self.begin)
        #expect(r[attribute: "apsio.hang.source"] == .string("live"))
        #expect(r[attribute: "apsio.hang.unfinished"] == .bool(true))
        #expect(r[attribute: "apsio.hang.duration"] == .int(1850))
        #expect(r[attribute: "session.id"] == .string(session.lowercased))
        #expect(r[attribute: "service.version"] == .string("2.0.1"))
        #expect(r[attribute: "apsio.hang.thread_state"] == .string("sleeping"))
        #expect(r[attribute: "apsio.hang.syscall_name"] == .string("futex"))
        #expect(r[attribute: "apsio.hang.main_thread"] == .bool(true))
        #expect(r[attribute: "log.record.uid"] == .string(RecordMapper.recordUID(timeUnixNano: Self.begin, id: report)))
        #expect(
            r[attribute: "exception.stacktrace"]?.stringValue?.hasPrefix("0 shop 0x0000555500001000 + 0x1000") == true)
        #expect(r[attribute: "apsio.crash.images"]?.stringValue?.contains("\"in_app\":true") == true)
    }

    @Test("A finished hang that was never exported is a normal live record")
    func finishedNotExported() throws {
        let directory = try TestSupport.reportsDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory.root) }
        _ = try Self.write(Self.hangFile(durationMs: 640, finished: true), in: directory)
        let r = try #require(ReportCollector(directory: directory, currentRunID: UUID()).collect().reports.first).record
        #expect(r[attribute: "apsio.hang.unfinished"] == nil)
        #expect(r[attribute: "apsio.hang.duration"] == .int(640))
    }

    @Test("The running process's own hang files are left to it")
    func currentRunLeftAlone() throws {
        let directory = try TestSupport.reportsDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory.root) }
        let run = UUID()
        let path = try Self.write(Self.hangFile(runID: run, finished: false), in: directory)
        let collection = ReportCollector(directory: directory, currentRunID: run).collect()
        #expect(collection.reports.isEmpty)
        #expect(collection.rejected.isEmpty)
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test("A hang another live process still holds (its lock) is not taken for a dead run's")
    func lockedByLiveProcess() throws {
        let directory = try TestSupport.reportsDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory.root) }
        let path = try Self.write(Self.hangFile(finished: false), in: directory)
        let fd = open(path, O_RDONLY)
        #expect(flock(fd, LOCK_EX) == 0)
        #expect(ReportCollector(directory: directory, currentRunID: UUID()).collect().reports.isEmpty)
        close(fd)
        #expect(ReportCollector(directory: directory, currentRunID: UUID()).collect().reports.count == 1)
    }

    @Test("A damaged hang file is rejected with its reason, never reported")
    func damagedSetAside() throws {
        let directory = try TestSupport.reportsDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory.root) }
        var bytes = Self.hangFile(finished: true)
        bytes[bytes.count - 10] ^= 0xFF
        let path = try Self.write(bytes, in: directory)
        let collection = ReportCollector(directory: directory, currentRunID: UUID()).collect()
        #expect(collection.reports.isEmpty)
        let rejected = try #require(collection.rejected.first)
        #expect(rejected.path == path)
        #expect(rejected.reason.contains("CRC"))
        #expect(rejected.movedTo != nil)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("A hang of a run that also crashed is still reported, marked run_crashed")
    func crashedRunKeepsHang() throws {
        let hang = try HangReport(file: ReportFile.decode(Self.hangFile(finished: false)))
        let r = HangRecordMapper.hang(hang, observedTimeUnixNano: Self.begin + 1, runCrashed: true)
        #expect(r.eventName == "apsio.hang")
        #expect(r[attribute: "apsio.hang.run_crashed"] == .bool(true))
        #expect(r[attribute: "apsio.hang.unfinished"] == .bool(true))
    }

    @Test("Thread states in words tell a busy loop from a wait and from I/O")
    func threadStates() throws {
        func name(_ letter: Character) throws -> String {
            try HangReport(file: ReportFile.decode(Self.hangFile(finished: true, state: letter.asciiValue!)))
                .threadStateName
        }
        #expect(try name("R") == "running")
        #expect(try name("S") == "sleeping")
        #expect(try name("D") == "disk_sleep")
        #expect(try name("t") == "tracing_stop")
    }
}
