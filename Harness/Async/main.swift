import Foundation
import HarnessSupport

// async-harness: real child processes crash, hang and record errors three async levels deep;
// the next launch's records and `aftermath show` must name the async callers.
//   async-harness [row ...]                  run the rows (all by default), print a table
//   async-harness child <row> <phase> <dir>  (internal) one child: phase crash or collect

let arguments = CommandLine.arguments
if arguments.count >= 5, arguments[1] == "child" {
    AsyncChild.run(arguments[2], phase: arguments[3], directory: arguments[4])
}
let wanted = Set(arguments.dropFirst())
let unknown = wanted.subtracting(AsyncRow.all.map(\.name))
if !unknown.isEmpty {
    print(
        "unknown rows: \(unknown.sorted().joined(separator: ", ")); rows: "
            + AsyncRow.all.map(\.name).joined(separator: " "))
    exit(2)
}
var rows: [TableRow<AsyncColumn>] = []
for row in AsyncRow.all where wanted.isEmpty || wanted.contains(row.name) {
    Table.progress("async-harness", row.name)
    rows.append(row.run())
}
#if DEBUG
let build = "-Onone"
#else
let build = "-O"
#endif
exit(Table.print(rows, between: ["Built \(build)."]))
