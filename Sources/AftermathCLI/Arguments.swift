/// The command line: a command, its operands, its options. Unknown options, missing values and
/// stray operands are usage errors (exit 2), never ignored.
struct Arguments {
    enum Command: String, CaseIterable {
        case list, show, dump, symbolicate, minidump
    }

    struct UsageError: Error {
        var message: String
    }

    var command: Command
    var operands: [String] = []
    /// Options with a value, in order (repeatable ones keep every value).
    var values: [String: [String]] = [:]
    var flags: Set<String> = []
    var help = false

    func value(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }

    /// Options that take a value, and flags, per command.
    static func options(for command: Command) -> (values: Set<String>, flags: Set<String>, operands: ClosedRange<Int>) {
        let location: Set<String> = ["--dir", "--service"]
        switch command {
        case .list: return (location, ["--json"], 0...0)
        case .dump: return (location, ["--json"], 0...0)
        case .show: return (location.union(["--debug-dir", "--threads"]), ["--json", "--no-symbols"], 1...1)
        case .minidump: return (location.union(["-o"]), [], 1...1)
        case .symbolicate: return (location.union(["--debug-dir"]), ["--json"], 1...1)
        }
    }

    static func parse(_ raw: [String]) throws(UsageError) -> Arguments {
        guard let first = raw.first else { throw UsageError(message: "which command?") }
        if first == "--help" || first == "-h" || first == "help" {
            if raw.count > 1, let command = Command(rawValue: raw[1]) {
                var arguments = Arguments(command: command)
                arguments.help = true
                return arguments
            }
            throw UsageError(message: "")
        }
        guard let command = Command(rawValue: first) else { throw UsageError(message: "unknown command \(first)") }
        var arguments = Arguments(command: command)
        let spec = options(for: command)
        var rest = raw.dropFirst()
        var onlyOperands = false
        while let argument = rest.popFirst() {
            if onlyOperands || !argument.hasPrefix("-") || argument == "-" {
                arguments.operands.append(argument)
                continue
            }
            if argument == "--" {
                onlyOperands = true
                continue
            }
            if argument == "--help" || argument == "-h" {
                arguments.help = true
                continue
            }
            var name = argument, inline: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            if spec.values.contains(name) {
                guard let value = inline ?? rest.popFirst(), !value.isEmpty, inline != nil || !value.hasPrefix("--")
                else {
                    throw UsageError(message: "\(name) needs a value")
                }
                arguments.values[name, default: []].append(value)
            } else if spec.flags.contains(name), inline == nil {
                arguments.flags.insert(name)
            } else {
                throw UsageError(message: "unknown option \(argument)")
            }
        }
        if arguments.help { return arguments }
        if arguments.values["--dir"] != nil && arguments.values["--service"] != nil {
            throw UsageError(message: "--dir and --service name the same thing: give one")
        }
        if let threads = arguments.value("--threads"), threads != "all", threads != "crashed" {
            throw UsageError(message: "--threads takes all or crashed, not \(threads)")
        }
        for single in ["--dir", "--service", "--threads", "-o"] where (arguments.values[single]?.count ?? 0) > 1 {
            throw UsageError(message: "\(single) given twice")
        }
        if !spec.operands.contains(arguments.operands.count) {
            throw UsageError(
                message: arguments.operands.count < spec.operands.lowerBound
                    ? "missing \(command == .show || command == .minidump ? "report id" : "input")"
                    : "unexpected argument \(arguments.operands[spec.operands.upperBound])")
        }
        return arguments
    }

    static let overview = """
        usage: aftermath COMMAND [options]      (aftermath COMMAND --help for its options)
          list         pending reports, one a line
          show ID      one report as text: explanation, symbolicated frames, registers, images
          dump         all pending reports as one OTLP/JSON request
          symbolicate  symbolicate a report file, a pending report or an OTLP/JSON record off the device
          minidump ID  write a pending crash as a minidump (for minidump-stackwalk, LLDB, Sentry)
        Reads only: nothing is acknowledged, moved or deleted.
        Exit status: 0 found, 1 nothing found, 2 usage error (or a directory that does not exist).
        """

