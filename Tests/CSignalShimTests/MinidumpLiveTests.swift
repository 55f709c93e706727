import AftermathNextLaunch
import CHarnessFaults
import CSignalShim
import Foundation
import Testing
import TestSupport

/// Minidumps of real threads of this process (thread_snapshot.c: parked threads answering a
/// signal, one read from /proc, one without a context, one real SIGSEGV), written through a
/// version-2 crash file and its decoder, then read by minidump-stackwalk and LLDB.
@Suite(.serialized) struct MinidumpLiveTests {
    static let parked: UInt32 = 4

    struct Snapshot {
        var file: [UInt8]
        var report: CrashReport
        var fault: aft_test_snapshot_fault
        var records: [aft_thread]
    }

    /// The snapshot, as a committed version-2 crash file and the report its decoder reads.
    static func snapshot() throws -> Snapshot {
        let capacity = Int(parked) + 3
        var records = [aft_thread](repeating: aft_thread(), count: capacity)
        let stackSize = Int(AFT_TEST_SNAPSHOT_STACK)
        var stacks = [UInt8](repeating: 0, count: capacity * stackSize)
        var fault = aft_test_snapshot_fault()
        let n = aft_test_thread_snapshot(parked, &records, UInt32(capacity), &stacks, &fault)
        try #require(n == Int32(capacity), "aft_test_thread_snapshot: \(n)")

        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        var images = [aft_image](repeating: aft_image(), count: Int(AFT_MAX_IMAGES))
        var truncated: UInt32 = 0
        let imageCount = exe.withCString {
            aft_images_from_maps_fd(fd, &images, UInt32(images.count), 1, $0, &truncated)
        }
        images = Array(images.prefix(Int(imageCount)))

        var u = utsname()
        uname(&u)
        let release = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        var context = aft_context()
        withUnsafeMutableBytes(of: &context.report_id) { $0.copyBytes(from: (0..<16).map { UInt8($0 + 1) }) }
        context.pid = UInt64(getpid())
        context.start_realtime_ns = UInt64(Date().timeIntervalSince1970 * 1e9)
        context.arch = Architecture.current.code
        CString.write("minidump-live", into: &context.service_name)
        CString.write("1.0", into: &context.service_version)
        CString.write("Debian GNU/Linux", into: &context.os_name)
        CString.write("12", into: &context.os_version)
        CString.write(release, into: &context.kernel_release)
        CString.write(exe, into: &context.executable_path)

        var crash = aft_crash_info()
        crash.signal = fault.signal
        crash.code = fault.code
        crash.fault_address = fault.address
        crash.sender_pid = -1
        crash.sender_uid = -1
        crash.arch = Architecture.current.code
        crash.thread_id = fault.thread_id
        crash.time_realtime_ns = context.start_realtime_ns
        crash.pc = records[0].pc
        crash.sp = records[0].sp
        crash.register_count = records[0].register_count
        crash.registers = records[0].registers
        crash.thread_name = records[0].name
        crash.unwinder = UInt32(AFT_UNWINDER_PC_ONLY)

        var threadFrames: [UInt64] = []
        var kept: [CrashFileBuilder.Stack] = []
        for i in records.indices {
            records[i].frame_count = records[i].pc != 0 ? 1 : 0
            records[i].unwinder = UInt32(records[i].pc != 0 ? AFT_UNWINDER_PC_ONLY : AFT_UNWINDER_NONE)
            if records[i].pc != 0 { threadFrames.append(records[i].pc) }
            let size = Int(records[i].stack_size)
            if size > 0 {
                kept.append(
                    .init(
                        threadID: records[i].thread_id, start: records[i].stack_start,
                        bytes: Array(stacks[i * stackSize..<i * stackSize + size])))
            }
        }
        let file = CrashFileBuilder.crashFile(
            context: context, crash: crash, frames: [crash.pc], images: images, threads: records,
            threadFrames: threadFrames, stacks: kept)
        let report = try ReportFile.decode(file).crashReport()
        return Snapshot(file: file, report: report, fault: fault, records: records)
    }

