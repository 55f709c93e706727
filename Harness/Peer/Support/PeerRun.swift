import CPeer
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What peer-app and peer-baseline-app do, the same in both; only `start` differs (Aftermath's
/// start, or nothing). Harness/Peer/README.md describes the modes; the C apps
/// (Harness/Peer/sentry_app.c) do the same with sentry-native. Usage: `MODE DIR [FSYNC [PART]]`.
public enum PeerRun {
    /// The arguments after the executable's name: mode, reports directory, fsync (0/1), and how
    /// much of the SDK the app starts (peer-app: `full`, `nohang` or `linked`).
    public struct Arguments: Sendable {
        public var mode: String
        public var directory: String
        public var fsync: Bool
        public var part: String
    }

    public static func arguments() -> Arguments {
        let args = CommandLine.arguments
        guard args.count >= 3 else {
            FileHandle.standardError.write(
                Data("usage: \(args[0]) crash|init|idle|mem|handler DIR [FSYNC [full|nohang|linked]]\n".utf8))
            exit(2)
        }
        return Arguments(
            mode: args[1], directory: args[2], fsync: args.count < 4 || args[3] != "0",
            part: args.count < 5 ? "full" : args[4])
    }

    /// Runs the mode; `start` starts the SDK (nothing in the baseline), `settled` says when the
    /// SDK's background work after start is done (checked before the handler mode's fault).
    public static func main(
        _ arguments: Arguments, start: () -> Void, settled: @escaping @Sendable () -> Bool = { true }
    ) -> Never {
        switch arguments.mode {
        case "crash":
            // Crash to exit: start, then at once a null store on the main thread.
            start()
            cpeer_fault()
        case "init":
            // Start on the calling thread; the app prints how long it held it.
            let before = cpeer_now_ns()
            start()
            let after = cpeer_now_ns()
            cpeer_print("init_ns", after - before)
            cpeer_newline()
            exit(0)
        case "idle":
            // Start, idle 100 ms in the run loop (a sleeping main thread is a hang), exit.
            start()
            after(0.1) {
                cpeer_report_children_cpu()
                exit(0)
            }
        case "mem":
            // Start, idle 2 s in the run loop, then memory and descriptors.
            start()
            after(2.0) {
                cpeer_report_memory()
                exit(0)
            }
        case "handler":
            // The app's own SIGSEGV handler first, then the SDK, which chains to it. The fault
            // comes once the SDK's background work is done and 200 ms have passed.
            cpeer_install_handler()
            start()
            let deadline = cpeer_now_ns() + 2_000_000_000
            let earliest = cpeer_now_ns() + 200_000_000
            let timer = Timer(fire: Date(), interval: 0.001, repeats: true) { _ in
                let now = cpeer_now_ns()
                if now >= earliest && (settled() || now >= deadline) { cpeer_fault() }
            }
            RunLoop.main.add(timer, forMode: .default)
        default:
            FileHandle.standardError.write(Data("unknown mode \(arguments.mode)\n".utf8))
            exit(2)
        }
        RunLoop.main.run()
        exit(1)
    }

    /// Runs body on the main run loop after seconds. (Foundation's `Timer(timeInterval:...)`
    /// fires at once on Linux: its fire date is now.)
    static func after(_ seconds: Double, _ body: @escaping @Sendable () -> Void) {
        let timer = Timer(fire: Date(timeIntervalSinceNow: seconds), interval: 0, repeats: false) { _ in body() }
        RunLoop.main.add(timer, forMode: .default)
    }
}
