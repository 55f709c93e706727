import Foundation

/// The two standard minidump readers, installed by scripts/minidump-readers.sh into the
/// package's .build/readers: rust-minidump's minidump-stackwalk and the toolchain's LLDB.
///
/// `require()` fails with what the script said when a reader cannot be installed, unless
/// AFTERMATH_NO_READERS=1 is set: then it returns nil and the caller skips the reader checks.
package enum MinidumpReaders {
    package struct Paths: Sendable {
        package var stackwalk: String
        package var dumpSyms: String
        package var lldb: String
    }

    package struct Unavailable: Error, CustomStringConvertible {
        package var description: String
    }

    /// AFTERMATH_NO_READERS=1: reader checks are skipped on purpose.
    package static var skipped: Bool { ProcessInfo.processInfo.environment["AFTERMATH_NO_READERS"] == "1" }

    /// The package's root directory.
    package static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// The script's answer, once per process.
    private static let installed: Result<Paths, Unavailable> = install()

    /// The readers' paths; nil when AFTERMATH_NO_READERS=1. Throws when they cannot be installed.
    package static func require() throws -> Paths? {
        if skipped { return nil }
        return try installed.get()
    }

    private static func install() -> Result<Paths, Unavailable> {
        let script = packageRoot + "/scripts/minidump-readers.sh"
        let run: Output
        do { run = try Self.run("/bin/bash", [script], timeout: 600) } catch {
            return .failure(Unavailable(description: "cannot run \(script): \(error)"))
        }
        var found: [String: String] = [:]
        for line in run.stdout.split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { continue }
            found[String(line[..<eq])] = String(line[line.index(after: eq)...])
        }
        guard run.status == 0, let stackwalk = found["minidump-stackwalk"], let dumpSyms = found["dump-syms"],
            let lldb = found["lldb"]
        else {
            return .failure(
                Unavailable(
                    description: "scripts/minidump-readers.sh could not install the minidump readers (exit "
                        + "\(run.status)): \(run.stderr.trimmingCharacters(in: .whitespacesAndNewlines)). "
                        + "Set AFTERMATH_NO_READERS=1 to skip the reader checks."))
        }
        return .success(Paths(stackwalk: stackwalk, dumpSyms: dumpSyms, lldb: lldb))
    }

    /// minidump-stackwalk --json --use-local-debuginfo: the processed dump as JSON, symbolicated
    /// from the binaries' own DWARF and CFI at the paths the module list names.
    package static func stackwalk(_ paths: Paths, dump: String) throws -> [String: Any] {
        let run = try Self.run(paths.stackwalk, ["--json", "--use-local-debuginfo", dump], timeout: 300)
        guard run.status == 0,
            let json = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        else {
            throw Unavailable(description: "minidump-stackwalk failed (exit \(run.status)): \(run.stderr)")
        }
        return json
    }

    /// lldb -b -c DUMP -o COMMAND...: its standard output.
    package static func lldb(_ paths: Paths, dump: String, commands: [String]) throws -> String {
        let arguments = ["-b", "-c", dump] + commands.flatMap { ["-o", $0] }
        let run = try Self.run(paths.lldb, arguments, timeout: 300)
        guard run.status == 0 else {
            throw Unavailable(description: "lldb failed (exit \(run.status)): \(run.stderr)\n\(run.stdout)")
        }
        return run.stdout
    }

    package struct Output {
        package var status: Int32
        package var stdout: String
        package var stderr: String
    }

    /// Runs a program to its end (killed past timeout seconds), its output through files.
    package static func run(_ program: String, _ arguments: [String], timeout: Double) throws -> Output {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-reader-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("stdout"), err = dir.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            throw Unavailable(description: "\(program) did not finish in \(Int(timeout)) s")
        }
        process.waitUntilExit()
        return Output(
            status: process.terminationStatus,
            stdout: String(decoding: (try? Data(contentsOf: out)) ?? Data(), as: UTF8.self),
            stderr: String(decoding: (try? Data(contentsOf: err)) ?? Data(), as: UTF8.self))
    }
}
