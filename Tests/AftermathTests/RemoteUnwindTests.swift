import Aftermath
import AftermathNextLaunch
import AftermathSymbolication
import CHarnessFaults
import CSignalShim
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The crashing thread unwound at the next launch from its crash file alone (registers and
/// captured stack bytes, the images' files on disk), against the frames the handler unwound
/// in the crashed process.
@Suite("Unwinding at the next launch")
struct RemoteUnwindTests {
    enum Death: String, CaseIterable, Sendable {
        case nullDereference = "a null dereference 40 Swift frames deep"
        case abort = "abort() through libc"
        case divide = "an integer division by zero in C"
    }

    @inline(never)
    static func recurse(_ n: Int) -> Int {
        if n == 0 {
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
            return 0
        }
        return recurse(n - 1) &+ n
    }

    #if compiler(>=6.2)
    /// The crash of one child: its report, the handler unwinding itself or leaving it to the
    /// next launch.
    static func crash(_ death: Death, unwindInHandler: Bool) async throws -> CrashReport {
        let directory: String = TestSupport.childDirectory("remote-unwind")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let signal: Int32 = death == .abort ? SIGABRT : death == .divide ? SIGFPE : SIGSEGV
        await #expect(processExitsWith: .signal(signal)) {
            [directory = directory as String, death = death.rawValue as String, inHandler = unwindInHandler as Bool] in
            ExitStatusTests.childStart(directory)
            aft_install_complete()
            aft_test_unwind_in_handler(inHandler ? 1 : 0)
            switch Death(rawValue: death)! {
            case .nullDereference: _ = RemoteUnwindTests.recurse(40)
            case .abort: abort()
            case .divide: _ = aft_test_divide(1, 0)
            }
            _exit(0)
        }
        return try #require(EveryThreadTests.crashes(directory).first)
    }

    /// Each frame as its image's path and its offset there (two processes, two layouts).
    static func placed(_ crash: CrashReport) -> [String] {
        crash.frames.map { pc in
            guard let image = crash.images.first(where: { pc >= $0.start && pc < $0.end }) else { return "?" }
            return "\(image.path)+\(String(pc - image.start, radix: 16))"
        }
    }

    @Test("Left to the next launch: the frames the handler would have unwound, in order", arguments: Death.allCases)
    func sameFramesAsTheHandler(death: Death) async throws {
        let here = try await Self.crash(death, unwindInHandler: true)
        let later = try await Self.crash(death, unwindInHandler: false)
        #expect(here.unwinder == .libunwind && !here.unwoundAtNextLaunch && here.frames.count > 3)
        #expect(later.unwinder == .libunwind && later.unwoundAtNextLaunch && !later.framesTruncated)
        #expect(Self.placed(later) == Self.placed(here))
        // The crashed thread's record carries the same stack as the crash.
        #expect(later.threads.first(where: \.crashed)?.frames == later.frames)
        if death == .nullDereference {
            #expect(later.frames.count > 40, "every Swift frame")
        }
    }

    @Test("A thread known by sp and pc alone: the next launch finds its frame pointer where the guess was wrong")
    func threadKnownBySPAndPC() async throws {
        let directory: String = TestSupport.childDirectory("remote-unwind-sp-pc")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            aft_install_complete()
            guard aft_test_start_workers(AFT_TEST_WORKER_BLOCKS_SIGNALS, 1) == 0 else { _exit(97) }
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
            _exit(0)
        }
        var crash = try #require(EveryThreadTests.crashes(directory).first)
        let index = try #require(crash.threads.firstIndex { $0.contextSource == .syscall && !$0.isAftermath })
        let handlers = crash.threads[index].frames
        #expect(handlers.count >= 3)
        #if arch(x86_64)
        #expect(crash.threads[index].framePointerFromTables, "found by libc's unwind tables and a prologue")
        #endif
        // As if the handler had scanned for a record and taken a wrong one: no frame pointer,
        // the pc alone.
        let fp = try #require(FramePointerWalk.fpIndex(crash.context.architecture))
        crash.threads[index].registers[fp] = 0
        crash.threads[index].framePointerFromTables = false
        crash.threads[index].frames = [crash.threads[index].pc]
        crash.reunwindThreadsKnownBySPAndPC()
        #expect(crash.threads[index].frames == handlers)
        #expect(crash.threads[index].registers[fp] != 0)
    }
    #endif
}

