import CHarnessFaults
import CSignalShim
import Foundation
import TestSupport
import Testing

/// An app linked without `-z now` (Swift's default) binds each library function at its first
/// call: the dynamic linker looks the name up in every loaded image and saves the vector
/// registers on the stack it runs on. At a crash that stack is the alternate signal stack, and
/// the handler should neither spend its time there nor enter the linker at all: every function
/// the crash-time code calls is bound once the install has completed.
@Suite("The crash path's library calls bound before a crash")
struct CrashPathBindingTests {
    /// The library functions CSignalShim's crash-time objects call (`nm -u`): not its own, not
    /// data (`_r_debug`), not `_exit` (the last call of a helper process that is ending: there
    /// is nothing to bind it ahead with).
    static func crashPathCalls() throws -> [String] {
        var names = Set<String>()
        for object in AsyncSafetyTests.asyncObjects() {
            for name in try AsyncSafetyTests.undefinedSymbols(object)
            where !name.hasPrefix("aft_") && !name.hasPrefix("_U") && name != "_r_debug" && name != "_exit" {
                names.insert(name)
            }
        }
        return names.sorted()
    }

    /// What only a crash, a hang's capture or an unwinding helper calls is made through
    /// syscall(2) (sys_internal.h), bound once for them all, rather than bound one by one at every
    /// start for a crash most runs never have.
    @Test("The crash path's own system calls go through syscall(2): no wrapper of theirs to bind at start")
    func crashOnlyCallsAreRaw() throws {
        let calls = try Self.crashPathCalls()
        let crashOnly =
            ["kill", "waitpid", "nanosleep", "unlinkat", "write", "lseek", "ftruncate", "fsync"]
            + ["sigpending", "getppid"]
        #expect(calls.contains("syscall"))
        #expect(calls.filter(crashOnly.contains) == [], "\(calls)")
    }

    @Test("A fresh process: once the install has completed, no crash-time call is left unbound")
    func boundAfterCompletion() async throws {
        let calls = try Self.crashPathCalls()
        // About 25: the calls only a crash makes go through syscall (crashOnlyCallsAreRaw), and an
        // optimised build inlines a few more.
        #expect(calls.count >= 20, "only \(calls) found: the check would prove little")
        #expect(calls.contains("__sigsetjmp") && calls.contains("pwrite") && calls.contains("syscall"))
        let directory = TestSupport.childDirectory("crash-path-binding")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // The exit test's process is a new one: its slots are as an app's at start.
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            [directory = directory as String] in
            guard let calls = try? CrashPathBindingTests.crashPathCalls() else { exit(90) }
            // The check sees lazy binding: some slot of the crash path is unbound before.
            guard calls.contains(where: { aft_test_call_slot_unbound($0) == 1 }) else { exit(91) }
            var options = aft_install_options()
            options.timing_fd = -1
            var error = [CChar](repeating: 0, count: 256)
            let status = directory.withCString { dir in
                options.crash_directory = dir
                return aft_install(&options, &error, error.count)
            }
            guard status == 0 else { exit(92) }
            aft_install_complete()
            let unbound = calls.filter { aft_test_call_slot_unbound($0) == 1 }
            print("unbound: \(unbound.joined(separator: " "))")
            exit(0)
        }
        let text = result.map { String(decoding: $0.standardOutputContent, as: UTF8.self) }
        #expect(text == "unbound: \n", "\(text ?? "no output")")
    }
}
