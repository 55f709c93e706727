/// The command line.
enum Usage {
    static let text = """
        usage: crash-harness [--scenario NAME]... [--keep DIR] [--detector LIB] [--verbose]
               crash-harness --list
          Runs each scenario (default: all) in child processes that link Aftermath and fault:
          the child with Aftermath, the same child without it, then a next launch that delivers
          the crash report; checks the exit status, the app.crash record and the files left,
          prints a table and exits 1 if any scenario failed.
          --scenario NAME  run only this scenario (repeatable; see --list)
          --keep DIR       keep the reports under DIR
          --detector LIB   preload LIB (Harness/Detector, built by scripts/harness.sh) into
                           the crashing children: malloc, free, a mutex or dl_iterate_phdr
                           called on the signal stack fails the row
          --verbose, -v    print every scenario's symbolicated stack and the children's output

        internal (the harness runs these itself):
               crash-harness child NAME --dir DIR [--no-aftermath]
               crash-harness next-launch --dir DIR
        """

    enum Mode {
        case matrix(scenarios: [String], keep: String?, detector: String?, verbose: Bool)
        case list
        case child(Scenario, directory: String, withAftermath: Bool)
        case nextLaunch(directory: String)
        case help
        case invalid(String)
    }

    static func parse(_ arguments: [String]) -> Mode {
        var rest = arguments[...]
        var names: [String] = [], keep: String?, detector: String?, verbose = false, list = false
        var directory: String?, withAftermath = true
        let command = rest.first.flatMap { ["child", "next-launch"].contains($0) ? $0 : nil }
        if command != nil { rest = rest.dropFirst() }
        var childScenario: String?
        if command == "child" {
            childScenario = rest.popFirst()
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--scenario", "--keep", "--dir", "--detector":
                guard let value = rest.popFirst() else { return .invalid("\(argument) needs a value") }
                switch argument {
                case "--scenario":
                    guard Scenario.named(value) != nil else {
                        return .invalid("no scenario named '\(value)' (see --list)")
                    }
                    names.append(value)
                case "--keep": keep = value
                case "--detector": detector = value
                default: directory = value
                }
            case "--no-aftermath": withAftermath = false
            case "--verbose", "-v": verbose = true
            case "--list": list = true
            case "--help", "-h": return .help
            default: return .invalid("unexpected argument '\(argument)'")
            }
        }
        switch command {
        case "child":
            guard let name = childScenario, let scenario = Scenario.named(name) else {
                return .invalid("child needs a scenario name (see --list)")
            }
            guard let directory else { return .invalid("child needs --dir") }
            return .child(scenario, directory: directory, withAftermath: withAftermath)
        case "next-launch":
            guard let directory else { return .invalid("next-launch needs --dir") }
            return .nextLaunch(directory: directory)
        default:
            return list ? .list : .matrix(scenarios: names, keep: keep, detector: detector, verbose: verbose)
        }
    }
}
