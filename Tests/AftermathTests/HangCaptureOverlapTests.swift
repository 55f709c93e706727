import Aftermath
import AftermathNextLaunch
import AftermathSymbolication
import AftermathTesting
import CHarnessFaults
import Foundation
import Testing
import TestSupport

/// A hang capture's handler that is still running when the watchdog has given up on it and
/// moves on to another target's hang: the later hang must keep its own thread's stack.
@Suite("Hang captures that overlap")
struct HangCaptureOverlapTests {
    /// The hang files in directory, decoded.
    static func hangs(_ directory: String) throws -> [HangReport] {
        let dir = directory + "/hangs"
        return try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".hang") }.map {
            try HangReport(
                file: ReportFile.decode(Array(try #require(FileManager.default.contents(atPath: dir + "/" + $0)))))
        }
    }

    /// In a child with manual heartbeats: 300 ms of beats, the main thread stalled in
    /// aft_test_stall_in_main_function for `milliseconds`, then 300 ms of beats again.
    static func mainHang(milliseconds: UInt32) {
        for _ in 0..<30 {
            Aftermath.heartbeat()
            usleep(10_000)
        }
        aft_test_stall_in_main_function(milliseconds)
        for _ in 0..<30 {
            Aftermath.heartbeat()
            usleep(10_000)
        }
    }

    /// The demangled names of the hang's frames that symbolicate.
    static func functions(_ hang: HangReport) -> [String] {
        hang.frames.enumerated().compactMap { index, pc in
            guard let image = hang.images.first(where: { pc >= $0.start && pc < $0.end }) else { return nil }
            return Symbolicator().symbolicate(
                address: pc, imagePath: image.path, loadAddress: image.start, isReturnAddress: index > 0)?.demangled
        }
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("A capture handler still running when a later hang is captured: the later hang keeps its own stack")
    func slowHandlerThenAnotherHang() async throws {
        let directory: String = TestSupport.childDirectory("hang-capture-overlap")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            // An exporter that refuses: the finished hangs stay on disk for the parent to read.
            let refusing = InMemoryExporter()
            refusing.failNext(Int.max)
            var config = Aftermath.Configuration(
                serviceName: "hang-test", serviceVersion: "1", exporter: refusing,
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            config.watchConcurrencyPool = false
            config.hangHeartbeat = .manual
            config.hangOtherThreads = false
            do { try Aftermath.start(config) } catch { exit(10) }
            // The main thread's capture outlives the watchdog's wait (200 ms, then 1 s more),
            // and is still running when the worker's hang is captured.
            aft_test_slow_hang_captures(1_800_000_000)
            let worker = Thread {
                guard let watch = try? Aftermath.watchThread(named: "overlap-worker", threshold: .milliseconds(250))
                else { exit(11) }
                for _ in 0..<30 {
                    watch.beat()
                    usleep(20_000)
                }
                aft_test_stall_in_worker_function(3_500)
                watch.beat()
                watch.stop()
            }
            worker.start()
            Self.mainHang(milliseconds: 4_200)
            exit(0)
        }
        let hangs = try Self.hangs(directory)
        let main = try #require(hangs.first { $0.targetName == "main" }, "\(hangs.map(\.targetName))")
        let worker = try #require(hangs.first { $0.targetName == "overlap-worker" }, "\(hangs.map(\.targetName))")
        let mainFunctions = Self.functions(main), workerFunctions = Self.functions(worker)
        // The main thread's own hang is read from /proc (its handler is asleep on the signal
        // stack then): it is there, whatever its frames.
        #expect(main.captureMethod == .proc && !main.frames.isEmpty, "\(mainFunctions)")
        #expect(
            !workerFunctions.contains { $0.contains("aft_test_stall_in_main_function") },
            "the worker's hang has the main thread's stack: \(workerFunctions)")
        #expect(workerFunctions.contains { $0.contains("aft_test_stall_in_worker_function") }, "\(workerFunctions)")
    }
    #endif
}
