import Foundation
import Testing

/// The crash-time boundary, checked on the compiled objects: every `_async.c` object may only
/// call async-signal-safe functions (signal-safety(7)), its own aft_async_* helpers and
/// libunwind's local unwinder.
@Suite("Async-signal safety")
struct AsyncSafetyTests {
    static let allowed: Set<String> = [
        // signal-safety(7)
        "_exit", "abort", "clock_gettime", "close", "fsync", "getpid", "nanosleep", "open", "openat",
        "pwrite", "read", "renameat", "sigaction", "sigaddset", "sigemptyset", "sigprocmask",
        "pthread_sigmask", "syscall", "write", "memcpy", "memset", "memmove", "kill", "raise",
        "clock_nanosleep", "ftruncate", "lseek", "unlinkat", "fstat", "getppid", "pthread_kill",
        "pthread_self", "sigfillset", "sigismember", "sigdelset", "poll", "pipe", "dup2",
        // errno is thread-local storage, read through this accessor
        "__errno_location",
        // the stack protector's failure path aborts
        "__stack_chk_fail",
        // data, not a call: the loader's debug structure, read with process_vm_readv
        "_r_debug",
        // alarm(2) is on the list; sigsetjmp/siglongjmp only leave a fault inside our own
        // writer (no lock of ours or libc's is held there)
        "alarm", "__sigsetjmp", "siglongjmp",
    ]

    static func isAllowed(_ symbol: String) -> Bool {
        allowed.contains(symbol) || symbol.hasPrefix("aft_async_") || symbol.hasPrefix("aft_g_")
            || symbol.hasPrefix("_ULx86_64_") || symbol.hasPrefix("_ULaarch64_")
            || symbol.hasPrefix("_Ux86_64_") || symbol.hasPrefix("_Uaarch64_")
            || symbol == "unw_backtrace" || symbol.hasPrefix("aft_watchdog_g_") || symbol.hasPrefix("aft_runs_g_")
    }

    /// The package's build directory, found from this source file.
    static func asyncObjects() -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let build = root.appendingPathComponent(".build").path
        guard let walker = FileManager.default.enumerator(atPath: build) else { return [] }
        var out: [String: (String, Date)] = [:]
        while let item = walker.nextObject() as? String {
            guard item.contains("CSignalShim.build/"), item.hasSuffix("_async.c.o") else { continue }
            let path = build + "/" + item
            let name = (item as NSString).lastPathComponent
            let date = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantPast
            if let existing = out[name], existing.1 >= date { continue }
            out[name] = (path, date) // the newest build of each object
        }
        return out.values.map(\.0).sorted()
    }

    static func undefinedSymbols(_ object: String) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["nm", "-u", object]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.fileReadUnknown) }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap {
            $0.split(separator: " ").last.map { String($0.split(separator: "@").first ?? $0) }
        }
    }

    @Test("Crash-time objects call only async-signal-safe functions")
    func undefinedSymbolsAreAllowed() throws {
        let objects = Self.asyncObjects()
        let names = Set(objects.map { ($0 as NSString).lastPathComponent })
        for required in ["handler_async.c.o", "report_async.c.o", "images_async.c.o", "unwind_async.c.o", "safe_io_async.c.o"] {
            #expect(names.contains(required), "\(required) not found under .build: the check would prove nothing")
        }
        for object in objects {
            let bad = try Self.undefinedSymbols(object).filter { !Self.isAllowed($0) }
            #expect(bad.isEmpty, "\((object as NSString).lastPathComponent) calls \(bad)")
        }
    }

    @Test("The allowlist itself rejects what the handler must never call")
    func allowlistRejectsUnsafe() {
        for symbol in ["malloc", "free", "printf", "snprintf", "fopen", "pthread_mutex_lock", "dl_iterate_phdr", "dladdr", "backtrace", "strerror", "opendir"] {
            #expect(!Self.isAllowed(symbol))
        }
    }
}
