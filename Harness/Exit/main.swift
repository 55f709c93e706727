// exit-harness: real child processes end in every way the run record must tell apart, and a
// next launch reports what it inferred. Prints a table and "N passed, M failed"; exits 1 on a
// failure. `exit-harness child ...` is the app side (ExitChild).
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "child" {
    if arguments.count >= 4, arguments[1].hasPrefix("race-") { DeliveryRace.child(Array(arguments.dropFirst())) }
    ExitChild.run(Array(arguments.dropFirst()))
}
exit(ExitScenarios.runAll(filter: arguments.first) ? 0 : 1)
