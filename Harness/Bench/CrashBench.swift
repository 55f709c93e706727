import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CHarnessFaults
import HarnessSupport
import CSignalShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath-bench crash`: time inside the handler (signal entry to committed file) at several
/// stack depths, with and without fsync; the crash file's size; and crash-to-exit time with
/// Aftermath, with the Swift runtime's backtracer alone, and with neither.
enum CrashBench {
    static func run(_ args: [String]) {
        let runs = args.firstIndex(of: "--runs").flatMap { Int(args[$0 + 1]) } ?? 15
        let root = NSTemporaryDirectory() + "aftermath-bench-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        if let threads = args.firstIndex(of: "--threads").flatMap({ Int(args[$0 + 1]) }) {
            ThreadsCrashBench.run(threads: threads, runs: runs, root: root)
            return
        }
        print("Crash handler, medians of \(runs) crashes each (child processes, SWIFT_BACKTRACE=enable=no)")
        print("depth  frames  file size   handler (no fsync)  handler (fsync)")
        for depth in [10, 64, 1000, 4000] {
            var row: [String: (time: Double, frames: Int, size: Int)] = [:]
            for fsync in [false, true] {
                var times: [Double] = []
                var frames = 0, size = 0
                for i in 0..<runs {
                    let dir = "\(root)/d\(depth)-\(fsync)-\(i)"
                    let values = benchChild(
                        ["crash-child", "--depth", "\(depth)", "--dir", dir, "--fsync", fsync ? "1" : "0"],
                        environment: ["SWIFT_BACKTRACE": "enable=no"]
                    ).values
                    if values.count >= 2 { times.append(Double(values[1]) / 1000) }
                    if let (f, s) = crashFile(in: dir + "/crashes") {
                        frames = f
                        size = s
                    }
                    try? FileManager.default.removeItem(atPath: dir)
                }
                row[fsync ? "fsync" : "plain"] = (Stats.median(times), frames, size)
            }
            let plain = row["plain"]!, synced = row["fsync"]!
            print(
                String(
                    format: "%5d  %6d  %7d B  %13.1f µs  %12.1f µs", depth, plain.frames, plain.size, plain.time,
                    synced.time))
        }
        print("targets without fsync: 150 µs at 64 frames, 500 µs at 4,000 frames")
        print("")
        print("Crash to exit (fault to waitpid in the parent), depth 64, medians of \(runs)")
        let modes: [(String, [String], [String: String])] = [
            ("neither", ["--no-aftermath"], ["SWIFT_BACKTRACE": "enable=no"]),
            ("Aftermath", [], ["SWIFT_BACKTRACE": "enable=no"]),
            ("Swift backtracer alone", ["--no-aftermath"], ["SWIFT_BACKTRACE": "enable=yes,interactive=no"]),
            ("Aftermath + Swift backtracer", [], ["SWIFT_BACKTRACE": "enable=yes,interactive=no"]),
        ]
        for (name, extra, env) in modes {
            var times: [Double] = []
            for i in 0..<runs {
                let dir = "\(root)/exit-\(i)"
                let child = benchChild(
                    ["crash-child", "--depth", "64", "--dir", dir, "--fsync", "0"] + extra, environment: env)
                if let start = child.values.first, let end = child.exitedAt { times.append(Double(end - start) / 1e6) }
                try? FileManager.default.removeItem(atPath: dir)
            }
            print(String(format: "  %-30@ %8.2f ms", name as NSString, Stats.median(times)))
        }
    }

    /// Frame count and size of the one crash file in dir.
    static func crashFile(in dir: String) -> (Int, Int)? {
        guard
            let name = try? FileManager.default.contentsOfDirectory(atPath: dir).first(where: {
                FileHeader.holdsCrashReport(dir + "/" + $0)
            })
        else { return nil }
        let collection = ReportCollector(directory: ReportDirectory(root: (dir as NSString).deletingLastPathComponent))
            .collect(moveRejected: false)
        let size = (try? FileManager.default.attributesOfItem(atPath: dir + "/" + name)[.size] as? Int) ?? 0
        return (collection.reports.first?.crash?.frames.count ?? 0, size)
    }

    /// The crashing child: fd 3 receives its fault time (monotonic ns), then the handler's duration.
    static func child(_ args: [String]) {
        let depth = args.firstIndex(of: "--depth").flatMap { Int(args[$0 + 1]) } ?? 64
        let dir = args.firstIndex(of: "--dir").map { args[$0 + 1] } ?? "/tmp/aftermath-bench-child"
        let fsync = args.firstIndex(of: "--fsync").map { args[$0 + 1] == "1" } ?? false
        let workers = args.firstIndex(of: "--workers").flatMap { Int32(args[$0 + 1]) } ?? 0
        if !args.contains("--no-aftermath") {
            var config = Aftermath.Configuration(
                serviceName: "bench", serviceVersion: "1.0", exporter: InMemoryExporter(),
                reportsDirectory: dir, fsyncReports: fsync)
            config.handlerTimingFileDescriptor = 3
            do { try Aftermath.start(config) } catch { exit(3) }
            // The handler as an app meets it: after start's background work (every image's
            // build id, the delivery of pending reports) has finished.
            aft_install_complete()
            // And its end: the delivery thread gives memory back and ends after the delivery,
            // work that would run beside the handler, on its cores.
            AppWork.waitForDeliveryEnd(pollMicroseconds: 1000, maxPolls: 2000)
            // Then the app's own work for a while, as between its launch and a crash: nothing of
            // Aftermath's is touched meanwhile.
            AppWork.busy(milliseconds: 20)
        }
        if workers > 0, aft_test_start_workers(AFT_TEST_WORKER_PARKED, workers) != 0 { exit(4) }
        if args.contains("--unanswering"), aft_test_start_traced_worker(1) != 0 { exit(5) }
        // Frames already on the stack: main, the bench's dispatch, libc start; the fault adds
        // two (Fault.trigger and its body). Recurse the rest.
        var sink = 0
        _ = recurse(max(1, depth - 6), &sink)
    }

    /// Real recursion: each frame passes the address of its own local down, so the compiler
    /// can neither turn it into a loop nor drop the frames.
    @inline(never)
    static func recurse(_ n: Int, _ sink: UnsafeMutablePointer<Int>) -> Int {
        var local = n
        let result: Int
        if n <= 1 {
            var now = Monotonic.nanoseconds()
            _ = write(3, &now, 8)
            result = Fault.nullDereference.trigger(n)
        } else {
            result = recurse(n - 1, &local)
        }
        sink.pointee &+= local
        return result &+ local
    }
}
