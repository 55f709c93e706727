import Aftermath
import AftermathNextLaunch
import AftermathSymbolication
import AftermathTesting
import CHarnessFaults
import Foundation
import Testing
import TestSupport

/// A hang's other threads are read from /proc without a signal (a signal would cut their sleep
/// short): the kernel gives their sp and pc, not their frame pointer. A thread asleep in a read
/// whose caller's unset locals still hold the frame records of a deeper call made a moment
/// before, as a server's idle loop does, must show its real callers, not those stale records.
@Suite("Idle threads of a hang")
struct IdleThreadUnwindTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    /// The caller whose locals cover the stale records: a fixed frame, whose prologue says
    /// where its record is, or one sized at run time, whose record is the one its caller's
    /// direct call left.
    enum Caller: String, CaseIterable, Sendable {
        case fixedFrame = "aft_test_stale_blocked_read"
        case sizedAtRunTime = "aft_test_stale_vla_read"
    }

    @Test(
        "A thread asleep in read(2) over stale frame records: exactly its callers, in order",
        arguments: Caller.allCases)
    func staleRecordsBelowTheCaller(caller: Caller) async throws {
        let directory: String = TestSupport.childDirectory("idle-thread-unwind-\(caller.rawValue)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let mode: Int32 = caller == .fixedFrame ? 0 : AFT_TEST_STALE_VLA
        await #expect(processExitsWith: .success) { [directory = directory as String, mode = mode as Int32] in
            // An exporter that refuses: the finished hang stays on disk for the parent to read.
            let refusing = InMemoryExporter()
            refusing.failNext(Int.max)
            var config = Aftermath.Configuration(
                serviceName: "idle-thread-test", serviceVersion: "1", exporter: refusing,
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            config.watchConcurrencyPool = false
            config.hangHeartbeat = .manual
            do { try Aftermath.start(config) } catch { exit(10) }
            guard aft_test_start_stale_reader(mode) == 0 else { exit(11) }
            HangCaptureOverlapTests.mainHang(milliseconds: 1_500)
            exit(0)
        }
        let hangs = try HangCaptureOverlapTests.hangs(directory)
        let hang = try #require(hangs.first { $0.targetName == "main" }, "\(hangs.map(\.targetName))")
        let reader = try #require(hang.threads.first { $0.name == "stale-reader" }, "\(hang.threads.map(\.name))")
        #expect(reader.contextSource == .syscall && reader.missingContext == .asleep, "read from /proc, not signalled")
        var asHang = hang
        asHang.frames = reader.frames
        let functions = HangCaptureOverlapTests.functions(asHang)
        // read, its caller, the thread's function, Aftermath's thread trampoline: no stale frame
        // (aft_test_stale_depth) and nothing else between them.
        let expected = ["read", caller.rawValue, "aft_test_stale_reader_main", "aft_thread_trampoline"]
        #expect(functions.count >= 4, "\(functions)")
        #expect(zip(functions, expected).allSatisfy { $0.contains($1) }, "\(functions)")
        #expect(functions.first { $0.contains("aft_test_stale_depth") } == nil, "a stale frame: \(functions)")
    }

    @Test("At a crash, the same thread blocking every signal: unwound at the next launch from /proc's sp and pc")
    func staleRecordsAtACrash() async throws {
        let directory: String = TestSupport.childDirectory("idle-thread-crash")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            guard aft_test_start_stale_reader(AFT_TEST_STALE_BLOCK_SIGNALS) == 0 else { _exit(11) }
            usleep(200_000)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let crash = try #require(EveryThreadTests.crashes(directory).first)
        let reader = try #require(crash.threads.first { $0.name == "stale-reader" }, "\(crash.threads.map(\.name))")
        #expect(reader.contextSource == .syscall && reader.missingContext == .blocksSignal)
        let functions = reader.frames.enumerated().compactMap { index, pc -> String? in
            guard let image = crash.images.first(where: { pc >= $0.start && pc < $0.end }) else { return nil }
            return Symbolicator().symbolicate(
                address: pc, imagePath: image.path, loadAddress: image.start, isReturnAddress: index > 0)?.demangled
        }
        let how = "\(functions), unwound by \(reader.unwinder)"
        #expect(functions.first { $0.contains("aft_test_stale_blocked_read") } != nil, "\(how)")
        #expect(functions.first { $0.contains("aft_test_stale_reader_main") } != nil, "\(how)")
        #expect(functions.first { $0.contains("aft_test_stale_depth") } == nil, "a stale frame: \(how)")
    }
    #endif
}
