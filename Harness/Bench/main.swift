// aftermath-bench: prints the figures the issues ask for. Run it in release:
//   swift run -c release aftermath-bench crash
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "crash": CrashBench.run(Array(arguments.dropFirst()))
case "crash-child": CrashBench.child(Array(arguments.dropFirst()))
case "start": StartBench.run(Array(arguments.dropFirst()))
case "start-child": StartBench.child(Array(arguments.dropFirst()))
case "hang": HangBench.run(Array(arguments.dropFirst()))
case "loops": LoopsBench.run(Array(arguments.dropFirst()))
case "error": ErrorBench.run(Array(arguments.dropFirst()))
case "symbolicate": SymbolicateBench.run(Array(arguments.dropFirst()))
case "export": ExportBench.run(Array(arguments.dropFirst()))
case "store": StoreBench.run(Array(arguments.dropFirst()))
case "store-child": StoreBench.child(Array(arguments.dropFirst()))
case "gate": GateBench.run(Array(arguments.dropFirst()))
case "gate-hang-child": GateBench.hangChild(Array(arguments.dropFirst()))
default:
    print(
        "usage: aftermath-bench crash [--runs N] | hang [--window S] [--hangs N] | loops [--window S] [--stalls N] | error [--calls N] | start [--runs N]"
            + " | symbolicate [--file PATH] [--lookups N] | export [--runs N] | store [--counts 1000,10000]"
            + " | gate [--rounds N]")
    exit(2)
}
