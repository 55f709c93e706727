import Aftermath
import AftermathTesting
import HarnessSupport
import CSignalShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath-bench gate [--rounds N]`: the benchmark gate CI runs. The crash, start and hang
/// figures, each against its published budget; a figure fails when it exceeds its budget, scaled
/// to this machine, by more than the margin. The scale is a baseline taken in the same run,
/// interleaved with the figures: the same crashing child without Aftermath, fork to waitpid,
/// over what it takes on the machine the budgets were set on (never below 1). A machine twice
/// as slow, or as loaded, allows twice the time; a regression on a quiet machine still fails.
/// Exits 1 when a figure fails, 2 when a figure could not be taken.
enum GateBench {
    /// A gated figure: its published budget (on the reference machine) and unit.
    struct Budget {
        let name: String
        let budget: Double
        let unit: String
        /// Scaled by the machine's baseline (times on this machine's CPU and scheduler), or fixed
        /// (a threshold the watchdog keeps by its own clock).
        let scaled: Bool
    }

    /// Fork to waitpid of the crashing child without Aftermath, on the project's 2-core machine.
    static let referenceBaselineMs = 0.96
    /// How far over its scaled budget a figure may go before the gate fails.
    static let margin = 0.5

    static let budgets: [Budget] = [
        Budget(name: "crash handler, 64 frames, no fsync (ms)", budget: 0.40, unit: "ms", scaled: true),
        Budget(name: "crash handler, 8 more threads paused (ms)", budget: 0.60, unit: "ms", scaled: true),
        Budget(name: "crash to exit, over the baseline (ms)", budget: 3.0, unit: "ms", scaled: true),
        Budget(name: "Aftermath.start holds the caller, later launch (ms)", budget: 1.5, unit: "ms", scaled: true),
        Budget(
            name: "start's delivery thread gone, the app busy for its first 20 ms (ms)", budget: 25, unit: "ms",
            scaled: true),
        Budget(name: "main thread stopped for a hang's capture (ms)", budget: 0.20, unit: "ms", scaled: true),
        Budget(name: "hang detected after the onset, 250 ms threshold (ms)", budget: 375, unit: "ms", scaled: false),
    ]

    static func run(_ args: [String]) {
        let rounds = args.firstIndex(of: "--rounds").flatMap { Int(args[$0 + 1]) } ?? 11
        let root = NSTemporaryDirectory() + "aftermath-gate-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let env = ["SWIFT_BACKTRACE": "enable=no"]
        var handler: [Double] = [], handlerThreads: [Double] = [], exit: [Double] = [], baseline: [Double] = []
        var start: [Double] = [], delivered: [Double] = []
        let began = Monotonic.seconds()
        for i in 0..<rounds {
            // Interleaved, so that the machine's load falls on the baseline and the figures alike.
            let dir = "\(root)/r\(i)"
            let with = benchChild(
                ["crash-child", "--depth", "64", "--dir", dir + "/a", "--fsync", "0"], environment: env)
            if with.values.count >= 2 { handler.append(Double(with.values[1]) / 1e6) }
            if let t0 = with.values.first, let end = with.exitedAt { exit.append(Double(end - t0) / 1e6) }
            let without = benchChild(
                ["crash-child", "--depth", "64", "--dir", dir + "/b", "--fsync", "0", "--no-aftermath"],
                environment: env)
            if let t0 = without.values.first, let end = without.exitedAt { baseline.append(Double(end - t0) / 1e6) }
            let workers = benchChild(
                ["crash-child", "--depth", "64", "--dir", dir + "/c", "--fsync", "0", "--workers", "8"],
                environment: env)
            if workers.values.count >= 2 { handlerThreads.append(Double(workers.values[1]) / 1e6) }
            for launch in 0..<2 {
                let child = benchChild(["start-child", "--dir", dir + "/s"], environment: env)
                if launch == 1, let ns = child.values.first { start.append(Double(ns) / 1e6) }
                if launch == 1, child.values.count > 2 { delivered.append(Double(child.values[2]) / 1e6) }
            }
            try? FileManager.default.removeItem(atPath: dir)
        }
        // Five hangs, their median pause: a process's first hang starts an unwinding helper of
        // its own (0.3-1.4 ms here, by design), and about one process in fifteen has a slow
        // second one too (1-2 ms, seen since libunwind is loaded at its first use, not
        // understood yet); the median of five is the typical pause whatever those two took.
        let hang = benchChild(["gate-hang-child", "--dir", root + "/h", "--hangs", "5"], environment: env)
        let pauses = hang.values.count >= 2 ? [Double(hang.values[0]) / 1e6] : []
        let latencies = hang.values.count >= 2 ? [Double(hang.values[1]) / 1e6] : []

        let base = Stats.median(baseline)
        let scale = base.isFinite ? max(1, base / referenceBaselineMs) : 1
        let measured = [
            Stats.median(handler), Stats.median(handlerThreads), Stats.median(exit) - base, Stats.median(start),
            Stats.median(delivered), Stats.median(pauses), Stats.median(latencies),
        ]
        print(
            String(
                format: "Benchmark gate: %d rounds, %.0f s; baseline (crash child without Aftermath) %.2f ms, "
                    + "%.2f ms on the reference machine: scale %.2f; margin %.0f %%",
                rounds, Monotonic.seconds() - began, base, referenceBaselineMs, scale, margin * 100))
        print("| figure | measured | budget | limit here | |")
        print("|---|---|---|---|---|")
        var failed = false, missing = false
        for (b, value) in zip(budgets, measured) {
            let limit = b.budget * (b.scaled ? scale : 1) * (1 + margin)
            let verdict = !value.isFinite ? "MISSING" : value <= limit ? "ok" : "FAIL"
            if verdict == "FAIL" { failed = true }
            if verdict == "MISSING" { missing = true }
            print(String(format: "| %@ | %.3f | %.3f | %.3f | %@ |", b.name, value, b.budget, limit, verdict))
        }
        Glibc.exit(missing ? 2 : failed ? 1 : 0)
    }

    /// The hang figures in a process of their own: fd 3 gets the median capture pause and the
    /// median detection latency (ns).
    static func hangChild(_ args: [String]) {
        let dir = args.firstIndex(of: "--dir").map { args[$0 + 1] } ?? "/tmp/aftermath-gate-hang"
        let hangs = args.firstIndex(of: "--hangs").flatMap { Int(args[$0 + 1]) } ?? 5
        let config = Aftermath.Configuration(
            serviceName: "gate", serviceVersion: "1", exporter: InMemoryExporter(), reportsDirectory: dir,
            deliverPendingReportsSynchronously: true)
        do { try Aftermath.start(config) } catch { Glibc.exit(3) }
        Thread {
            HangBench.waitArmed()
            let (latencies, pauses) = HangBench.measureHangs(hangs)
            var pause = UInt64(max(0, Stats.median(pauses) * 1e3).rounded())
            var latency = UInt64(max(0, Stats.median(latencies) * 1e6).rounded())
            if !pauses.isEmpty, !latencies.isEmpty {
                _ = write(3, &pause, 8)
                _ = write(3, &latency, 8)
            }
            aft_watchdog_stop()
            try? FileManager.default.removeItem(atPath: dir)
            Glibc.exit(0)
        }.start()
        RunLoop.main.run()
    }
}
