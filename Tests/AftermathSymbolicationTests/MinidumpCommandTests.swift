import AftermathNextLaunch
import CSignalShim
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath show` with every thread of a crash, and `aftermath minidump`, run as a subprocess
/// on a version-2 crash file made from the real handler's version-1 fixture plus thread records.
@Suite(.serialized) struct MinidumpCommandTests {
    static let crashID = "0d9a3b7e-5d7c-4b71-9f3b-1c2d3e4f5a6b"

    /// A reports directory with one crash: the fixture's, with three thread records (the
    /// crashed one, one with sp and pc only, one without a context) and stack memory.
    static func reportsDirectory(threads: Bool = true) throws -> (root: String, file: String, report: CrashReport) {
        let root = try Tool.temporaryDirectory("minidump-cli")
        for sub in ["crashes", "hangs", "runs", "errors", "rejected"] {
            try FileManager.default.createDirectory(
                atPath: "\(root)/\(sub)", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let v1 = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        var bytes = v1
        if threads {
            let base = try ReportFile.decode(v1).crashReport()
            let crashed = CrashFileBuilder.thread(
                id: base.threadID, name: base.threadName, flags: UInt32(AFT_THREAD_CRASHED),
                source: UInt32(AFT_THREAD_CONTEXT_CRASH), state: "R", pc: base.pc, sp: base.sp,
                registers: base.registers, frames: 1)
            // The other thread's stack: the crash's own frames from the second on.
            let others = Array(base.frames.dropFirst())
            let blocked = CrashFileBuilder.thread(
                id: base.threadID + 1, name: "blocked", source: UInt32(AFT_THREAD_CONTEXT_SYSCALL),
                why: UInt32(AFT_THREAD_WHY_BLOCKS_SIGNAL), pc: others.first ?? 0, sp: base.sp + 0x1000,
                frames: others.count)
            let silent = CrashFileBuilder.thread(
                id: base.threadID + 2, name: "silent", source: UInt32(AFT_THREAD_CONTEXT_NONE),
                why: UInt32(AFT_THREAD_WHY_NO_ANSWER), state: "D")
            bytes = try CrashFileBuilder.adding(
                threads: [crashed, blocked, silent], threadFrames: [base.pc] + others,
                stacks: [
                    .init(threadID: base.threadID, start: base.sp - 128, bytes: [UInt8](repeating: 0x5A, count: 4096))
                ],
                to: v1)
        }
        let file = "\(root)/crashes/\(crashID).crash"
        try TestSupport.write(bytes, to: file)
        try TestSupport.write(
            try TestSupport.fixture("v1/hang-unfinished-killed.hang"),
            to: "\(root)/hangs/5c0ffee0-0000-4000-8000-000000000001.hang")
        return (root, file, try ReportFile.decode(bytes).crashReport())
    }

    struct View: Decodable {
        struct Frame: Decodable {
            var address: String
            var function: String?
        }
        struct ThreadEntry: Decodable {
            var id: UInt64
            var name: String
            var crashed: Bool
            var state: String
            var context: String
            var missingContext: String?
            var frames: [Frame]
        }
        var frames: [Frame]
        var threads: [ThreadEntry]?
    }

    @Test("show: every thread, the crashing one first, with state, context and symbolicated frames")
    func showThreads() throws {
        let (dir, _, report) = try Self.reportsDirectory()
        let json = try Tool.aftermath(["show", "0d9a", "--dir", dir, "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let view = try JSONDecoder().decode(View.self, from: Data(json.stdout.utf8))
        let threads = try #require(view.threads)
        #expect(threads.map(\.id) == [report.threadID, report.threadID + 1, report.threadID + 2])
        #expect(threads.map(\.crashed) == [true, false, false])
        #expect(threads.map(\.state) == ["R", "S", "D"])
        #expect(threads.map(\.context) == ["crash", "syscall", "none"])
        #expect(threads.map(\.missingContext) == [nil, "blocks_signal", "no_answer"])
        // The crashing thread's frames are the crash's; the other's, symbolicated the same way.
        #expect(threads[0].frames.map(\.address) == view.frames.map(\.address))
        #expect(threads[1].frames.map(\.address) == Array(view.frames.dropFirst().map(\.address)))
        #expect(threads[1].frames.map(\.function) == Array(view.frames.dropFirst().map(\.function)))
        #expect(threads[2].frames.isEmpty)

        let text = try Tool.aftermath(["show", "0d9a", "--dir", dir], environment: ["NO_COLOR": "1"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("state R, registers from its crash"))
        #expect(
            text.stdout.contains(
                "Thread \(report.threadID + 1) \"blocked\" (state S, sp and pc only, from /proc: it blocks every capture signal"
            ))
        #expect(
            text.stdout.contains(
                "Thread \(report.threadID + 2) \"silent\" (state D, no registers: no answer by the deadline):"))
        let crashedOnly = try Tool.aftermath(["show", "0d9a", "--dir", dir, "--threads", "crashed"])
        #expect(crashedOnly.status == 0 && !crashedOnly.stdout.contains("\"blocked\""))
        #expect(crashedOnly.stdout.contains("Crashed thread \(report.threadID)"))
        let crashedJSON = try Tool.aftermath(["show", "0d9a", "--dir", dir, "--threads=crashed", "--json"])
        let only = try JSONDecoder().decode(View.self, from: Data(crashedJSON.stdout.utf8))
        #expect(only.threads?.map(\.id) == [report.threadID])
    }

    @Test("show: a version-1 crash has no thread list")
    func showVersionOne() throws {
        let (dir, _, _) = try Self.reportsDirectory(threads: false)
        let json = try Tool.aftermath(["show", "0d9a", "--dir", dir, "--json"])
        let view = try JSONDecoder().decode(View.self, from: Data(json.stdout.utf8))
        #expect(view.threads == nil && !view.frames.isEmpty)
    }

    @Test("minidump -o: the writer's bytes, mode 0600; an existing file or a link is refused")
    func minidump() throws {
        let (dir, _, report) = try Self.reportsDirectory()
        let out = "\(dir)/out.dmp"
        let r = try Tool.aftermath(["minidump", Self.crashID, "--dir", dir, "-o", out])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("3 threads"))
        let written = Array(try Data(contentsOf: URL(fileURLWithPath: out)))
        #expect(written == MinidumpWriter.write(report))
        var st = stat()
        #expect(stat(out, &st) == 0 && st.st_mode & 0o777 == 0o600)

        let again = try Tool.aftermath(["minidump", Self.crashID, "--dir", dir, "-o", out])
        #expect(again.status == 1 && again.stderr.contains("already exists"))
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: out))) == written)

        let target = "\(dir)/target", link = "\(dir)/link.dmp"
        #expect(symlink(target, link) == 0)
        let linked = try Tool.aftermath(["minidump", Self.crashID, "--dir", dir, "-o", link])
        #expect(linked.status == 1 && linked.stderr.contains("symbolic link"), "\(linked.stderr)")
        #expect(access(target, F_OK) != 0, "the link was followed")
    }

    @Test("minidump without -o: ID.dmp in the current directory; a hang or an unknown id is refused")
    func minidumpDefaultPath() throws {
        let (dir, _, _) = try Self.reportsDirectory(threads: false)
        let work = try Tool.temporaryDirectory("minidump-cwd")
        let r = try Tool.run(
            "/bin/sh", ["-c", "cd \"$1\" && exec \"$2\" minidump 0d9a --dir \"$3\"", "sh", work, Tool.aftermath, dir])
        #expect(r.status == 0, "\(r.stderr)")
        // The id `list` shows.
        let listing = try Tool.aftermath(["list", "--dir", dir, "--json"]).stdout
        struct Listing: Decodable { var reports: [[String: String?]] }
        let crash = try JSONDecoder().decode(Listing.self, from: Data(listing.utf8)).reports.first {
            $0["kind"] == "crash"
        }
        let listedID: String? = crash?["id"] ?? nil  // outside the macro: Swift 6.0's expansion of ?? differs
        let id = try #require(listedID)
        let path = "\(work)/\(id).dmp"
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes.prefix(4) == [0x4D, 0x44, 0x4D, 0x50])
        #expect(r.stdout.contains("1 threads"))

        let hang = try Tool.aftermath([
            "minidump", "5c0ffee0-0000-4000-8000-000000000001", "--dir", dir, "-o", "\(work)/h",
        ])
        #expect(hang.status == 1 && hang.stderr.contains("not a crash"), "\(hang.stderr)")
        #expect(access("\(work)/h", F_OK) != 0)
        let unknown = try Tool.aftermath(["minidump", "ffff", "--dir", dir, "-o", "\(work)/u"])
        #expect(unknown.status == 1 && unknown.stderr.contains("no report matches"))
    }
}
