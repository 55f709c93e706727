import Aftermath
import AftermathNextLaunch
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
        // As if the handler had taken a wrong frame record: no frame pointer, the pc alone.
        let fp = try #require(FramePointerWalk.fpIndex(crash.context.architecture))
        crash.threads[index].registers[fp] = 0
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
}
