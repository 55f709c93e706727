import HarnessSupport
import Foundation

/// Runs this executable as a benchmark child: stdout and stderr discarded, a pipe on fd 3
/// for the figures it writes there (UInt64s), the environment inherited with `environment`
/// on top.
func benchChild(_ arguments: [String], environment: [String: String] = [:]) -> ChildResult {
    var env = ProcessInfo.processInfo.environment
    for (k, v) in environment { env[k] = v }
    return ChildProcess.run(
        ChildProcess.ownExecutable, arguments, environment: env, timeout: 300,
        captureOutput: false, valuesDescriptor: 3)
}

enum Stats {
    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let s = values.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func format(_ v: Double, _ unit: String, digits: Int = 1) -> String {
        String(format: "%.\(digits)f %@", v, unit)
    }
}
