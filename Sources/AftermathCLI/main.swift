// aftermath: inspect and symbolicate the reports Aftermath keeps between runs. Reads only;
// acknowledges nothing. `aftermath --help` and `aftermath COMMAND --help` say how.
import Foundation

func fail(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }

let raw = Array(CommandLine.arguments.dropFirst())
let arguments: Arguments
do {
    arguments = try Arguments.parse(raw)
} catch {
    if raw.first == "--help" || raw.first == "-h" || raw.first == "help" {
        print(Arguments.overview)
        exit(0)
    }
    let command = raw.first.flatMap(Arguments.Command.init(rawValue:))
    fail("aftermath\(command.map { " \($0.rawValue)" } ?? ""): \(error.message)")
    fail(command.map { "see aftermath \($0.rawValue) --help" } ?? Arguments.overview)
    exit(2)
}
if arguments.help {
    print(Arguments.help(arguments.command))
    exit(0)
}
do {
    exit(try Commands(arguments).run())
} catch {
    fail("aftermath \(arguments.command.rawValue): \(error.message)")
    exit(error.status)
}
