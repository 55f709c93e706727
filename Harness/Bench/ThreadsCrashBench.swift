import Aftermath
import AftermathNextLaunch
import CHarnessFaults
import HarnessSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath-bench crash --threads N`: a crash with N threads (N - 1 workers parked in read),
/// every thread captured: the handler's time (fault to committed file), how long the other
/// threads were held and unwound, the crash file's and the minidump's size; then the bound:
/// crash to exit with one thread that never answers, against the same child without Aftermath.
enum ThreadsCrashBench {
    static func run(threads: Int, runs: Int, root: String) {
        let workers = max(0, threads - 1)
        print("Every thread at a crash: \(threads) threads, medians of \(runs) crashes (SWIFT_BACKTRACE=enable=no)")
        var handler: [Double] = [], capture: [Double] = [], unwind: [Double] = []
        var fileSizes: [Double] = [], dumpSizes: [Double] = [], recorded: [Double] = []
        for i in 0..<runs {
            let dir = "\(root)/threads-\(i)"
            let values = benchChild(
                ["crash-child", "--depth", "64", "--dir", dir, "--fsync", "0", "--workers", "\(workers)"],
                environment: ["SWIFT_BACKTRACE": "enable=no"]
            ).values
            if values.count >= 2 { handler.append(Double(values[1]) / 1e6) }
            if let crash = ReportCollector(directory: ReportDirectory(root: dir)).collect(moveRejected: false)
                .reports.first?.crash, let info = crash.threadCapture
            {
                capture.append(Double(info.captureNs) / 1e6)
                unwind.append(Double(info.unwindNs) / 1e6)
                recorded.append(Double(crash.threads.count))
                dumpSizes.append(Double(MinidumpWriter.write(crash).count))
                if let name = try? FileManager.default.contentsOfDirectory(atPath: dir + "/crashes").first(where: {
                    FileHeader.holdsCrashReport(dir + "/crashes/" + $0)
                }),
                    let size = try? FileManager.default.attributesOfItem(atPath: dir + "/crashes/" + name)[.size]
                        as? Int
                {
                    fileSizes.append(Double(size))
                }
            }
            try? FileManager.default.removeItem(atPath: dir)
        }
        print(String(format: "  threads recorded            %8.0f", Stats.median(recorded)))
        print(
            String(
                format: "  handler, fault to commit    %8.2f ms   (budget 10 ms at 64 threads)", Stats.median(handler)))
        print(String(format: "    others paused, answered   %8.2f ms", Stats.median(capture)))
        print(String(format: "    others unwound, copied    %8.2f ms", Stats.median(unwind)))
        print(String(format: "  crash file                 %8.0f KiB  (budget 3 MiB)", Stats.median(fileSizes) / 1024))
        print(String(format: "  minidump                   %8.0f KiB  (budget 3 MiB)", Stats.median(dumpSizes) / 1024))
        print("")
        print("Crash to exit with a thread that never answers (fault to waitpid), medians of \(runs)")
        var added: [Double] = []
        for (name, extra) in [("without Aftermath", ["--no-aftermath"]), ("Aftermath", [])] {
            var times: [Double] = []
            for i in 0..<runs {
                let dir = "\(root)/bound-\(i)"
                let child = benchChild(
                    ["crash-child", "--depth", "64", "--dir", dir, "--fsync", "0", "--unanswering"] + extra,
                    environment: ["SWIFT_BACKTRACE": "enable=no"])
                if let start = child.values.first, let end = child.exitedAt { times.append(Double(end - start) / 1e6) }
                try? FileManager.default.removeItem(atPath: dir)
            }
            print(String(format: "  %-20@ %8.2f ms", name as NSString, Stats.median(times)))
            added.append(Stats.median(times))
        }
        print(String(format: "  added by Aftermath   %8.2f ms   (bound 150 ms)", added[1] - added[0]))
    }
}
