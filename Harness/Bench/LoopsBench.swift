import Aftermath
import AftermathTesting
import CSignalShim
import Dispatch
import Foundation
import HarnessSupport
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath-bench loops [--window S] [--stalls N]`: what watching servers' threads costs.
///   8 watched idle event loops (built as SwiftNIO's): the watchdog's and pinger's CPU (% of
///   one core, budget 0.1 %) and each loop's wake-ups a second (budget 1); 8 busy loops doing
///   short jobs: pings a second per loop (budget 10); event-loop stalls and pool starvations at
///   random phases: detection latency after the onset (budget threshold + 175 ms: the watchdog's
///   125 ms look at idle loops, and a loop's ping held 50 ms until its thread is seen still
///   there, which a loop that was shut down would not be) and how long
///   the stalled loop is stopped for its capture (budget 200 us).
enum LoopsBench {
    static func run(_ arguments: [String]) {
        var window = 20.0, stalls = 10
        var i = 0
        while i < arguments.count {
            if arguments[i] == "--window", i + 1 < arguments.count, let v = Double(arguments[i + 1]) {
                window = v
                i += 1
            } else if arguments[i] == "--stalls", i + 1 < arguments.count, let v = Int(arguments[i + 1]) {
                stalls = max(1, v)
                i += 1
            } else {
                print("usage: aftermath-bench loops [--window S] [--stalls N]")
                exit(2)
            }
            i += 1
        }
        let root = NSTemporaryDirectory() + "aftermath-loops-bench-\(getpid())"
        var config = Aftermath.Configuration(
            serviceName: "loops-bench", serviceVersion: "1", exporter: InMemoryExporter(),
            reportsDirectory: root, deliverPendingReportsSynchronously: true)
        config.watchConcurrencyPool = false  // measured on its own below
        do { try Aftermath.start(config) } catch {
            print("start failed: \(error)")
            exit(1)
        }
        print("event loop watching benchmark (window \(window) s, \(stalls) stalls)")
        let loops = (0..<8).compactMap { i -> TestEventLoop? in
            guard let loop = TestEventLoop(named: "NIO-ELT-0-#\(i)") else { return nil }
            _ = try? Aftermath.watchEventLoop(named: "loop-\(i)") { loop.execute($0) }
            return loop
        }
        usleep(500_000)
        idle(loops, window: window)
        busy(loops, window: min(window, 10))
        loopStalls(loops[0], count: stalls)
        poolStalls(count: max(3, stalls / 2))
        try? FileManager.default.removeItem(atPath: root)
        exit(0)
    }

    static func stats() -> aft_watchdog_stats {
        var s = aft_watchdog_stats()
        aft_watchdog_get_stats(&s)
        return s
    }

    /// The watchdog's and the pinger's CPU time, in nanoseconds.
    static func ownCPU() -> UInt64 {
        let s = stats()
        return HangBench.threadCPU(s.watchdog_tid) + HangBench.threadCPU(s.pinger_tid)
    }

    static func idle(_ loops: [TestEventLoop], window: Double) {
        let wakes0 = loops.map(\.wakeups), cpu0 = ownCPU(), t0 = Monotonic.nanoseconds()
        usleep(UInt32(window * 1_000_000))
        let cpu1 = ownCPU(), t1 = Monotonic.nanoseconds()
        let seconds = Double(t1 - t0) / 1e9
        let wakes = zip(loops, wakes0).map { Double($0.wakeups - $1) / seconds }
        print(
            String(
                format: "8 idle loops:           watchdog+pinger CPU %.4f %% of one core (budget 0.1 %%), "
                    + "loop wake-ups max %.2f/s (budget 1)",
                100 * Double(cpu1 - cpu0) / Double(t1 - t0), wakes.max() ?? 0))
    }

    final class Flag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = true
        var isSet: Bool { lock.withLock { value } }
        func clear() { lock.withLock { value = false } }
    }

    /// Each loop runs a 2 ms job every 10 ms: busy, never stalled.
    static func busy(_ loops: [TestEventLoop], window: Double) {
        let running = Flag()
        for loop in loops {
            Thread {
                while running.isSet {
                    loop.execute { HangBench.spin(2_000_000) }
                    usleep(10_000)
                }
            }.start()
        }
        usleep(300_000)
        let s0 = stats(), cpu0 = ownCPU(), t0 = Monotonic.nanoseconds()
        usleep(UInt32(window * 1_000_000))
        let s1 = stats(), cpu1 = ownCPU(), t1 = Monotonic.nanoseconds()
        running.clear()
        usleep(100_000)
        let seconds = Double(t1 - t0) / 1e9
        print(
            String(
                format:
                    "8 busy loops:           %.2f pings/s per loop (budget 10), watchdog+pinger CPU %.4f %%, %d hangs",
                Double(s1.pings - s0.pings) / seconds / Double(loops.count),
                100 * Double(cpu1 - cpu0) / Double(t1 - t0),
                Int(s1.hangs - s0.hangs)))
    }

    static func summary(_ v: [Double], _ unit: String) -> String {
        guard !v.isEmpty else { return "none" }
        let s = v.sorted()
        return String(
            format: "median %.1f %@, max %.1f %@, min %.1f %@ (n=%d)", s[s.count / 2], unit, s.last!, unit, s.first!,
            unit, s.count)
    }

    /// A loop stalls 900 ms at a random phase; latency = detection time - the stall's start.
    static func loopStalls(_ loop: TestEventLoop, count: Int) {
        var latencies: [Double] = [], pauses: [Double] = []
        for _ in 0..<count {
            usleep(UInt32.random(in: 700_000...1_000_000))
            let before = stats().hangs
            let onset = HangBench.Locked(0)
            loop.execute {
                onset.set(Monotonic.nanoseconds())
                HangBench.spin(900_000_000)
            }
            usleep(1_300_000)
            let s = stats()
            guard s.hangs > before, onset.get() > 0 else {
                print("  a stall was not detected")
                continue
            }
            latencies.append(Double(Int64(bitPattern: s.last_detection_ns &- onset.get())) / 1e6)
            if s.last_capture_method == AFT_CAPTURE_SIGNAL { pauses.append(Double(s.last_capture_pause_ns) / 1e3) }
        }
        let budget =
            Aftermath.defaultEventLoopThreshold.components.seconds * 1000
            + Aftermath.defaultEventLoopThreshold.components.attoseconds / 1_000_000_000_000_000 + 175
        print("event loop detection:   \(summary(latencies, "ms")) (budget \(budget) ms)")
        print("capture pause (signal): \(summary(pauses, "us")) (budget 200 us)")
    }

    /// The pool's every worker blocked 1.6 s at a random phase.
    static func poolStalls(count: Int) {
        var config = Aftermath.Configuration(
            serviceName: "loops-bench", serviceVersion: "1", exporter: InMemoryExporter(),
            reportsDirectory: NSTemporaryDirectory() + "aftermath-loops-bench-\(getpid())",
            deliverPendingReportsSynchronously: true)
        config.watchConcurrencyPool = true
        try? Aftermath.start(config)
        usleep(500_000)
        var latencies: [Double] = []
        let width = Int(aft_watch_pool_width())
        for _ in 0..<count {
            usleep(UInt32.random(in: 500_000...800_000))
            let before = stats().hangs
            let onset = Monotonic.nanoseconds()
            for _ in 0..<width {
                Task.detached { _ = DispatchSemaphore(value: 0).wait(timeout: .now() + 1.6) }
            }
            usleep(2_000_000)
            let s = stats()
            guard s.hangs > before else {
                print("  a starvation was not detected")
                continue
            }
            latencies.append(Double(Int64(bitPattern: s.last_detection_ns &- onset)) / 1e6)
        }
        print("pool starvation detect: \(summary(latencies, "ms")) (budget 1125 ms)")
    }
}
