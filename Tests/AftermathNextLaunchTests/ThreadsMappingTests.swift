import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import Foundation
import TestSupport
import Testing

/// apsio.threads on app.crash: every thread of a format-2 crash, the crashed one first, each
/// stack in exception.stacktrace's format, their images in apsio.crash.images.
@Suite("Threads on app.crash")
struct ThreadsMappingTests {
    /// A thread as the handler records one.
    static func thread(
        _ id: UInt64, _ name: String, crashed: Bool = false, main: Bool = false, state: Character = "S",
        context: UInt32 = AFT_THREAD_CONTEXT_SIGNAL, why: UInt32 = AFT_THREAD_WHY_NONE, syscall: Int64 = -1,
        frames: [UInt64]
    ) -> CrashThread {
        var r = aft_thread()
        r.thread_id = id
        withUnsafeMutableBytes(of: &r.name) { raw in
            for (i, b) in name.utf8.prefix(raw.count - 1).enumerated() { raw[i] = b }
        }
        r.flags = (crashed ? AFT_THREAD_CRASHED : 0) | (main ? AFT_THREAD_MAIN : 0)
        r.context_source = context
        r.why = why
        r.syscall_number = syscall
        r.state = CChar(state.asciiValue!)
        r.unwinder = AFT_UNWINDER_LIBUNWIND
        return CrashThread(record: r, frames: frames, stackStart: 0, stack: [])
    }

    static func v1Crash() throws -> CrashReport {
        try ReportFile.decode(TestSupport.fixture("v1/sigsegv-null-depth12.crash")).crashReport()
    }

    static func string(_ record: LogRecord, _ key: String) -> String? {
        record.attributes.first { $0.key == key }?.value.stringValue
    }

