#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// crash-harness: crashes child processes that link Aftermath and checks what the next launch reports.
// See Usage.text, or run `crash-harness --help`.

switch Usage.parse(Array(CommandLine.arguments.dropFirst())) {
case .matrix(let names, let keep, let detector, let verbose):
    let scenarios = names.isEmpty ? Scenario.all : names.compactMap(Scenario.named)
    exit(Matrix(scenarios: scenarios, keepDirectory: keep, detector: detector, verbose: verbose).run())
case .list:
    for scenario in Scenario.all {
        print("\(scenario.name.padded(to: 20)) \(scenario.exceptionType.padded(to: 22)) \(scenario.summary)")
    }
    exit(0)
case .child(let scenario, let directory, let withAftermath):
    ChildMode.crash(scenario, reportsDirectory: directory, withAftermath: withAftermath)
case .nextLaunch(let directory):
    ChildMode.nextLaunch(reportsDirectory: directory)
case .help:
    print(Usage.text)
    exit(0)
case .invalid(let message):
    ChildMode.say("crash-harness: \(message)\n\n\(Usage.text)\n", fd: 2)
    exit(2)
}
