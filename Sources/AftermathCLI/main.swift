// aftermath: inspect the reports Aftermath keeps between runs. Reads only; acknowledges nothing.
//   aftermath list [--dir DIR | --service NAME]
//   aftermath show ID [--dir DIR | --service NAME]
//   aftermath dump [--dir DIR | --service NAME]
import AftermathNextLaunch
import AftermathOTLP
import AftermathSymbolication
import Foundation

let usage = """
usage: aftermath list [--dir DIR | --service NAME]    pending reports, one a line
       aftermath show ID [--dir DIR | --service NAME] one report as text (ID: report id or file name prefix)
       aftermath dump [--dir DIR | --service NAME]    all pending reports as one OTLP/JSON request on stdout
Without --dir or --service, every service under the default state directory is read.
"""

var arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    let value = arguments[i + 1]
    arguments.removeSubrange(i...i + 1)
    return value
}

let explicitDir = option("--dir")
let service = option("--service")
guard let command = arguments.first, ["list", "show", "dump"].contains(command) else {
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(2)
}

/// The reports directories to read.
@MainActor func directories() -> [ReportDirectory] {
    if let explicitDir { return [ReportDirectory(root: explicitDir)] }
    if let service { return [ReportDirectory(root: ReportDirectory.defaultRoot(serviceName: service))] }
    let base = (ReportDirectory.defaultRoot(serviceName: "x") as NSString).deletingLastPathComponent
    let names = (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
    return names.sorted().map { ReportDirectory(root: (base as NSString).appendingPathComponent($0)) }
}

let collections = directories().map { ($0, ReportCollector(directory: $0).collect(moveRejected: false)) }
let reports = collections.flatMap { $0.1.reports }
let rejected = collections.flatMap { $0.1.rejected }

switch command {
case "list": CLI.list(reports, rejected: rejected, directories: collections.map(\.0))
case "show":
    guard arguments.count >= 2 else {
        FileHandle.standardError.write(Data("aftermath show: which report? (see aftermath list)\n".utf8))
        exit(2)
    }
    exit(CLI.show(arguments[1], in: reports))
default:
    print(CLI.dump(reports))
}
