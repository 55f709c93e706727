import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CHarnessFaults
import HarnessSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath-bench start`: how long `Aftermath.start` holds the calling thread (fresh child
/// processes, delivery in the background as by default): on a first launch (an empty reports
/// directory: its directories are created) and on the launch after it (the same directory,
/// with what the first run left).
enum StartBench {
    static func run(_ args: [String]) {
        let runs = args.firstIndex(of: "--runs").flatMap { Int(args[$0 + 1]) } ?? 21
        let root = NSTemporaryDirectory() + "aftermath-start-bench-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        var first: [Double] = [], later: [Double] = []
        for i in 0..<runs {
            for launch in 0..<2 {
                let values = benchChild(
                    ["start-child", "--dir", "\(root)/\(i)"], environment: ["SWIFT_BACKTRACE": "enable=no"]
                ).values
                if let ns = values.first {
                    launch == 0 ? first.append(Double(ns) / 1e6) : later.append(Double(ns) / 1e6)
                }
            }
        }
        for (label, times) in [("first launch", first), ("later launch", later)] {
            let sorted = times.sorted()
            print(
                String(
                    format: "Aftermath.start, %@: median %.2f ms, min %.2f ms, max %.2f ms (%d fresh processes)",
                    label, Stats.median(times), sorted.first ?? .nan, sorted.last ?? .nan, times.count))
        }
    }

    static func child(_ args: [String]) {
        let dir = args.firstIndex(of: "--dir").map { args[$0 + 1] } ?? "/tmp/aftermath-start-bench-child"
        let config = Aftermath.Configuration(
            serviceName: "bench", serviceVersion: "1.0", exporter: InMemoryExporter(),
            reportsDirectory: dir)
        let start = Monotonic.nanoseconds()
        do { try Aftermath.start(config) } catch { exit(3) }
        var elapsed = Monotonic.nanoseconds() - start
        _ = write(3, &elapsed, 8)
        exit(0)
    }
}
