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
/// with what the first run left). And how deep start's frames reach into the caller's stack:
/// the deepest page a call reaches there stays the app's, dirty, for the process's life.
enum StartBench {
    static func run(_ args: [String]) {
        let runs = args.firstIndex(of: "--runs").flatMap { Int(args[$0 + 1]) } ?? 21
        let root = NSTemporaryDirectory() + "aftermath-start-bench-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        var first: [Double] = [], later: [Double] = [], reached: [Double] = [], delivered: [Double] = []
        for i in 0..<runs {
            for launch in 0..<2 {
                let values = benchChild(
                    ["start-child", "--dir", "\(root)/\(i)"], environment: ["SWIFT_BACKTRACE": "enable=no"]
                ).values
                if let ns = values.first {
                    launch == 0 ? first.append(Double(ns) / 1e6) : later.append(Double(ns) / 1e6)
                }
                if launch == 1, values.count > 1 { reached.append(Double(values[1]) / 1024) }
                if launch == 1, values.count > 2 { delivered.append(Double(values[2]) / 1e6) }
            }
        }
        for (label, times) in [("first launch", first), ("later launch", later)] {
            let sorted = times.sorted()
            print(
                String(
                    format: "Aftermath.start, %@: median %.2f ms, min %.2f ms, max %.2f ms (%d fresh processes)",
                    label, Stats.median(times), sorted.first ?? .nan, sorted.last ?? .nan, times.count))
        }
        print(
            String(
                format:
                    "Aftermath.start, later launch: the caller's stack reached %.1f KiB deep (median; max %.1f KiB)",
                Stats.median(reached), reached.max() ?? .nan))
        print(
            String(
                format:
                    "Aftermath.start, later launch: its delivery thread gone %.1f ms after start (median; max %.1f ms)",
                Stats.median(delivered), delivered.max() ?? .nan))
    }

    static func child(_ args: [String]) {
        let dir = args.firstIndex(of: "--dir").map { args[$0 + 1] } ?? "/tmp/aftermath-start-bench-child"
        let config = Aftermath.Configuration(
            serviceName: "bench", serviceVersion: "1.0", exporter: InMemoryExporter(),
            reportsDirectory: dir)
        let top = aft_test_paint_stack(64 * 1024)
        let start = Monotonic.nanoseconds()
        do { try Aftermath.start(config) } catch { exit(3) }
        var elapsed = Monotonic.nanoseconds() - start
        var depth = UInt64(aft_test_stack_reached(top, 64 * 1024))
        // The app goes on with its own launch meanwhile, busy on its thread for 20 ms, as apps
        // are after start: threads start's delivery creates then wait for a core.
        AppWork.busy(milliseconds: 20)
        AppWork.waitForDeliveryEnd(pollMicroseconds: 200, maxPolls: 25_000)
        var gone = Monotonic.nanoseconds() - start
        _ = write(3, &elapsed, 8)
        _ = write(3, &depth, 8)
        _ = write(3, &gone, 8)
        exit(0)
    }
}
