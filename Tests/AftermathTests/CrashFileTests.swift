import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import TestSupport
import Foundation
import Testing

/// The crash file format, from both languages, and its decoder on golden and corrupt files.
@Suite("Crash file format")
struct CrashFileTests {
    @Test("Swift sees the C layout: sizes and offsets match the header's static asserts")
    func layout() {
        #expect(MemoryLayout<aft_file_header>.size == 64)
        #expect(MemoryLayout<aft_section_header>.size == 16)
        #expect(MemoryLayout<aft_context>.size == 1000)
        #expect(MemoryLayout<aft_crash_info>.size == 464)
        #expect(MemoryLayout<aft_hang_info>.size == 176)
        #expect(MemoryLayout<aft_image>.size == 328)
        #expect(MemoryLayout<aft_file_header>.offset(of: \.body_size) == 16)
        #expect(MemoryLayout<aft_file_header>.offset(of: \.body_crc) == 24)
        #expect(MemoryLayout<aft_file_header>.offset(of: \.commit) == 28)
        #expect(MemoryLayout<aft_file_header>.offset(of: \.live_value) == 32)
        #expect(MemoryLayout<aft_context>.offset(of: \.app_build_id) == 448)
        #expect(MemoryLayout<aft_crash_info>.offset(of: \.registers) == 88)
        #expect(MemoryLayout<aft_image>.offset(of: \.path) == 72)
        #expect(MemoryLayout<aft_system_info>.size == 64)
        #expect(MemoryLayout<aft_system_info>.offset(of: \.cpu_vendor) == 16)
        #expect(MemoryLayout<aft_system_info>.offset(of: \.process_start_realtime_ns) == 40)
    }

    @Test("CRC-32 is the IEEE polynomial (check value of \"123456789\")")
    func crc() {
        let value = Array("123456789".utf8).withUnsafeBytes { ReportFile.crc32($0) }
        #expect(value == 0xCBF4_3926)
    }

    @Test("A crash file written by the real handler (format v1) decodes to what happened")
    func goldenV1() throws {
        let file = try ReportFile.decode(TestSupport.fixture("v1/sigsegv-null-depth12.crash"))
        let crash = try file.crashReport()
        #expect(crash.signal == SIGSEGV)
        #expect(crash.code == 1)  // SEGV_MAPERR
        #expect(crash.faultAddress == 8)
        #expect(crash.senderPID == nil)
        #expect(crash.context.serviceName == "bench")
        #expect(crash.context.serviceVersion == "1.0")
        #expect(crash.context.appBuildID.count == 40)
        #expect(crash.isMainThread)
        #expect(crash.unwinder == .libunwind)
        #expect(crash.frames.count >= 12)
        #expect(!crash.framesTruncated && !crash.isPartial)
        let main = try #require(crash.images.first { $0.isMainExecutable })
        #expect(main.buildID == crash.context.appBuildID)
        #expect(main.contains(crash.frames[0]), "frame 0 is the faulting pc, in the executable")
        #expect(crash.pc == crash.frames[0])
        let libc = try #require(crash.images.first { $0.name == "libc.so.6" })
        #expect(libc.buildID.count == 40 && !libc.isMainExecutable)
        #expect(crash.images.allSatisfy { $0.start < $0.end })
    }

    @Test("Its record: type, message, ids, stack lines and images")
    func goldenRecord() throws {
        let crash = try ReportFile.decode(TestSupport.fixture("v1/sigsegv-null-depth12.crash")).crashReport()
        let record = RecordMapper.crash(crash, observedTimeUnixNano: 1)
        #expect(record.eventName == "app.crash")
        #expect(record.severityNumber == .fatal)
        #expect(record.timeUnixNano == crash.timeUnixNano)
        #expect(record[attribute: "exception.type"]?.stringValue == "SIGSEGV (SEGV_MAPERR)")
        #expect(record[attribute: "exception.message"]?.stringValue?.contains("0x0000000000000008") == true)
        #expect(record[attribute: "app.crash.id"]?.stringValue == crash.context.reportID.lowercased)
        #expect(record[attribute: "session.id"]?.stringValue == crash.context.sessionID.lowercased)
        #expect(record[attribute: "app.build_id"]?.stringValue == crash.context.appBuildID)
        let uid = try #require(record[attribute: "log.record.uid"]?.stringValue)
        #expect(ULID.isValid(uid))
        #expect(ULID.timeMilliseconds(of: uid) == crash.timeUnixNano / 1_000_000)
        // The same report gives the same ids on every attempt.
        let again = RecordMapper.crash(crash, observedTimeUnixNano: 2)
        #expect(again[attribute: "log.record.uid"] == record[attribute: "log.record.uid"])
        let lines = try #require(record[attribute: "exception.stacktrace"]?.stringValue).split(separator: "\n")
        #expect(lines.count == crash.frames.count)
        #expect(lines[0].hasPrefix("0 aftermath-bench 0x"))
        #expect(lines[0].contains(" + 0x"))
        let imagesJSON = try #require(record[attribute: "apsio.crash.images"]?.stringValue)
        let images = try #require(try JSONSerialization.jsonObject(with: Data(imagesJSON.utf8)) as? [[String: Any]])
        let exe = try #require(images.first { $0["name"] as? String == "aftermath-bench" })
        #expect(exe["in_app"] as? Bool == true)
        #expect(exe["build_id"] as? String == crash.context.appBuildID)
        #expect(exe["arch"] as? String == "x86_64" || exe["arch"] as? String == "arm64")
        #expect(images.contains { $0["name"] as? String == "libc.so.6" && $0["in_app"] as? Bool == false })
        #expect(images.allSatisfy { ($0["load_address"] as? String)?.hasPrefix("0x") == true })
        #expect(!imagesJSON.contains("/"), "records carry image names, never paths")
    }