extension RemoteUnwindTests {
    @Test("Hostile registers, stack bytes and images: the walk ends, never the process")
    func hostileInput() throws {
        var generator = SystemRandomNumberGenerator()
        func image(_ start: UInt64, _ end: UInt64, _ bias: UInt64, _ path: String) -> LoadedImage {
            var i = aft_image()
            i.start = start
            i.end = end
            i.load_bias = bias
            i.arch = Architecture.current.code
            i.build_id_size = 4
            withUnsafeMutableBytes(of: &i.path) { raw in
                for (k, byte) in path.utf8.enumerated() { raw[k] = byte }
            }
            return LoadedImage(i)
        }
        // The test binary itself under a build id it does not have, and a device.
        let images = [
            image(0x1000, 0x7fff_ffff_ffff, 0x1000, "/proc/self/exe"), image(0, .max, .max, "/dev/zero"),
        ]
        for round in 0..<300 {
            let registers = (0..<34).map { _ in UInt64.random(in: 0...UInt64.max, using: &generator) }
            var stack = (0..<512).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let start = registers[7] & ~7
            if round % 3 == 0 {  // a frame chain that points at itself
                withUnsafeBytes(of: start.littleEndian) { stack.replaceSubrange(0..<8, with: $0) }
            }
            let result = RemoteUnwinder.unwind(
                registers: registers, stackStart: start, stack: stack,
                images: round % 2 == 0 ? images : [], architecture: .current)
            #expect((result?.frames.count ?? 0) <= RemoteUnwinder.capacity)
        }
        #expect(
            RemoteUnwinder.unwind(
                registers: [1, 2, 3], stackStart: 0, stack: [1], images: [], architecture: .unknown) == nil)
    }

    /// Blocks the calling thread for good in a library function without unwind tables in the
    /// toolchain's libswiftDispatch (`DispatchSemaphore.wait(timeout:)`: no table entry, no
    /// frame record), which the fallback to the frame pointer steps over with its caller.
    @inline(never)
    static func semaphoreWaiter() {
        _ = DispatchSemaphore(value: 0).wait(timeout: .distantFuture)
        withExtendedLifetime(0) {}
    }

    #if compiler(>=6.2) && arch(x86_64)
    @Test("A thread blocked in DispatchSemaphore.wait(timeout:) keeps the app function that called it")
    func functionWithoutTables() async throws {
        let directory: String = TestSupport.childDirectory("remote-unwind-gap")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            var thread = pthread_t()
            let made = pthread_create(
                &thread, nil,
                { _ in
                    aft_test_set_thread_name("sem-waiter")
                    RemoteUnwindTests.semaphoreWaiter()
                    return nil
                }, nil)
            guard made == 0 else { _exit(97) }
            usleep(300_000)  // asleep in the semaphore by now
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let crash = try #require(EveryThreadTests.crashes(directory).first)
        let waiter = try #require(crash.threads.first { $0.name == "sem-waiter" })
        #expect(waiter.frames.count >= 5, "\(waiter.frames.count) frames")
        let found = EveryThreadTests.hasFrame(waiter, in: crash, named: "semaphoreWaiter")
        #expect(found, "the caller of DispatchSemaphore.wait(timeout:) is on the waiter's stack")
    }
    #endif

    #if arch(x86_64)
    /// Frames over the toolchain's libswiftDispatch and libswiftCore (Swift 6.3.1's files, by
    /// build id) at fixed addresses: registers rip and rbp, rsp at the stack's start.
    static func unwindToolchainFrames(ip: UInt64, rbp: UInt64, words: [UInt64]) throws -> [String]? {
        let dispatch = "/opt/swift/usr/lib/swift/linux/libswiftDispatch.so"
        let core = "/opt/swift/usr/lib/swift/linux/libswiftCore.so"
        guard DebugFileLocator.buildID(of: dispatch) == "8e4dcd28f0fe17265e0368bef22d2f51cad71090",
            DebugFileLocator.buildID(of: core) == "b521f25fdeacf504eca83d97c7308e8fc11be729"
        else { return nil }  // another toolchain: other offsets
        func image(_ start: UInt64, _ size: UInt64, _ path: String, _ id: String) -> LoadedImage {
            var i = aft_image()
            i.start = start
            i.end = start + size
            i.load_bias = start
            i.arch = Architecture.current.code
            let bytes = Hex.decode(id) ?? []
            withUnsafeMutableBytes(of: &i.build_id) { raw in raw.copyBytes(from: bytes) }
            i.build_id_size = UInt32(bytes.count)
            withUnsafeMutableBytes(of: &i.path) { raw in
                for (k, byte) in path.utf8.enumerated() { raw[k] = byte }
            }
            return LoadedImage(i)
        }
        let images = [
            image(Self.dispatchBase, 0x2c000, dispatch, "8e4dcd28f0fe17265e0368bef22d2f51cad71090"),
            image(Self.coreBase, 0x6ea000, core, "b521f25fdeacf504eca83d97c7308e8fc11be729"),
        ]
        var registers = [UInt64](repeating: 0, count: 23)  // r8..r15, rdi, rsi, rbp, rbx, ..., rsp, rip
        registers[10] = rbp
        registers[15] = Self.stackBase
        registers[16] = ip
        let stack = words.flatMap { word in withUnsafeBytes(of: word.littleEndian) { Array($0) } }
        let result = try #require(
            RemoteUnwinder.unwind(
                registers: registers, stackStart: Self.stackBase, stack: stack, images: images,
                architecture: .current))
        return result.frames.map {
            $0 >= Self.coreBase
                ? "core+\(String($0 - Self.coreBase, radix: 16))"
                : "dispatch+\(String($0 - Self.dispatchBase, radix: 16))"
        }
    }

    static let dispatchBase: UInt64 = 0x7f00_0000_0000
    static let coreBase: UInt64 = 0x7f10_0000_0000
    static let stackBase: UInt64 = 0x7ffd_0000_0000

    @Test(
        "Functions without a table entry: a thunk's caller is found, a frame record is followed, a stale word is not taken"
    )
    func functionsWithoutTableEntries() throws {
        let (d, c, stack) = (Self.dispatchBase, Self.coreBase, Self.stackBase)
        // swift_retain at its entry (a table entry: the return address at sp), called from
        // DispatchSemaphore.wait(timeout:) (push rax, two moves, the call; no entry, no record),
        // whose return address is 16 bytes up, into libswiftCore just after a call; that
        // caller's record at rbp: the thunk's caller is there, then the record's.
        var words = [UInt64](repeating: 0, count: 64)
        words[0] = d + 0x1_a0ad
        words[1] = 0x1111  // the pushed rax
        words[2] = c + 0x16_1293
        words[9] = stack + 0x100
        words[10] = c + 0x16_12bb
        guard let thunk = try Self.unwindToolchainFrames(ip: c + 0x47_0980, rbp: stack + 0x48, words: words) else {
            return  // another toolchain than the one these offsets are of
        }
        #expect(
            Array(thunk.prefix(4)) == ["core+470980", "dispatch+1a0ad", "core+161293", "core+1612bb"], "\(thunk)")
        // __swift_instantiateGenericMetadata (push rbp; mov rbp, rsp; no entry) with a stale return
        // address in its locals: its record is followed, the stale word left.
        words = [UInt64](repeating: 0, count: 64)
        words[0] = c + 0x16_12bb
        words[4] = stack + 0x100
        words[5] = c + 0x16_1293
        let record = try #require(try Self.unwindToolchainFrames(ip: d + 0x1db90, rbp: stack + 0x20, words: words))
        #expect(Array(record.prefix(2)) == ["dispatch+1db90", "core+161293"], "\(record)")
        #expect(!record.contains("core+1612bb"), "the stale word is no frame")
        // A lazy witness-table accessor (push rbp; mov rbp, rsp; call) paused with rsp == rbp.
        words = [UInt64](repeating: 0, count: 64)
        words[0] = stack + 0x100
        words[1] = c + 0x16_1293
        words[0x20] = stack + 0x180
        words[0x21] = c + 0x16_12bb
        let accessor = try #require(try Self.unwindToolchainFrames(ip: d + 0x170c4, rbp: stack, words: words))
        #expect(Array(accessor.prefix(3)) == ["dispatch+170c4", "core+161293", "core+1612bb"], "\(accessor)")
    }
    #endif
}