    static func help(_ command: Command) -> String {
        let location = """
              --dir DIR        the reports directory (as given to Aftermath.start)
              --service NAME   the default reports directory of service NAME
            Without --dir or --service, every service under the default state directory is read.
            """
        let debug = """
              --debug-dir DIR  also look for debug files here: DIR/.build-id/xx/rest.debug, DIR/NAME,
                               DIR/NAME.debug (repeatable). Also searched: the binary's own DWARF,
                               NAME.debug next to it, its .gnu_debuglink, /usr/lib/debug/.build-id,
                               then debuginfod when DEBUGINFOD_URLS is set. Every file is checked
                               against the report's build id; a mismatch is said per image.
            """
        switch command {
        case .list:
            return """
                usage: aftermath list [--dir DIR | --service NAME] [--json]
                Pending reports, one a line: kind, time, what, release, id. Then the files in rejected/
                with the reason recorded beside each (a collector's refusal among them).
                \(location)
                  --json           a JSON array, one object a report
                Exit status: 0 reports found, 1 none, 2 usage error or a missing directory.
                """
        case .show:
            return """
                usage: aftermath show ID [--dir DIR | --service NAME] [--debug-dir DIR]... [--threads all|crashed]
                                         [--json] [--no-symbols]
                One report (crash, hang, abnormal exit or handled error): app, release, session, time,
                signal and explanation, the thread's frames symbolicated (function + offset,
                file:line:column, inlined frames, in-app marked), registers, images with build ids and
                whether their debug files were found. For a crash that recorded every thread, each
                thread after the crashing one: id, name, state, how its registers were taken (or why
                they were not), its frames. ID: a report id or file name prefix.
                \(location)
                \(debug)
                  --threads all    every thread of a crash (the default); crashed: the crashing one only
                  --json           the same as JSON
                  --no-symbols     addresses only
                Colour only on a terminal and never with NO_COLOR set.
                Exit status: 0 shown, 1 no such report (or several match), 2 usage error.
                """
        case .dump:
            return """
                usage: aftermath dump [--dir DIR | --service NAME] [--json]
                All pending reports as one OTLP/JSON export request on stdout (--json: the same).
                \(location)
                Exit status: 0 reports found, 1 none, 2 usage error or a missing directory.
                """
        case .symbolicate:
            return """
                usage: aftermath symbolicate INPUT [--debug-dir DIR]... [--dir DIR | --service NAME] [--json]
                Symbolicates off the device. INPUT is one of:
                  a report file (.crash, .hang, .error) copied from a device,
                  a pending report id (looked up like `show`),
                  an OTLP/JSON file as a collector stored it: an export request, one record,
                  or JSON lines of requests ("-" reads stdin).
                Prints every report in it as `show` does.
                \(debug)
                \(location)
                  --json           the reports as a JSON array
                Exit status: 0 symbolicated, 1 input not found or without reports, 2 usage error.
                """
        case .minidump:
            return """
                usage: aftermath minidump ID [-o FILE] [--dir DIR | --service NAME]
                Writes a pending crash as a Linux minidump: every thread recorded (registers and
                stack memory), the images with their build ids, the signal and address. Readers:
                minidump-stackwalk (rust-minidump), LLDB (lldb -c FILE), Sentry, Breakpad.
                ID: a crash id or file name prefix, as `aftermath list` shows it.
                  -o FILE          where to write it (default: ID.dmp in the current directory). The
                                   file is created with mode 0600 and must not exist; a symbolic link
                                   there is refused, never followed.
                \(location)
                Exit status: 0 written, 1 no such crash or the file cannot be created, 2 usage error.
                """
        }
    }
}