    static func objects(_ json: String?) throws -> [[String: Any]] {
        let data = Data(try #require(json).utf8)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
    }

    @Test("Several threads: the crashed one first, every field, stacks as exception.stacktrace")
    func shape() throws {
        var crash = try Self.v1Crash()
        let other = try #require(
            crash.images.first { image in
                !image.isMainExecutable && !crash.frames.contains { image.contains($0) }
            })
        let lockFrames = [other.start + 0x40, crash.frames[1], 0x10]
        crash.threads = [
            Self.thread(41, "worker", state: "S", syscall: 202, frames: lockFrames),
            Self.thread(
                UInt64(crash.threadID), crash.threadName, crashed: true, main: true, state: "R",
                context: AFT_THREAD_CONTEXT_CRASH, frames: crash.frames),
            Self.thread(
                43, "stuck", state: "D", context: AFT_THREAD_CONTEXT_SYSCALL, why: AFT_THREAD_WHY_UNINTERRUPTIBLE,
                frames: [crash.frames[2]]),
            Self.thread(44, "quiet", context: AFT_THREAD_CONTEXT_NONE, why: AFT_THREAD_WHY_BLOCKS_SIGNAL, frames: []),
        ]
        let record = RecordMapper.crash(crash, observedTimeUnixNano: 1)
        let threads = try Self.objects(Self.string(record, "apsio.threads"))
        #expect(threads.map { $0["id"] as? Int } == [Int(crash.threadID), 41, 43, 44])
        #expect(threads.map { $0["crashed"] as? Bool } == [true, false, false, false])
        #expect(threads.map { $0["name"] as? String } == [crash.threadName, "worker", "stuck", "quiet"])
        #expect(threads.map { $0["state"] as? String } == ["R", "S", "D", "S"])
        #expect(threads.map { $0["context"] as? String } == ["crash", "signal", "syscall", "none"])
        #expect(threads.map { $0["why"] as? String } == [nil, nil, "uninterruptible", "blocks_signal"])
        #expect(threads[0]["main"] as? Bool == true && threads[1]["main"] as? Bool == false)
        #expect(threads[1]["syscall"] as? Int == 202)
        #expect(threads[1]["syscall_name"] as? String == (crash.context.architecture == .x86_64 ? "futex" : nil))
        #expect(threads[0]["stacktrace"] as? String == Self.string(record, "exception.stacktrace"))
        #expect(
            threads[1]["stacktrace"] as? String == StackFormatter.stacktrace(frames: lockFrames, images: crash.images))
        #expect((threads[1]["stacktrace"] as? String)?.hasPrefix("0 \(other.name) ") == true)
        #expect(threads[3]["stacktrace"] as? String == "")
        #expect(threads.allSatisfy { $0["frames_truncated"] == nil && $0["unwinder"] as? String == "libunwind" })
        // The other thread's image is named although no frame of the crash is in it.
        let images = try Self.objects(Self.string(record, "apsio.crash.images"))
        #expect(images.contains { $0["load_address"] as? String == Hex.address(other.start) })
        let crashOnly = try Self.objects(
            Self.string(RecordMapper.crash(try Self.v1Crash(), observedTimeUnixNano: 1), "apsio.crash.images"))
        #expect(images.count == crashOnly.count + 1)
        #expect(record.attributes.contains { $0.key == "apsio.threads.omitted" } == false)
    }

    @Test("A format-1 crash (no threads): no apsio.threads, images of the crash's own frames")
    func versionOne() throws {
        let crash = try Self.v1Crash()
        #expect(crash.threads.isEmpty)
        let record = RecordMapper.crash(crash, observedTimeUnixNano: 1)
        #expect(Self.string(record, "apsio.threads") == nil)
        #expect(
            Self.string(record, "apsio.crash.images")
                == StackFormatter.imagesJSON(frames: crash.frames, images: crash.images, appRoot: crash.context.appRoot)
        )
        #expect(Self.string(record, "exception.stacktrace") != nil)
    }

    @Test("The size cap: whole threads left out and counted, deep stacks cut at 256 frames")
    func cap() throws {
        var crash = try Self.v1Crash()
        let deep = Array(repeating: crash.frames[0], count: 4000)
        crash.frames = deep
        crash.threads =
            [Self.thread(UInt64(crash.threadID), "main", crashed: true, frames: deep)]
            + (0..<600).map {
                Self.thread(1000 + UInt64($0), "w\($0)", frames: Array(repeating: crash.frames[0], count: 40))
            }
        var capture = aft_threads_info()
        capture.omitted = 7
        crash.threadCapture = ThreadCapture(capture)
        let record = RecordMapper.crash(crash, observedTimeUnixNano: 1)
        let json = try #require(Self.string(record, "apsio.threads"))
        #expect(json.utf8.count <= StackFormatter.maxThreadsJSONBytes)
        let threads = try Self.objects(json)
        let omitted = record.attributes.first { $0.key == "apsio.threads.omitted" }?.value.intValue
        #expect(threads.count > 1 && threads.count < 601)
        #expect(omitted == Int64(601 - threads.count))
        #expect(record.attributes.first { $0.key == "apsio.threads.not_captured" }?.value.intValue == 7)
        #expect(threads[0]["crashed"] as? Bool == true && threads[0]["frames_truncated"] as? Bool == true)
        #expect((threads[0]["stacktrace"] as? String)?.split(separator: "\n").count == StackFormatter.maxThreadFrames)
        #expect(threads.map { $0["id"] as? Int }.dropFirst() == ArraySlice((0..<threads.count - 1).map { 1000 + $0 }))
        // exception.stacktrace keeps the whole crashing stack.
        #expect(Self.string(record, "exception.stacktrace")?.split(separator: "\n").count == 4000)
    }

    @Test("A record with apsio.threads and apsio.attachment.id passes the OTLP/JSON validator")
    func validOTLP() throws {
        var crash = try Self.v1Crash()
        crash.threads = [
            Self.thread(UInt64(crash.threadID), crash.threadName, crashed: true, frames: crash.frames),
            Self.thread(7, "io \"quoted\"\\", syscall: 0, frames: [crash.frames[0]]),
        ]
        var record = RecordMapper.crash(crash, observedTimeUnixNano: 1)
        record.attributes.append(
            Attribute("apsio.attachment.id", .string(PendingAttachment.id(forCrash: crash.context.reportID))))
        let batch = LogBatch(
            resource: SDK.resource(serviceName: "threads", serviceVersion: "1"), scopeName: SDK.scopeName,
            scopeVersion: SDK.version, records: [record])
        let dir = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try TestSupport.write(OTLPJSON.encode(batch), to: dir + "/batch.json")
        let result = try OTLPFixtures.validate(dir + "/batch.json")
        #expect(result.status == 0, "\(result.output)")
        let threads = try Self.objects(
            Self.string(try OTLPJSON.decode(OTLPJSON.encode(batch)).records[0], "apsio.threads"))
        #expect(threads[1]["name"] as? String == "io \"quoted\"\\")
    }
}
