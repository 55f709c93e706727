import Foundation

/// Subprocesses, the built `aftermath` command and the Swift trap fixture, for the
/// symbolication and debug-command suites.
package enum Tool {
    package struct Output: Sendable {
        package var status: Int32
        package var stdout: String
        package var stderr: String
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// Runs `executable` with `arguments`; `environment` entries are added to this process's.
    package static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        removing: [String] = [], input: Data? = nil
    ) throws -> Output {
        BrokenPipe.ignoreSIGPIPE()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for key in removing { env[key] = nil }
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let stdin = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : stdin
        try process.run()
        // A child that exits before it has read all its input: EPIPE, reported below.
        var inputError: (any Error)?
        if let input {
            do { try stdin.fileHandleForWriting.write(contentsOf: input) } catch { inputError = error }
            try? stdin.fileHandleForWriting.close()
        }
        // Read both pipes while it runs so neither fills up.
        nonisolated(unsafe) var errData = Data()
        let errReader = Thread { errData = err.fileHandleForReading.readDataToEndOfFile() }
        errReader.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errReader.isFinished { usleep(1000) }
        if let inputError, let input {
            throw Failure(
                description: "\(executable) \(arguments.joined(separator: " ")) did not read its \(input.count) "
                    + "bytes of standard input (\(inputError)); it ended with status \(process.terminationStatus), "
                    + "stderr: \(String(decoding: errData, as: UTF8.self))")
        }
        return Output(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }

    /// The directory of the built products (.build/debug), where the test bundle lives.
    package static var productsDirectory: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
    }

    /// The built `aftermath` command.
    package static var aftermath: String { productsDirectory + "/aftermath" }

    /// Runs the built `aftermath` command. NO_COLOR is left to the caller; stdout is a pipe.
    package static func aftermath(
        _ arguments: [String], environment: [String: String] = [:],
        input: Data? = nil
    ) throws -> Output {
        try run(aftermath, arguments, environment: environment, removing: ["DEBUGINFOD_URLS"], input: input)
    }

    /// The first executable named `name` on PATH.
    package static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// A fresh private temporary directory.
    package static func temporaryDirectory(_ tag: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-\(tag)-\(UUID())").path
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        return path
    }
}

