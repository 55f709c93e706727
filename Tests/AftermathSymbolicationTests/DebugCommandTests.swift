import AftermathSymbolication
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The `aftermath` command, run as a subprocess: options, exit codes, --json and --help on every
/// command, `show` for every kind, `symbolicate` off the device.
@Suite(.serialized) struct DebugCommandTests {
    /// A reports directory holding one report of each kind, from the real handler's fixtures.
    static func reportsDirectory() throws -> String {
        let root = try Tool.temporaryDirectory("cli")
        for sub in ["crashes", "hangs", "runs", "errors", "rejected"] {
            try FileManager.default.createDirectory(
                atPath: "\(root)/\(sub)", withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        let copies = [
            ("v1/sigsegv-null-depth12.crash", "crashes/0d9a3b7e-5d7c-4b71-9f3b-1c2d3e4f5a6b.crash"),
            ("v1/hang-unfinished-killed.hang", "hangs/5c0ffee0-0000-4000-8000-000000000001.hang"),
            ("v1/run-killed-during-hang.run", "runs/5c0ffee0-0000-4000-8000-000000000002.run"),
            ("v1/handled-error.error", "errors/5c0ffee0-0000-4000-8000-000000000003.error"),
        ]
        for (fixture, name) in copies {
            try TestSupport.write(try TestSupport.fixture(fixture), to: "\(root)/\(name)")
        }
        return root
    }

    struct Listing: Decodable {
        struct Entry: Decodable {
            var kind: String
            var id: String
        }
        var reports: [Entry]
    }

    struct View: Decodable {
        struct Frame: Decodable {
            var index: Int
            var address: String
            var function: String?
            var file: String?
            var line: Int?
            var inlined: [Inlined]
            var inApp: Bool
        }
        struct Inlined: Decodable { var function: String }
        struct Image: Decodable {
            var name: String
            var buildID: String
            var debugInfoFound: Bool
            var debugSource: String?
            var problems: [String]
        }
        struct Register: Decodable {
            var name: String
            var value: String
        }
        struct Failure: Decodable {
            var reason: String
            var message: String
        }
        var kind: String
        var time: String
        var session: String?
        var release: String?
        var explanation: String?
        var swiftRuntimeFailure: Failure?
        struct Thread: Decodable {
            var name: String
            var crashed: Bool
            var frames: [Frame]
        }
        var frames: [Frame]
        var registers: [Register]
        var images: [Image]
        var threads: [Thread]?
    }

    @Test("list: every kind, as text and --json; exit 0")
    func list() throws {
        let dir = try Self.reportsDirectory()
        let text = try Tool.aftermath(["list", "--dir", dir])
        #expect(text.status == 0, "\(text.stderr)")
        let json = try Tool.aftermath(["list", "--dir", dir, "--json"])
        #expect(json.status == 0)
        let listing = try JSONDecoder().decode(Listing.self, from: Data(json.stdout.utf8))
        #expect(Set(listing.reports.map(\.kind)).isSuperset(of: ["crash", "hang", "error"]))
        for entry in listing.reports { #expect(text.stdout.contains(entry.id)) }
    }

    @Test("an empty directory lists nothing with exit 1; a missing one is an error, not an empty list")
    func emptyAndMissing() throws {
        let empty = try Tool.temporaryDirectory("cli-empty")
        #expect(try Tool.aftermath(["list", "--dir", empty]).status == 1)
        #expect(try Tool.aftermath(["dump", "--dir", empty]).status == 1)
        let missing = try Tool.aftermath(["list", "--dir", empty + "/nope"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("no such reports directory"))
        #expect(missing.stdout.isEmpty)
        #expect(try Tool.aftermath(["show", "x", "--dir", empty]).status == 1)
    }

    @Test(
        "unknown options, missing values, stray operands: usage errors, exit 2",
        arguments: [
            ["list", "--dri", "/tmp"], ["list", "--dir"], ["show"], ["show", "a", "b"], ["list", "x"],
            ["symbolicate"], ["symbolicate", "x", "--debug-dir"], ["frobnicate"], [], ["dump", "--json=yes"],
            ["list", "--dir", "/tmp", "--service", "x"], ["show", "x", "--no-symbol"],
            ["show", "x", "--threads", "some"], ["show", "x", "--threads"], ["minidump"], ["minidump", "a", "b"],
            ["minidump", "x", "-o"], ["minidump", "x", "--json"], ["minidump", "x", "-o", "a", "-o", "b"],
        ])
    func usageErrors(arguments: [String]) throws {
        let r = try Tool.aftermath(arguments)
        #expect(r.status == 2, "\(arguments): \(r.stdout) \(r.stderr)")
        #expect(!r.stderr.isEmpty)
    }

    @Test("--help for each command: its usage, exit 0", arguments: ["list", "show", "dump", "symbolicate", "minidump"])
    func help(command: String) throws {
        for arguments in [[command, "--help"], ["help", command]] {
            let r = try Tool.aftermath(arguments)
            #expect(r.status == 0)
            #expect(r.stdout.contains("usage: aftermath \(command)"))
        }
        #expect(try Tool.aftermath(["--help"]).stdout.contains("symbolicate"))
    }

    @Test("show: every kind, as text and --json", arguments: ["crash", "hang", "error"])
    func show(kind: String) throws {
        let dir = try Self.reportsDirectory()
        let listing = try JSONDecoder().decode(
            Listing.self, from: Data(try Tool.aftermath(["list", "--dir", dir, "--json"]).stdout.utf8))
        let entry = try #require(listing.reports.first { $0.kind == kind })
        let text = try Tool.aftermath(["show", entry.id, "--dir", dir], environment: ["NO_COLOR": "1"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(!text.stdout.contains("\u{1B}["))
        let json = try Tool.aftermath(["show", entry.id, "--dir", dir, "--json"])
        #expect(json.status == 0)
        let view = try JSONDecoder().decode(View.self, from: Data(json.stdout.utf8))
        #expect(view.kind == kind)
        #expect(text.stdout.contains(view.time))
        if let session = view.session { #expect(text.stdout.contains(session)) }
        #expect(!view.frames.isEmpty)
        #expect(text.stdout.contains("Images:"))
        for image in view.images {
            #expect(text.stdout.contains(image.buildID))
            if !image.debugInfoFound { #expect(!image.problems.isEmpty) }
        }
        if kind == "crash" {
            #expect(text.stdout.contains("Signal:"))
            #expect(text.stdout.contains("Registers:"))
            #expect(view.registers.contains { $0.name == "rip" || $0.name == "pc" })
        }
    }

    @Test("show: an abnormal exit (a real app SIGKILLed while it waits)")
    func showAbnormalExit() throws {
        let dir = try Tool.temporaryDirectory("cli-exit") + "/reports"
        BrokenPipe.ignoreSIGPIPE()
        let child = Process()
        child.executableURL = URL(fileURLWithPath: Tool.productsDirectory + "/exit-harness")
        child.arguments = ["child", "wait", dir]
        let input = Pipe(), output = Pipe()
        child.standardInput = input
        child.standardOutput = output
        child.standardError = FileHandle.nullDevice
        try child.run()
        let ready = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        #expect(ready.hasPrefix("READY"))
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()

        let listing = try JSONDecoder().decode(
            Listing.self, from: Data(try Tool.aftermath(["list", "--dir", dir, "--json"]).stdout.utf8))
        let entry = try #require(listing.reports.first { $0.kind == "abnormal_exit" })
        let text = try Tool.aftermath(["show", entry.id, "--dir", dir])
        #expect(text.status == 0)
        #expect(text.stdout.hasPrefix("Abnormal exit"))
        #expect(text.stdout.contains("App:          exit-harness, release 1.0"))
        #expect(text.stdout.contains("Exit source:"))
        let json = try Tool.aftermath(["show", entry.id, "--dir", dir, "--json"])
        #expect(try JSONDecoder().decode(View.self, from: Data(json.stdout.utf8)).kind == "abnormal_exit")
    }

    @Test("symbolicate an OTLP/JSON record of a -O -g Swift trap: the trap's reason, file:line, in text and --json")
    func symbolicateRecord() throws {
        let fixture = try SwiftTrapFixture.get()
        let crash = try fixture.crash("force-unwrap", executable: fixture.stripped)
        let dir = try Tool.temporaryDirectory("cli-otlp")
        try fixture.otlpRequest(crash, threads: true).write(
            toFile: dir + "/request.json", atomically: true, encoding: .utf8)
        let debugDir = try Tool.temporaryDirectory("cli-debug")
        try FileManager.default.copyItem(atPath: fixture.debugFile, toPath: debugDir + "/swift-trap.debug")

        let text = try Tool.aftermath(
            ["symbolicate", dir + "/request.json", "--debug-dir", debugDir],
            environment: ["NO_COLOR": "1"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("force-unwrap of nil"))
        #expect(text.stdout.contains("swift-trap.swift:\(fixture.line(of: "func forceUnwrap")):"))
        #expect(text.stdout.contains("[inlined] Swift runtime failure: Unexpectedly found nil"))

        let json = try Tool.aftermath(["symbolicate", dir + "/request.json", "--debug-dir", debugDir, "--json"])
        let views = try JSONDecoder().decode([View].self, from: Data(json.stdout.utf8))
        let view = try #require(views.first)
        #expect(view.swiftRuntimeFailure?.reason == "force-unwrap of nil")
        #expect(view.explanation?.contains("force-unwrap of nil") == true)
        #expect(view.frames.first?.inApp == true)
        #expect(view.frames.first?.inlined.first?.function.hasPrefix("Swift runtime failure") == true)
        #expect(view.images.first?.debugInfoFound == true)
        #expect(view.images.first?.debugSource == "--debug-dir")
        // Every thread of apsio.threads, symbolicated as the crash's own frames: the crashed
        // one first, with the trap's function.
        let threads = try #require(view.threads, "the record's apsio.threads")
        #expect(threads.map(\.name) == ["swift-trap", "worker"])
        #expect(threads.first?.crashed == true && threads.filter(\.crashed).count == 1)
        #expect(threads.allSatisfy { $0.frames.first?.function == view.frames.first?.function })
        #expect(view.frames.first?.function != nil)
        #expect(text.stdout.contains("Thread 8 \"worker\""), "the other thread in the text view")

        // Without the debug files: no names, and the image says why.
        let bare = try Tool.aftermath(["symbolicate", dir + "/request.json", "--json"])
        let bareView = try #require(try JSONDecoder().decode([View].self, from: Data(bare.stdout.utf8)).first)
        #expect(bareView.swiftRuntimeFailure == nil)
        #expect(bareView.images.first?.debugInfoFound == false)
        #expect(bareView.images.first?.problems.isEmpty == false)
    }

    @Test("symbolicate: a debug file of another build is refused, and that is said for the image")
    func symbolicateMismatch() throws {
        let fixture = try SwiftTrapFixture.get()
        let crash = try fixture.crash("index-out-of-range", executable: fixture.stripped)
        let dir = try Tool.temporaryDirectory("cli-mismatch")
        let other = String(repeating: "cd", count: 20)
        try fixture.otlpRequest(crash, buildID: other).write(
            toFile: dir + "/request.json", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: fixture.debugFile, toPath: dir + "/swift-trap.debug")
        let r = try Tool.aftermath(["symbolicate", dir + "/request.json", "--debug-dir", dir, "--json"])
        #expect(r.status == 0)
        let view = try #require(try JSONDecoder().decode([View].self, from: Data(r.stdout.utf8)).first)
        #expect(view.frames.first?.function == nil)
        let image = try #require(view.images.first)
        #expect(!image.debugInfoFound)
        #expect(image.problems.contains { $0.contains(fixture.buildID) && $0.contains(other) })
    }

    @Test("symbolicate: a report file, a pending report id, stdin; a missing input is exit 1")
    func symbolicateInputs() throws {
        let dir = try Self.reportsDirectory()
        let crashFile = dir + "/crashes/0d9a3b7e-5d7c-4b71-9f3b-1c2d3e4f5a6b.crash"
        let copy = try Tool.temporaryDirectory("cli-file") + "/device.crash"
        try FileManager.default.copyItem(atPath: crashFile, toPath: copy)
        let byFile = try Tool.aftermath(["symbolicate", copy, "--json"])
        #expect(byFile.status == 0, "\(byFile.stderr)")
        let view = try #require(try JSONDecoder().decode([View].self, from: Data(byFile.stdout.utf8)).first)
        #expect(view.kind == "crash")
        #expect(!view.registers.isEmpty)

        let listing = try JSONDecoder().decode(
            Listing.self, from: Data(try Tool.aftermath(["list", "--dir", dir, "--json"]).stdout.utf8))
        let hang = try #require(listing.reports.first { $0.kind == "hang" })
        let byID = try Tool.aftermath(["symbolicate", hang.id, "--dir", dir, "--json"])
        #expect(byID.status == 0)
        #expect(try JSONDecoder().decode([View].self, from: Data(byID.stdout.utf8)).first?.kind == "hang")

        // OTLP/JSON on stdin: JSON lines, one request a line, as the collector's file exporter writes.
        let fixture = try SwiftTrapFixture.get()
        let crash = try fixture.crash("arithmetic-overflow")
        let line = fixture.otlpRequest(crash).replacingOccurrences(of: "\n", with: "")
        let byStdin = try Tool.aftermath(["symbolicate", "-", "--json"], input: Data((line + "\n" + line + "\n").utf8))
        #expect(byStdin.status == 0, "\(byStdin.stderr)")
        let stdinViews = try JSONDecoder().decode([View].self, from: Data(byStdin.stdout.utf8))
        #expect(stdinViews.count == 2)
        #expect(stdinViews.first?.frames.first?.address == String(format: "0x%016llx", crash.pc))

        #expect(try Tool.aftermath(["symbolicate", "no-such-report", "--dir", dir]).status == 1)
        let garbage = try Tool.temporaryDirectory("cli-garbage") + "/x.json"
        try "{\"nothing\": true}\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        #expect(try Tool.aftermath(["symbolicate", garbage]).status == 1)
    }

    @Test("colour on a terminal only, never with NO_COLOR")
    func colour() throws {
        guard let script = Tool.which("script") else {
            Issue.record("script(1) (util-linux) is needed to give the command a terminal")
            return
        }
        let dir = try Self.reportsDirectory()
        let listing = try JSONDecoder().decode(
            Listing.self, from: Data(try Tool.aftermath(["list", "--dir", dir, "--json"]).stdout.utf8))
        let id = try #require(listing.reports.first { $0.kind == "crash" }).id
        let command = "\(Tool.aftermath) show \(id) --dir \(dir)"
        let onTerminal = try Tool.run(script, ["-q", "-e", "-c", command, "/dev/null"], removing: ["NO_COLOR"])
        #expect(onTerminal.stdout.contains("\u{1B}[1m"))
        let noColour = try Tool.run(script, ["-q", "-e", "-c", command, "/dev/null"], environment: ["NO_COLOR": "1"])
        #expect(noColour.status == 0)
        #expect(!noColour.stdout.contains("\u{1B}["))
        let piped = try Tool.aftermath(["show", id, "--dir", dir], environment: ["NO_COLOR": ""])
        #expect(!piped.stdout.contains("\u{1B}["))
    }
}

extension DebugCommandTests {
    @Test("symbolicate an OTLP/JSON record where the app ran: its libraries by name and build id, no --debug-dir")
    func symbolicateFindsLoadedLibraries() throws {
        let fixture = try SwiftTrapFixture.get()
        // The Swift runtime as this process loaded it (the aftermath command loads the same).
        let bytes = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/maps")).readToEnd()
        let maps = String(decoding: bytes ?? Data(), as: UTF8.self)
        let line = try #require(
            maps.split(separator: "\n").first { $0.hasSuffix("/libswiftCore.so") && $0.contains(" 00000000 ") })
        let start = try #require(UInt64(line.prefix { $0 != "-" }, radix: 16))
        let path = String(line[try #require(line.firstIndex(of: "/"))...])
        let handle = try #require(dlopen(path, RTLD_NOW | RTLD_NOLOAD))
        let symbol = try #require(dlsym(handle, "swift_retain"))
        let buildID = try #require(DebugFileLocator.buildID(of: path))
        let crash = SwiftTrapFixture.Crash(pc: UInt64(UInt(bitPattern: symbol)) + 4, loadAddress: start)
        let dir = try Tool.temporaryDirectory("cli-loaded")
        try fixture.otlpRequest(crash, imageName: "libswiftCore.so", buildID: buildID).write(
            toFile: dir + "/request.json", atomically: true, encoding: .utf8)

        let json = try Tool.aftermath(["symbolicate", dir + "/request.json", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let view = try #require(try JSONDecoder().decode([View].self, from: Data(json.stdout.utf8)).first)
        #expect(view.frames.first?.function?.contains("swift_retain") == true, "\(view.frames.first as Any)")
        #expect(view.images.first?.problems.contains { $0.hasPrefix("no binary") } == false)

        // Another build of the same name is not used.
        let other = String(repeating: "ab", count: 20)
        try fixture.otlpRequest(crash, imageName: "libswiftCore.so", buildID: other).write(
            toFile: dir + "/other.json", atomically: true, encoding: .utf8)
        let refused = try Tool.aftermath(["symbolicate", dir + "/other.json", "--json"])
        let refusedView = try #require(try JSONDecoder().decode([View].self, from: Data(refused.stdout.utf8)).first)
        #expect(refusedView.frames.first?.function == nil)
        #expect(refusedView.images.first?.problems.contains { $0.contains("has build id \(buildID)") } == true)
    }
}