    @Test("Truncated at any length: a clear error, never a crash")
    func truncations() throws {
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        for length in stride(from: 0, to: golden.count, by: 37) {
            #expect(throws: ReportFileError.self) { try ReportFile.decode(Array(golden.prefix(length))) }
        }
        #expect(throws: ReportFileError.truncatedHeader(bytes: 10)) { try ReportFile.decode(Array(golden.prefix(10))) }
    }

    @Test("Damaged, foreign and future files are refused with their reason")
    func corrupt() throws {
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        var flipped = golden
        flipped[golden.count / 2] ^= 0x40
        #expect(throws: ReportFileError.self) { try ReportFile.decode(flipped) }
        do {
            _ = try ReportFile.decode(flipped)
            Issue.record("accepted a damaged body")
        } catch {
            #expect(error.description.hasPrefix("CRC mismatch"))
        }
        var magic = golden
        magic[0] = 0x89
        #expect(throws: ReportFileError.badMagic(TestSupport.u32(magic, 0))) { try ReportFile.decode(magic) }
        var version = golden
        version[4] = 99
        #expect(throws: ReportFileError.unsupportedVersion(99)) { try ReportFile.decode(version) }
        var uncommitted = golden
        TestSupport.setU32(&uncommitted, 28, 0)
        #expect(throws: ReportFileError.notCommitted) { try ReportFile.decode(uncommitted) }
        var kind = golden
        TestSupport.setU32(&kind, 8, 77)
        #expect(throws: ReportFileError.unknownKind(77)) { try ReportFile.decode(kind) }
        let appended = golden + [0, 1, 2]
        #expect(
            throws: ReportFileError.bodySizeMismatch(expected: UInt64(golden.count - 64), actual: golden.count - 61)
        ) {
            try ReportFile.decode(appended)
        }
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 0, count: 100)
        #expect(throws: ReportFileError.badMagic(0x474E_5089)) { try ReportFile.decode(png) }
        #expect(throws: ReportFileError.tooLarge(bytes: ReportFile.maximumSize + 1)) {
            try ReportFile.decode(golden + Array(repeating: 0, count: ReportFile.maximumSize + 1 - golden.count))
        }
    }

    @Test("Hostile counts are clamped to what the file holds")
    func hostileCounts() throws {
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        // Sections: header 64 | ctx section hdr at 64 | ctx | crash section hdr | crash | frames hdr
        let framesHeader = 64 + 16 + 1000 + 16 + 464
        #expect(TestSupport.u32(golden, framesHeader) == 3)  // AFT_SECTION_FRAMES
        var hostile = golden
        TestSupport.setU32(&hostile, framesHeader + 8, 0xFFFF_FFFF)  // count
        let crash = try ReportFile.decode(TestSupport.resealed(hostile)).crashReport()
        #expect(crash.framesTruncated)
        #expect(crash.frames.count <= Int(AFT_MAX_FRAMES))
        var zeroEntry = golden
        TestSupport.setU32(&zeroEntry, framesHeader + 4, 0)  // entry_size 0
        let decoded = try ReportFile.decode(TestSupport.resealed(zeroEntry))
        #expect(decoded.frames.isEmpty && decoded.images.isEmpty)
    }

    @Test("A file the handler left half-written is salvaged as a partial crash")
    func salvage() throws {
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        var torn = Array(golden.prefix(64 + 16 + 1000 + 16 + 464 + 16 + 8 * 5))
        TestSupport.setU32(&torn, 28, 0)  // never committed
        let crash = try ReportFile.decode(torn, salvage: true).crashReport()
        #expect(crash.isPartial)
        #expect(crash.signal == SIGSEGV)
        #expect(crash.frames.count == 5)
        #expect(crash.images.isEmpty)
        // Torn inside the context: nothing to salvage.
        var tooShort = Array(golden.prefix(64 + 16 + 500))
        TestSupport.setU32(&tooShort, 28, 0)
        #expect(throws: ReportFileError.notCommitted) { try ReportFile.decode(tooShort, salvage: true) }
    }
}

/// The record of a real crash, through the exporter, against the official OTLP schema.
@Suite("Crash record schema")
struct CrashRecordSchemaTests {
    @Test("A real crash's ExportLogsServiceRequest passes the strict OTLP/JSON validator")
    func realCrashValidates() throws {
        let crash = try ReportFile.decode(TestSupport.fixture("v1/sigsegv-null-depth12.crash")).crashReport()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-schema-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let batch = LogBatch(
            resource: SDK.resource(serviceName: "schema", serviceVersion: "1"),
            scopeName: SDK.scopeName, scopeVersion: SDK.version,
            records: [RecordMapper.crash(crash, observedTimeUnixNano: 1_800_000_000_000_000_000)])
        try FileExporter(directory: dir).export(batch)
        let file = try #require(
            try FileManager.default.contentsOfDirectory(atPath: dir).first { $0.hasSuffix(".json") })
        let (status, output) = try OTLPFixtures.validate(dir + "/" + file)
        #expect(status == 0, "\(output)")
    }
}
