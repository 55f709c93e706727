import Aftermath
import AftermathTesting
import CHarnessFaults
import CSignalShim
import Dispatch
import HarnessSupport
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The children of the server rows: event loops (event_loop.c, built as SwiftNIO's are), the
/// Swift concurrency pool, threads with their own loop and units of work. The main thread
/// parks as a server's does in `closeFuture.wait()`: the main queue is never served.
enum ServerChild {
    /// Starts `count` loops named as SwiftNIO names its own, each watched.
    static func loops(_ count: Int, threshold: Duration = Aftermath.defaultEventLoopThreshold) -> [TestEventLoop] {
        (0..<count).compactMap { i in
            guard let loop = TestEventLoop(named: "NIO-ELT-0-#\(i)") else { return nil }
            _ = try? Aftermath.watchEventLoop(named: "loop-\(i)", threshold: threshold) { job in
                loop.execute(job)
            }
            return loop
        }
    }

    /// The process's descriptors open on a thread's /proc files (/proc/<pid>/task/<tid>/...).
    static func taskDescriptors() -> Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.filter { fd in
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) ?? ""
            return target.hasPrefix("/proc/") && target.contains("/task/") && target.split(separator: "/").count >= 5
        }.count
    }

    /// The app's SIGPROF handler (a profiler's tick) in srv-pool-app-sigprof.
    static let appSigprof: @convention(c) (Int32) -> Void = { _ in
        ServerChild.appSigprofCalls.add(1, ordering: .relaxed)
    }
    static let appSigprofCalls = Atomic<Int>(0)

    static func configure(_ config: inout Aftermath.Configuration, _ scenario: String) {
        // The rows of one kind watch that kind alone, so that what they count is its own.
        config.watchConcurrencyPool =
            scenario.hasPrefix("srv-pool") || scenario.hasPrefix("srv-all") || scenario == "srv-no-pool"
    }

    static func run(_ scenario: String) {
        switch scenario {
        case "srv-loop":
            let l = loops(2)
            settle()
            l[0].execute { Blocking.hangHarnessLoopBlock(seconds: 2.0) }
            Child.finish(expecting: 1, within: 5)
        case "srv-loop2":
            let l = loops(2)
            settle()
            l[0].execute { Blocking.hangHarnessLoopBlock(seconds: 1.2) }
            DispatchQueue.global().asyncAfter(deadline: .now() + 2.0) {
                l[1].execute { Blocking.hangHarnessLoopBlock(seconds: 1.2) }
            }
            Child.finish(expecting: 2, within: 6)
        case "srv-loop-idle":
            let l = loops(8)
            settle()
            let before = l.map(\.wakeups)
            let cpuBefore = ownThreadsCPU(), pingerBefore = ownThreadsCPU([\.pinger_tid])
            let started = Blocking.monotonicSeconds()
            usleep(10_000_000)
            let seconds = Blocking.monotonicSeconds() - started
            let wakes = zip(l, before).map { Double($0.wakeups - $1) / seconds }
            let cpu = (ownThreadsCPU() - cpuBefore) / seconds
            let pinger = (ownThreadsCPU([\.pinger_tid]) - pingerBefore) / seconds
            Child.emit(
                String(
                    format: "FIGURE wakeups_per_s_max=%.2f watchdog_cpu_pct=%.4f pinger_cpu_pct=%.4f task_fds=%d",
                    wakes.max() ?? 0, cpu * 100, pinger * 100, taskDescriptors()))
            Child.finish(expecting: 0, within: 0.5)
        case "srv-loop-busy":
            let l = loops(1)
            settle()
            var stats = aft_watchdog_stats()
            aft_watchdog_get_stats(&stats)
            let pingsBefore = stats.pings
            let started = Blocking.monotonicSeconds()
            while Blocking.monotonicSeconds() - started < 5 {
                for _ in 0..<4 { l[0].execute { Blocking.hangHarnessShortJob(milliseconds: 1) } }
                usleep(20_000)
            }
            aft_watchdog_get_stats(&stats)
            let rate = Double(stats.pings - pingsBefore) / (Blocking.monotonicSeconds() - started)
            Child.emit(String(format: "FIGURE pings_per_s=%.2f", rate))
            Child.finish(expecting: 0, within: 0.5)
        case "srv-loop-kill":
            let l = loops(1)
            settle()
            l[0].execute { Blocking.hangHarnessLoopForever() }
            Child.emit("BLOCKING")
        case "srv-no-pool":
            // The pool watched, never used: no probe, so no thread of libdispatch's.
            settle()
            usleep(600_000)
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).map {
                (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
            }
            Child.emit("THREADS " + names.sorted().joined(separator: ","))
            Child.finish(expecting: 0)
        case "srv-pool":
            settle()
            let width = Int(aft_watch_pool_width())
            Child.emit("WIDTH \(width)")
            for _ in 0..<width { Task.detached { await PoolWork.level1(seconds: 2.5) } }
            Child.finish(expecting: 1, within: 6)
        case "srv-pool-busy":
            settle()
            for _ in 0..<Int(aft_watch_pool_width()) {
                Task.detached { Blocking.hangHarnessBusyLoop(seconds: 2.0) }
            }
            Child.finish(expecting: 1, within: 5)
        case "srv-pool-app-sigprof":
            // A profiler's SIGPROF handler, installed after start: a hang never takes it.
            settle()
            _ = appSigprofCalls.load(ordering: .relaxed)  // initialized before any signal
            signal(SIGPROF, appSigprof)
            for _ in 0..<Int(aft_watch_pool_width()) {
                Task.detached { Blocking.hangHarnessBusyLoop(seconds: 2.0) }
            }
            Thread {
                let deadline = Blocking.monotonicSeconds() + 5
                while Blocking.monotonicSeconds() < deadline && Child.exporter.records.isEmpty { usleep(20_000) }
                var now = sigaction()
                sigaction(SIGPROF, nil, &now)
                let kept =
                    unsafeBitCast(now.__sigaction_handler.sa_handler, to: Int.self)
                    == unsafeBitCast(appSigprof, to: Int.self)
                Child.emit(kept ? "SIGPROF kept" : "SIGPROF replaced")
                Child.emit("SIGPROF calls \(appSigprofCalls.load(ordering: .relaxed))")
                Child.printRecords()
                exit(0)
            }.start()
        case "srv-thread":
            let a = try? Aftermath.watchThread(named: "daemon-a")
            let b = try? Aftermath.watchThread(named: "daemon-b")
            beatingThread("daemon-a", a, blockAfter: 0.3)
            beatingThread("daemon-b", b, blockAfter: 2.2)
            Child.finish(expecting: 2, within: 6)
        case "srv-work":
            let work = try? Aftermath.watchWork(named: "request", threshold: .milliseconds(300))
            Thread {
                for _ in 0..<50 { work?.measure { usleep(5_000) } }
                work?.measure { Blocking.hangHarnessSlowRequest(seconds: 1.0) }
            }.start()
            Child.finish(expecting: 1, within: 5)
        case "srv-all-stop", "srv-all-tracer":
            // Every kind at once, each stuck in turn while the process is stopped or traced.
            let l = loops(1)
            let t = try? Aftermath.watchThread(named: "daemon")
            let work = try? Aftermath.watchWork(named: "request", threshold: .milliseconds(300))
            beatingThread("daemon", t, blockAfter: scenario == "srv-all-tracer" ? 0.5 : 1000)
            settle()
            Child.emit("READY")
            if scenario == "srv-all-tracer" {
                l[0].execute { Blocking.hangHarnessLoopBlock(seconds: 1.0) }
                Thread { work?.measure { Blocking.hangHarnessSlowRequest(seconds: 1.0) } }.start()
                for _ in 0..<Int(aft_watch_pool_width()) { Task.detached { await PoolWork.level1(seconds: 1.5) } }
            }
            Child.finish(expecting: 0, within: 4.5)
        default:
            Child.emit("ERROR unknown scenario \(scenario)")
            exit(2)
        }
        // The main thread parks, as a server's does in closeFuture.wait().
        while true { pause() }
    }

    /// Lets the watchdog hear from every target once.
    static func settle() { usleep(400_000) }

    /// A daemon thread with a loop of its own: a beat every 10 ms, one 1.2 s block.
    static func beatingThread(_ name: String, _ watch: HangWatch?, blockAfter: Double) {
        Thread {
            aft_test_set_thread_name(name)
            let started = Blocking.monotonicSeconds()
            var blocked = false
            while true {
                watch?.beat()
                if !blocked, Blocking.monotonicSeconds() - started > blockAfter {
                    blocked = true
                    Blocking.hangHarnessThreadBlock(seconds: 1.2)
                }
                usleep(10_000)
            }
        }.start()
    }

    /// CPU time of Aftermath's watchdog and pinger threads, in seconds.
    static func ownThreadsCPU(
        _ which: [KeyPath<aft_watchdog_stats, UInt64>] = [\.watchdog_tid, \.pinger_tid]
    ) -> Double {
        var stats = aft_watchdog_stats()
        aft_watchdog_get_stats(&stats)
        return which.map { stats[keyPath: $0] }.reduce(0.0) { sum, tid in
            let text = (try? String(contentsOfFile: "/proc/self/task/\(tid)/schedstat", encoding: .utf8)) ?? ""
            return sum + (Double(text.split(separator: " ").first ?? "0") ?? 0) / 1e9
        }
    }
}

/// Three async levels, each awaiting before it calls the next, then a blocking wait.
enum PoolWork {
    @inline(never)
    static func level1(seconds: Double) async {
        await Task.yield()
        await level2(seconds: seconds)
    }

    @inline(never)
    static func level2(seconds: Double) async {
        await Task.yield()
        await level3(seconds: seconds)
    }

    @inline(never)
    static func level3(seconds: Double) async {
        await Task.yield()
        Blocking.hangHarnessPoolBlock(seconds: seconds)
    }
}