    static func temporaryFile(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("minidump-\(UUID())-\(name)").path
    }

    @Test("The decoded snapshot has every thread, the crash's own first, with stacks")
    func decodedSnapshot() throws {
        let s = try Self.snapshot()
        #expect(s.report.threads.count == Int(Self.parked) + 3)
        #expect(s.report.threads.first?.crashed == true)
        #expect(s.report.threads.first?.name == "md-crasher")
        #expect(s.fault.signal == SIGSEGV && s.fault.code == 1 && s.fault.address == 0x18)
        for t in s.report.threads.prefix(Int(Self.parked) + 1) {
            #expect(!t.stack.isEmpty, "\(t.name): no stack")
            #expect(t.stackStart <= t.sp && t.sp < t.stackStart + UInt64(t.stack.count))
        }
        #expect(s.report.threads.map(\.contextSource).filter { $0 == .syscall }.count == 1)
        #expect(s.report.threads.map(\.contextSource).filter { $0 == .none }.count == 1)
    }
}

extension MinidumpLiveTests {
    /// rust-minidump's debug id of a build id: the first 16 bytes (zero-padded) as a
    /// little-endian GUID, uppercase, then the age 0.
    static func debugID(_ buildID: String) -> String {
        var b = Hex.decode(buildID) ?? []
        b += [UInt8](repeating: 0, count: max(0, 16 - b.count))
        let swapped = [b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6]] + b[8..<16]
        return Hex.encode(swapped).uppercased() + "0"
    }

    @Test("The debug id rule, on a known build id")
    func debugIDRule() {
        #expect(Self.debugID("f729704bd8d823660be9cb096d5f093f9d1cd872") == "4B7029F7D8D866230BE9CB096D5F093F0")
    }

    @Test("minidump-stackwalk: every thread, the crash, names, module ids, symbolicated frames")
    func stackwalk() throws {
        guard let readers = try MinidumpReaders.require() else { return }
        let s = try Self.snapshot()
        let dump = Self.temporaryFile("stackwalk.dmp")
        try TestSupport.write(MinidumpWriter.write(s.report), to: dump)
        defer { unlink(dump) }
        let json = try MinidumpReaders.stackwalk(readers, dump: dump)

        #expect(json["status"] as? String == "OK")
        #expect(json["thread_count"] as? Int == s.records.count)
        #expect(json["pid"] as? Int == Int(getpid()))
        let info = try #require(json["crash_info"] as? [String: Any])
        #expect(info["type"] as? String == "SIGSEGV / SEGV_MAPERR")
        #expect(info["address"] as? String == "0x0000000000000018")
        #expect(info["crashing_thread"] as? Int == 0)
        let threads = try #require(json["threads"] as? [[String: Any]])
        #expect(threads.map { $0["thread_id"] as? Int } == s.records.map { Int($0.thread_id) })
        #expect(threads.map { $0["thread_name"] as? String } == s.report.threads.map(\.name))
        func functions(_ t: [String: Any]) -> [String] {
            (t["frames"] as? [[String: Any]] ?? []).compactMap { $0["function"] as? String }
        }
        let crashed = functions(threads[0])
        #expect(crashed.first == "aft_test_crash_in_named_function", "\(crashed)")
        #expect(crashed.contains("crasher_main"), "\(crashed)")
        for (t, record) in zip(threads, s.report.threads) {
            let f = functions(t)
            switch record.contextSource {
            case .signal:
                let parkedIn = record.name == "md-alpha" ? "aft_test_parked_in_alpha" : "aft_test_parked_in_beta"
                #expect(f.contains(parkedIn) && f.contains("parked_main"), "\(record.name): \(f)")
            case .syscall, .parked:
                #expect(!f.isEmpty, "\(record.name): no frames from sp and pc")
            case .none:
                #expect(f.isEmpty)
            case .crash:
                break
            }
        }

        let modules = try #require(json["modules"] as? [[String: Any]])
        #expect(modules.count == s.report.images.count)
        let main = try #require(s.report.images.first { $0.isMainExecutable })
        let first = try #require(modules[json["main_module"] as? Int ?? -1] as [String: Any]?)
        #expect(first["filename"] as? String == (main.path as NSString).lastPathComponent)
        #expect(first["code_id"] as? String == main.buildID)
        #expect(first["debug_id"] as? String == Self.debugID(main.buildID))
        // The build id as binutils reads it from the file.
        if let readelf = Tool.which("readelf") {
            let notes = try MinidumpReaders.run(readelf, ["-n", main.path], timeout: 60).stdout
            #expect(notes.contains("Build ID: \(main.buildID)"))
        }
        // Every image, found by its base address: a GNU build id gives both ids; a text hash
        // (a library of another test, loaded without one) gives none, which rust-minidump shows
        // as an empty code id and an all-zero debug id.
        let byBase = Dictionary(modules.map { ($0["base_addr"] as? String ?? "", $0) }) { a, _ in a }
        for image in s.report.images {
            let module = try #require(byBase[Hex.address(image.start)], "\(image.path)")
            let code = module["code_id"] as? String ?? "", debug = module["debug_id"] as? String ?? ""
            if !image.isBuildIDTextHash && !image.buildID.isEmpty {
                #expect(code == image.buildID, "\(image.path)")
                #expect(debug == Self.debugID(image.buildID), "\(image.path)")
            } else {
                #expect(code.isEmpty && debug.allSatisfy { $0 == "0" }, "\(image.path): \(code) \(debug)")
            }
        }
    }

    @Test("LLDB: every thread, the crash's stop reason, symbolicated frames, images by build id")
    func lldb() throws {
        guard let readers = try MinidumpReaders.require() else { return }
        let s = try Self.snapshot()
        let dump = Self.temporaryFile("lldb.dmp")
        try TestSupport.write(MinidumpWriter.write(s.report), to: dump)
        defer { unlink(dump) }
        let out = try MinidumpReaders.lldb(readers, dump: dump, commands: ["thread list", "bt all", "image list"])
        let lines = out.split(separator: "\n").map(String.init)
        let listed = lines.filter { $0.contains("thread #") && $0.contains("tid = ") }
        #expect(listed.count == s.records.count, "\(out)")
        let crashTID = "tid = \(s.fault.thread_id),"
        #expect(
            listed.contains { $0.hasPrefix("* thread #1: \(crashTID)") && $0.contains("stop reason = signal SIGSEGV") },
            "\(out)")
        #expect(listed.contains { $0.contains(crashTID) && $0.contains("aft_test_crash_in_named_function") })
        // bt all: each thread's block, from "thread #N" to the next.
        var blocks: [[String]] = []
        for line in lines.drop(while: { $0 != "(lldb) bt all" }).dropFirst() {
            if line.hasPrefix("(lldb)") { break }
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("* thread #")
                || line.trimmingCharacters(in: .whitespaces).hasPrefix("thread #")
            {
                blocks.append([])
            }
            if !blocks.isEmpty { blocks[blocks.count - 1].append(line) }
        }
        try #require(blocks.count == s.report.threads.count, "\(out)")
        for (block, t) in zip(blocks, s.report.threads) {
            let text = block.joined(separator: "\n")
            switch t.contextSource {
            case .crash:
                #expect(text.contains("aft_test_crash_in_named_function") && text.contains("crasher_main"), "\(text)")
            case .signal:
                let parkedIn = t.name == "md-alpha" ? "aft_test_parked_in_alpha" : "aft_test_parked_in_beta"
                #expect(text.contains(parkedIn) && text.contains("parked_main"), "\(text)")
            case .syscall:
                #expect(text.contains("libc.so.6`syscall"), "\(text)")
            case .parked:
                #expect(text.contains("`"), "\(text)")
            case .none:
                #expect(!text.contains("`"), "\(text)")
            }
        }
        let main = try #require(s.report.images.first { $0.isMainExecutable })
        let uuid = main.buildID.uppercased()
        let image = lines.first { $0.hasSuffix(main.path + " ") || $0.hasSuffix(main.path) }
        #expect(image?.replacingOccurrences(of: "-", with: "").contains(uuid) == true, "\(out)")
    }
}
