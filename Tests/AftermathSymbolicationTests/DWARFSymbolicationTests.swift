import AftermathSymbolication
import Foundation
import Testing
import TestSupport

/// DWARF symbolication of a real optimized Swift crash (the fixture built with swiftc -O -g):
/// function, file:line:column, inlined frames, the trap's reason, and debug files by build id.
@Suite(.serialized) struct DWARFSymbolicationTests {
    let fixture: SwiftTrapFixture

    init() throws { fixture = try SwiftTrapFixture.get() }

    func image(_ path: String, _ crash: SwiftTrapFixture.Crash, buildID: String? = nil) -> ImageReference {
        ImageReference(
            name: "swift-trap", path: path, buildID: buildID ?? fixture.buildID,
            loadAddress: crash.loadAddress, isInApp: true)
    }

    @Test(
        "a force-unwrap trap: the runtime failure as an inlined frame, the function, file:line:column",
        arguments: [
            ("force-unwrap", "force-unwrap of nil", "func forceUnwrap"),
            ("index-out-of-range", "index out of range", "func index"),
            ("arithmetic-overflow", "arithmetic overflow", "func overflow"),
            ("precondition", "precondition failure", "func precondition"),
        ])
    func swiftTrap(kind: String, reason: String, function: String) throws {
        let crash = try fixture.crash(kind)
        let symbolicator = DWARFSymbolicator(locator: DebugFileLocator(debugDirectories: [], debuginfod: false))
        let frame = try #require(
            symbolicator.symbolicate(
                address: crash.pc, image: image(fixture.binary, crash),
                isReturnAddress: false))
        let failure = try #require(frame.swiftRuntimeFailure)
        #expect(failure.reason == reason)
        #expect(frame.inlined.first?.name.hasPrefix("Swift runtime failure: ") == true)
        #expect(frame.demangled.hasPrefix("fixture." + function.dropFirst(5)))
        let location = try #require(frame.location)
        #expect(location.file.hasSuffix("swift-trap.swift"))
        #expect(location.line == fixture.line(of: function))
        #expect(location.column > 0)
    }

    @Test("the stripped binary: DWARF from the debug file found by build id in --debug-dir")
    func debugDirectoryByBuildID() throws {
        let crash = try fixture.crash("force-unwrap", executable: fixture.stripped)
        let dir = try Tool.temporaryDirectory("debug-dir")
        let id = fixture.buildID
        try FileManager.default.createDirectory(
            atPath: "\(dir)/.build-id/\(id.prefix(2))",
            withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: fixture.debugFile,
            toPath: "\(dir)/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug")
        // Only the name and build id are known off the device: no path.
        let reference = ImageReference(
            name: "swift-trap", path: nil, buildID: id,
            loadAddress: crash.loadAddress, isInApp: true)
        let locator = DebugFileLocator(debugDirectories: [dir], debuginfod: false)
        let files = locator.locate(reference)
        #expect(files.hasDWARF)
        #expect(files.source == .debugDirectory)
        #expect(files.problems.isEmpty)
        let frame = try #require(
            DWARFSymbolicator(locator: locator).symbolicate(
                address: crash.pc, image: reference, isReturnAddress: false))
        #expect(frame.swiftRuntimeFailure?.reason == "force-unwrap of nil")
        #expect(frame.location?.line == fixture.line(of: "func forceUnwrap"))

        // Without the directory, nothing is found, and that is said.
        let none = DebugFileLocator(debugDirectories: [], systemRoot: dir + "/nowhere", debuginfod: false)
            .locate(reference)
        #expect(!none.hasDWARF)
        #expect(!none.problems.isEmpty)
    }

    @Test("the debug link next to the stripped binary, and a debug file with another build id is refused, said")
    func debugLinkAndMismatch() throws {
        let crash = try fixture.crash("arithmetic-overflow", executable: fixture.stripped)
        let strippedDir = (fixture.stripped as NSString).deletingLastPathComponent
        let linked = strippedDir + "/swift-trap.debug"
        try? FileManager.default.removeItem(atPath: linked)
        try FileManager.default.copyItem(atPath: fixture.debugFile, toPath: linked)
        defer { try? FileManager.default.removeItem(atPath: linked) }
        let locator = DebugFileLocator(debugDirectories: [], debuginfod: false)
        let files = locator.locate(image(fixture.stripped, crash))
        #expect(files.hasDWARF)
        #expect(files.debugFile == linked)
        #expect(files.problems.isEmpty)

        // The report says another build (a rebuilt binary): the files on disk are not used.
        let other = String(repeating: "ab", count: 20)
        let mismatched = locator.locate(image(fixture.stripped, crash, buildID: other))
        #expect(!mismatched.hasDWARF)
        #expect(mismatched.binary == nil)
        #expect(mismatched.problems.contains { $0.contains("build id") && $0.contains(fixture.stripped) })
        let frame = DWARFSymbolicator(locator: locator).symbolicate(
            address: crash.pc, image: image(fixture.stripped, crash, buildID: other), isReturnAddress: false)
        #expect(frame == nil)
    }

    @Test("a .gnu_debuglink name in .debug/ beside the binary, and the system's .build-id tree")
    func debugLinkNameAndSystemTree() throws {
        let crash = try fixture.crash("force-unwrap", executable: fixture.stripped)
        let dir = try Tool.temporaryDirectory("debuglink")
        try FileManager.default.createDirectory(atPath: dir + "/.debug", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture.debugFile, toPath: dir + "/.debug/renamed.dbg")
        let binary = dir + "/swift-trap"
        let objcopy = try #require(Tool.which("objcopy"))
        let linked = try Tool.run(
            objcopy,
            [
                "--strip-all", "--add-gnu-debuglink=\(dir)/.debug/renamed.dbg",
                fixture.binary, binary,
            ])
        #expect(linked.status == 0, "\(linked.stderr)")
        let locator = DebugFileLocator(debugDirectories: [], systemRoot: dir + "/none", debuginfod: false)
        let files = locator.locate(image(binary, crash))
        #expect(files.source == .debugLink)
        #expect(files.debugFile == dir + "/.debug/renamed.dbg")
        #expect(files.binary == binary)

        // The binary is gone; the system tree has the debug file by build id.
        let root = try Tool.temporaryDirectory("system-debug")
        let id = fixture.buildID
        try FileManager.default.createDirectory(
            atPath: "\(root)/.build-id/\(id.prefix(2))", withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: fixture.debugFile, toPath: "\(root)/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug")
        let system = DebugFileLocator(debugDirectories: [], systemRoot: root, debuginfod: false)
        let gone = ImageReference(
            name: "swift-trap", path: dir + "/missing/swift-trap", buildID: id,
            loadAddress: crash.loadAddress, isInApp: true)
        #expect(system.locate(gone).source == .systemBuildID)
        let frame = DWARFSymbolicator(locator: system).symbolicate(
            address: crash.pc, image: gone, isReturnAddress: false)
        #expect(frame?.swiftRuntimeFailure?.reason == "force-unwrap of nil")
    }

    @Test("C++ and Swift names demangle; others stay as they are")
    func demangling() {
        #expect(Demangler.demangle("_ZN3foo3barEi") == "foo::bar(int)")
        #expect(
            Demangler.demangle("_ZNSt6vectorIiSaIiEE9push_backERKi")
                == "std::vector<int, std::allocator<int> >::push_back(int const&)")
        #expect(Demangler.demangle("$sSi") == "Swift.Int")
        #expect(Demangler.demangle("main") == "main")
        #expect(Demangler.demangle("_Znot a name") == "_Znot a name")
    }

    @Test("runtime failure messages map to reasons people know")
    func reasons() {
        #expect(
            SwiftRuntimeFailure(
                functionName:
                    "Swift runtime failure: Unexpectedly found nil while implicitly unwrapping an Optional value")?
                .reason == "force-unwrap of nil")
        #expect(
            SwiftRuntimeFailure(functionName: "Swift runtime failure: Division by zero")?.reason == "division by zero")
        #expect(SwiftRuntimeFailure(functionName: "Swift runtime failure: something new")?.reason == "something new")
        #expect(SwiftRuntimeFailure(functionName: "swift_retain") == nil)
    }
}
