import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CHarnessFaults
import HarnessSupport
import CSignalShim
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath-bench hang [--window S] [--hangs N]`: the hang watchdog's costs.
///   heartbeat(): ns per call; watchdog CPU (% of one core) and wakeups a second while the app
///   is idle and while it is busy, over a window (default 60 s); detection latency after the
///   onset (target <= 375 ms); how long the blocked thread is stopped for the capture
///   (target <= 200 us).
enum HangBench {
    static func run(_ arguments: [String]) {
        var window = 60.0, hangs = 10
        var i = 0
        while i < arguments.count {
            if arguments[i] == "--window", i + 1 < arguments.count, let v = Double(arguments[i + 1]) {
                window = v
                i += 1
            } else if arguments[i] == "--hangs", i + 1 < arguments.count, let v = Int(arguments[i + 1]) {
                hangs = max(1, v)
                i += 1
            } else {
                print("usage: aftermath-bench hang [--window S] [--hangs N]")
                exit(2)
            }
            i += 1
        }
        let root = NSTemporaryDirectory() + "aftermath-hang-bench-\(getpid())"
        let config = Aftermath.Configuration(
            serviceName: "hang-bench", serviceVersion: "1", exporter: InMemoryExporter(),
            reportsDirectory: root, deliverPendingReportsSynchronously: true)
        do { try Aftermath.start(config) } catch {
            print("start failed: \(error)")
            exit(1)
        }
        print("hang watchdog benchmark (window \(window) s per CPU figure, \(hangs) hangs)")
        heartbeatCost()
        let (w, n) = (window, hangs)
        Thread {
            waitArmed()
            measureCPU("idle", window: w, busy: false)
            measureCPU("busy", window: w, busy: true)
            detection(hangs: n)
            aft_watchdog_stop()
            try? FileManager.default.removeItem(atPath: root)
            exit(0)
        }.start()
        RunLoop.main.run()
    }

    static func now() -> UInt64 { Monotonic.nanoseconds() }

    static func stats() -> aft_watchdog_stats {
        var s = aft_watchdog_stats()
        aft_watchdog_get_stats(&s)
        return s
    }

    static func waitArmed() {
        while stats().watched_tid == 0 { usleep(10_000) }
    }

    @inline(never)
    static func heartbeatCost() {
        let calls = 200_000_000
        let start = now()
        for _ in 0..<calls { Aftermath.heartbeat() }
        let ns = Double(now() - start) / Double(calls)
        print(String(format: "heartbeat():            %.2f ns/call (%d calls)", ns, calls))
    }

    /// CPU time of a thread of this process, from its per-thread CPU clock.
    static func threadCPU(_ tid: UInt64) -> UInt64 {
        let clock = clockid_t((~Int32(truncatingIfNeeded: tid)) << 3 | 6)  // CPUCLOCK_SCHED | PERTHREAD
        var ts = timespec()
        guard clock_gettime(clock, &ts) == 0 else { return 0 }
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    final class Flag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = true
        var isSet: Bool { lock.withLock { value } }
        func clear() { lock.withLock { value = false } }
    }

    /// Main thread busy in 20 ms slices (responsive between them), or idle in its run loop.
    static func measureCPU(_ label: String, window: Double, busy: Bool) {
        let running = Flag()
        if busy {
            @Sendable func slice() {
                guard running.isSet else { return }
                let end = now() + 20_000_000
                var x: UInt64 = 1
                while now() < end { for _ in 0..<100 { x = x &* 6364136223846793005 &+ 1 } }
                withExtendedLifetime(x) {}
                DispatchQueue.main.async { slice() }
            }
            DispatchQueue.main.async { slice() }
        }
        let tid = stats().watchdog_tid
        let before = stats(), cpu0 = threadCPU(tid), t0 = now()
        usleep(UInt32(window * 1_000_000))
        let after = stats(), cpu1 = threadCPU(tid), t1 = now()
        running.clear()
        let elapsed = Double(t1 - t0)
        print(
            String(
                format: "watchdog CPU, %@:     %.4f %% of one core, %.1f wakeups/s, %d hangs (over %.0f s)",
                label, 100 * Double(cpu1 - cpu0) / elapsed, Double(after.wakeups - before.wakeups) / (elapsed / 1e9),
                Int(after.hangs - before.hangs), elapsed / 1e9))
    }

    @inline(never)
    static func spin(_ ns: UInt64) {
        let end = now() + ns
        var x: UInt64 = 1
        while now() < end { x = x &* 6364136223846793005 &+ 1 }
        withExtendedLifetime(x) {}
    }

    /// Hangs of 700 ms at random phases; latency = detection time - true onset.
    static func detection(hangs: Int) {
        let (latencies, pauses) = measureHangs(hangs)
        func summary(_ v: [Double], _ unit: String) -> String {
            guard !v.isEmpty else { return "none" }
            let s = v.sorted()
            return String(
                format: "median %.1f %@, max %.1f %@, min %.1f %@ (n=%d)", s[s.count / 2], unit, s.last!, unit,
                s.first!, unit, s.count)
        }
        print("detection latency:      \(summary(latencies, "ms")) (target <= 375 ms)")
        print("capture pause (signal): \(summary(pauses, "us")) (target <= 200 us)")
    }

    /// Detection latencies (ms) and signal capture pauses (µs) of `hangs` main-thread hangs.
    static func measureHangs(_ hangs: Int) -> (latencies: [Double], pauses: [Double]) {
        var latencies: [Double] = [], pauses: [Double] = []
        for _ in 0..<hangs {
            usleep(UInt32.random(in: 300_000...600_000))
            let before = stats().hangs
            let onset = Locked(0)
            DispatchQueue.main.sync {}
            DispatchQueue.main.async {
                onset.set(now())
                spin(700_000_000)
            }
            usleep(1_300_000)
            let s = stats()
            guard s.hangs > before, onset.get() > 0 else {
                print("  a hang was not detected")
                continue
            }
            latencies.append(Double(Int64(bitPattern: s.last_detection_ns &- onset.get())) / 1e6)
            if s.last_capture_method == AFT_CAPTURE_SIGNAL { pauses.append(Double(s.last_capture_pause_ns) / 1e3) }
        }
        return (latencies, pauses)
    }

    final class Locked: @unchecked Sendable {
        private let lock = NSLock()
        private var value: UInt64
        init(_ v: UInt64) { value = v }
        func get() -> UInt64 { lock.withLock { value } }
        func set(_ v: UInt64) { lock.withLock { value = v } }
    }
}