/// The Swift trap fixture (Fixtures/swift-trap.swift) built with `swiftc -O -g`, once per test
/// process: the unstripped binary, its debug file, and a stripped copy.
package struct SwiftTrapFixture: Sendable {
    /// Unstripped: carries its DWARF.
    package var binary: String
    /// `objcopy --only-keep-debug` of `binary`.
    package var debugFile: String
    /// `binary` stripped of symbols and DWARF, with a .gnu_debuglink to the debug file's name.
    package var stripped: String
    /// The GNU build id, lowercase hex (the same for all three).
    package var buildID: String
    /// The fixture's source text.
    package var source: String

    /// A crash of one kind: the trap address and the executable's load address.
    package struct Crash: Sendable {
        package var pc: UInt64
        package var loadAddress: UInt64

        package init(pc: UInt64, loadAddress: UInt64) {
            self.pc = pc
            self.loadAddress = loadAddress
        }
    }

    static let shared: Result<SwiftTrapFixture, Tool.Failure> = {
        do { return .success(try build()) } catch let error as Tool.Failure { return .failure(error) } catch {
            return .failure(Tool.Failure(description: "\(error)"))
        }
    }()

    package static func get() throws -> SwiftTrapFixture { try shared.get() }

    private static func build() throws -> SwiftTrapFixture {
        let sourcePath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/swift-trap.swift").path
        let source = try String(contentsOfFile: sourcePath, encoding: .utf8)
        let dir = try Tool.temporaryDirectory("swift-trap")
        let binary = dir + "/swift-trap"
        guard let swiftc = Tool.which("swiftc") else { throw Tool.Failure(description: "swiftc is not on PATH") }
        // The note asked for: Swift 6.0's driver links without one, later ones with one.
        let built = try Tool.run(
            swiftc, ["-O", "-g", sourcePath, "-module-name", "fixture", "-o", binary, "-Xlinker", "--build-id=sha1"])
        guard built.status == 0 else { throw Tool.Failure(description: "swiftc failed: \(built.stderr)") }
        let debugFile = dir + "/swift-trap.debug"
        let stripped = dir + "/stripped/swift-trap"
        try FileManager.default.createDirectory(atPath: dir + "/stripped", withIntermediateDirectories: true)
        for step in [
            ["objcopy", "--only-keep-debug", binary, debugFile],
            ["objcopy", "--strip-all", "--add-gnu-debuglink=\(debugFile)", binary, stripped],
        ] {
            guard let tool = Tool.which(step[0]) else { throw Tool.Failure(description: "\(step[0]) is not on PATH") }
            let r = try Tool.run(tool, Array(step.dropFirst()))
            guard r.status == 0 else { throw Tool.Failure(description: "\(step.joined(separator: " ")): \(r.stderr)") }
        }
        guard let readelf = Tool.which("readelf") else { throw Tool.Failure(description: "readelf is not on PATH") }
        let notes = try Tool.run(readelf, ["-n", binary]).stdout
        guard let range = notes.range(of: "Build ID: ") else { throw Tool.Failure(description: "no build id") }
        let buildID = String(notes[range.upperBound...].prefix { $0.isHexDigit })
        return SwiftTrapFixture(
            binary: binary, debugFile: debugFile, stripped: stripped, buildID: buildID,
            source: source)
    }

    /// Runs `executable` (this fixture, stripped or not) so that it traps with `kind`.
    package func crash(_ kind: String, executable: String? = nil) throws -> Crash {
        let r = try Tool.run(executable ?? binary, [kind])
        guard let line = r.stderr.split(separator: "\n").first(where: { $0.hasPrefix("trap pc=0x") }) else {
            throw Tool.Failure(description: "the fixture did not trap: \(r.stderr)")
        }
        let fields = line.split(separator: " ")
        guard fields.count == 3, let pc = UInt64(fields[1].dropFirst(5), radix: 16),
            let base = UInt64(fields[2].dropFirst(7), radix: 16)
        else {
            throw Tool.Failure(description: "unexpected fixture output: \(line)")
        }
        return Crash(pc: pc, loadAddress: base)
    }

    /// The 1-based line of the first source line containing `text`.
    package func line(of text: String) -> Int {
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
        return (lines.firstIndex { $0.contains(text) } ?? -1) + 1
    }

    /// An OTLP/JSON export request with one crash record for `crash`, as a collector stores it;
    /// with `threads`, its apsio.threads: the crashed thread and a "worker" at the same pc.
    package func otlpRequest(
        _ crash: Crash, imageName: String = "swift-trap", buildID: String? = nil, threads: Bool = false
    ) -> String {
        let id = buildID ?? self.buildID
        let offset = String(crash.pc - crash.loadAddress, radix: 16)
        let stack = "0 \(imageName) 0x\(String(format: "%016llx", crash.pc)) + 0x\(offset)"
        let images =
            "[{\"name\":\"\(imageName)\",\"build_id\":\"\(id)\",\"load_address\":\"0x\(String(format: "%016llx", crash.loadAddress))\",\"arch\":\"x86_64\",\"in_app\":true}]"
        func s(_ v: String) -> String {
            "\""
                + v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: "\\n") + "\""
        }
        let listed =
            "[{\"id\":7,\"name\":\"swift-trap\",\"crashed\":true,\"main\":true,\"state\":\"R\",\"context\":\"crash\",\"unwinder\":\"libunwind\",\"stacktrace\":\(s(stack))},"
            + "{\"id\":8,\"name\":\"worker\",\"crashed\":false,\"main\":false,\"state\":\"S\",\"context\":\"signal\",\"unwinder\":\"libunwind\",\"stacktrace\":\(s(stack))}]"
        let threadList =
            threads ? "\n               {\"key\":\"apsio.threads\",\"value\":{\"stringValue\":\(s(listed))}}," : ""
        return """
            {"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"shop"}}]},
             "scopeLogs":[{"scope":{"name":"aftermath"},"logRecords":[{
              "timeUnixNano":"1796042412257697805","severityNumber":21,"severityText":"FATAL","eventName":"app.crash",
              "attributes":[
               {"key":"exception.type","value":{"stringValue":"SIGILL (ILL_ILLOPN)"}},
               {"key":"exception.message","value":{"stringValue":"Swift runtime trap"}},
               {"key":"exception.stacktrace","value":{"stringValue":\(s(stack))}},
               {"key":"app.crash.id","value":{"stringValue":"357f434d-1544-458b-899e-9edb31bd8695"}},
               {"key":"apsio.crash.images","value":{"stringValue":\(s(images))}},\(threadList)
               {"key":"session.id","value":{"stringValue":"8adfa60b-e1e1-4b69-9cb2-6ef3129dc166"}},
               {"key":"service.version","value":{"stringValue":"4.12.0"}}]}]}]}]}
            """
    }
}
