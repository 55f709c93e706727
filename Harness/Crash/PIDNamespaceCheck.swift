import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathSymbolication
import HarnessSupport
import CHarnessFaults
import Foundation

/// abort() in PID 1 of a PID namespace (a container's init): there the kernel drops a
/// default-action signal the process sends itself, so re-raising SIGABRT does nothing. The
/// handler must notice it is still alive and `_exit(128 + SIGABRT)`, after writing its file.
/// (Without Aftermath, glibc's abort() falls back to an invalid instruction: SIGSEGV.)
struct PIDNamespaceCheck {
    var executable: String
    var baseDirectory: String
    var environment: [String: String]

    struct Outcome {
        var line: String
        var passed: Bool?
    }

    func run() -> Outcome {
        guard getuid() == 0,
            let unshare = ["/usr/bin/unshare", "/bin/unshare"].first(where: {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        else {
            return Outcome(line: "pid1-abort: skipped (needs root and unshare)", passed: nil)
        }
        let root = (baseDirectory as NSString).appendingPathComponent("pid1-abort")
        let reports = (root as NSString).appendingPathComponent("reports")
        var env = environment
        env["SWIFT_BACKTRACE"] = "enable=no"  // the default action must be the previous handler
        let prefix = ["--pid", "--fork", "--mount-proc", "--kill-child", executable]
        let with = ChildProcess.run(
            unshare, prefix + ["child", "abort", "--dir", reports], environment: env, timeout: 30)
        let without = ChildProcess.run(
            unshare, prefix + ["child", "abort", "--dir", root + "/unused", "--no-aftermath"],
            environment: env, timeout: 30)
        let records = ChildProcess.run(executable, ["next-launch", "--dir", reports], environment: env, timeout: 30)
            .records
        let crash = records.first { $0.eventName == "app.crash" }
        let type = crash?[attribute: "exception.type"]?.stringValue ?? "no record"
        // unshare --fork reports its child's status: an exit status, or 128 + the signal.
        let passed = with.termination == .exited(128 + SIGABRT) && type.hasPrefix("SIGABRT")
        return Outcome(
            line: "pid1-abort: as PID 1 with Aftermath \(with.termination) (expected exit 134), record \(type); "
                + "without Aftermath \(without.termination) — \(passed ? "PASS" : "FAIL")",
            passed: passed)
    }
}
