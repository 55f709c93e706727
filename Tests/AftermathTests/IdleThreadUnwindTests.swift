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
    @Test("A thread asleep in read(2) over stale frame records: its real callers, no stale frame")
    func staleRecordsBelowTheCaller() async throws {
        let directory: String = TestSupport.childDirectory("idle-thread-unwind")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            // An exporter that refuses: the finished hang stays on disk for the parent to read.
            let refusing = InMemoryExporter()
            refusing.failNext(Int.max)
            var config = Aftermath.Configuration(
                serviceName: "idle-thread-test", serviceVersion: "1", exporter: refusing,
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            config.watchConcurrencyPool = false
            config.hangHeartbeat = .manual
            do { try Aftermath.start(config) } catch { exit(10) }
            guard aft_test_start_stale_reader(0) == 0 else { exit(11) }
            for _ in 0..<30 {
                Aftermath.heartbeat()
                usleep(10_000)
            }
            aft_test_stall_in_main_function(1_500)
            for _ in 0..<30 {
                Aftermath.heartbeat()
                usleep(10_000)
            }
            exit(0)
        }
        let hangs = try HangCaptureOverlapTests.hangs(directory)
        let hang = try #require(hangs.first { $0.targetName == "main" }, "\(hangs.map(\.targetName))")
        let reader = try #require(hang.threads.first { $0.name == "stale-reader" }, "\(hang.threads.map(\.name))")
        #expect(reader.contextSource == .syscall && reader.missingContext == .asleep, "read from /proc, not signalled")
        var asHang = hang
        asHang.frames = reader.frames
        let functions = HangCaptureOverlapTests.functions(asHang)
        #expect(functions.first { $0.contains("aft_test_stale_blocked_read") } != nil, "\(functions)")
        #expect(functions.first { $0.contains("aft_test_stale_reader_main") } != nil, "\(functions)")
        #expect(functions.first { $0.contains("aft_test_stale_depth") } == nil, "a stale frame: \(functions)")
        // The reader's frames in order: read, its caller, the thread's function.
        let order = ["aft_test_stale_blocked_read", "aft_test_stale_reader_main"].compactMap { name in
            functions.firstIndex { $0.contains(name) }
        }
        #expect(order.count == 2 && order[0] < order[1], "\(functions)")
    }

    @Test("At a crash, the same thread blocking every signal: unwound at the next launch from /proc's sp and pc")
    func staleRecordsAtACrash() async throws {
        let directory: String = TestSupport.childDirectory("idle-thread-crash")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            guard aft_test_start_stale_reader(1) == 0 else { _exit(11) }
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
        #expect(functions.first { $0.contains("aft_test_stale_blocked_read") } != nil, "\(functions)")
        #expect(functions.first { $0.contains("aft_test_stale_reader_main") } != nil, "\(functions)")
        #expect(functions.first { $0.contains("aft_test_stale_depth") } == nil, "a stale frame: \(functions)")
    }
    #endif
}
