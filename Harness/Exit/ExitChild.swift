import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import HarnessSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The app side of the harness: one launch of a small app using Aftermath.
///   exit-harness child <mode> <reports dir> [--version V] [--proc ROOT]
enum ExitChild {
    struct HarnessError: Error, CustomStringConvertible {
        var code: Int
        var description: String { "payment declined (code \(code))" }
    }

    /// Writes a line to stdout now (no buffering: the process may be killed next).
    static func say(_ line: String) {
        writeNow(line + "\n")
    }

    /// Replaces this image with its own binary running `child mode dir` (same pid, same start
    /// time).
    static func execSelf(_ mode: String, _ dir: String) -> Never {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(exe), strdup("child"), strdup(mode), strdup(dir), nil]
        execv(exe, argv)
        say("EXEC-FAILED \(errno)")
        exit(4)
    }

    static func run(_ args: [String]) -> Never {
        guard args.count >= 2 else {
            say("usage: child <mode> <dir>")
            exit(2)
        }
        let mode = args[0], dir = args[1]
        func option(_ name: String) -> String? {
            guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
            return args[i + 1]
        }
        let exporter = InMemoryExporter()
        var config = Aftermath.Configuration(
            serviceName: "exit-harness", serviceVersion: option("--version") ?? "1.0", exporter: exporter,
            reportsDirectory: dir, fsyncReports: false, deliverPendingReportsSynchronously: true)
        config.procRoot = option("--proc") ?? "/proc"
        config.hangHeartbeat = mode == "hang" ? .mainQueue : .off

        // A thread of the app's from before start (altstack-pass-thread): it spins, as a
        // worker would, so the pass asks it at once.
        var older: UInt64 = 0
        if mode == "altstack-pass-thread" {
            let ready = DispatchSemaphore(value: 0)
            let box = TidBox()
            let thread = Thread {
                box.tid = aft_gettid()
                ready.signal()
                while true { sched_yield() }
            }
            thread.start()
            ready.wait()
            older = box.tid
        }
        if mode == "handle-term" {
            // The app's own SIGTERM handler, installed before Aftermath: it must still run.
            signal(SIGTERM) { _ in
                let msg = Array("APP-HANDLER\n".utf8)
                _ = msg.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
                exit(0)
            }
        }
        do { try Aftermath.start(config) } catch {
            say("START-FAILED \(error)")
            exit(3)
        }
        let first = Aftermath.sessionID?.uuidString.lowercased() ?? "-"

        switch mode {
        case "report":
            say("PID \(getpid())")
            RecordLine.emit(exporter.batches)
            say("REPORTED \(exporter.records.count)")
            exit(0)
        case "clean":
            say("READY \(first)")
            exit(0)
        case "exec":
            // Replaces its image with its own binary (same pid, same start time); the new image
            // is a next launch over the same directory.
            say("READY \(getpid())")
            execSelf("report", dir)
        case "exec-wait":
            // Replaces its image, once its unwinding helper runs, with a waiting app. The
            // resident helper starts after a process's first hang: started here as then.
            aft_install_complete()
            aft_unwind_resident_start()
            let helpers = UnwindHelperProcess.waitForHelpers(of: getpid()).map { String($0) }
            say("HELPER-READY \(getpid()) " + helpers.joined(separator: " "))
            execSelf("wait-helper", dir)
        case "wait", "handle-term", "wait-helper":
            if mode == "wait-helper" {  // the exec'd image's own resident
                aft_install_complete()
                aft_unwind_resident_start()
            }
            Aftermath.setScreen("checkout")
            let second = Aftermath.startNewSession().uuidString.lowercased()
            say("READY \(second) \(first)")
            // Until stdin closes (then a clean exit) or a signal ends us.
            var byte: UInt8 = 0
            while read(0, &byte, 1) > 0 {}
            exit(0)
        case "session-crash":
            let second = Aftermath.startNewSession().uuidString.lowercased()
            say("READY \(second) \(first)")
            let p = UnsafeMutablePointer<Int>(bitPattern: Int.random(in: 1...2) * 8)!
            p.pointee = 1
            exit(0)
        case "error-crash":
            Aftermath.record(error: HarnessError(code: 51), fingerprint: "payment-declined")
            say("READY \(first)")
            let p = UnsafeMutablePointer<Int>(bitPattern: Int.random(in: 1...2) * 8)!
            p.pointee = 1
            exit(0)
        case "oom":
            say("READY \(first)")
            var blocks: [UnsafeMutableRawPointer] = []
            while true {  // touch every page so the cgroup is charged
                let block = malloc(1 << 20)!
                memset(block, 0x5A, 1 << 20)
                blocks.append(block)
            }
        case "altstack-pass", "altstack-pass-thread":
            // The pass that gives threads from before start an alternate stack, once the
            // install completes: how many looks at the threads it took, whether it asked the
            // older thread.
            aft_install_complete()
            say("ROUNDS \(aft_threads_alternate_stack_rounds()) ASKED \(aft_threads_alternate_stack_asked(older))")
            exit(0)
        case "hang":
            DispatchQueue.main.asyncAfter(deadline: .now() + 0.3) {
                say("READY \(first)")
                while true { sleep(1) }  // the main queue never runs again
            }
            dispatchMain()
        default:
            say("unknown mode \(mode)")
            exit(2)
        }
    }
}

/// A thread's id, set by the thread itself before it signals.
private final class TidBox: @unchecked Sendable {
    var tid: UInt64 = 0
}
