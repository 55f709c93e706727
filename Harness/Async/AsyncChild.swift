import Aftermath
import AftermathTesting
import CHarnessFaults
import Dispatch
import Foundation
import HarnessSupport
#if canImport(Glibc)
import Glibc
#endif

/// What level 3 does once levels 1 and 2 have each awaited and called the next.
enum Ending: String, Sendable {
    /// Awaits, then stores through a null pointer in its own body.
    case crashAfterAwait = "crash-await"
    /// Stores through a null pointer at once: the task last resumed in level 2.
    case crashAtEntry = "crash-entry"
    /// Awaits, then force-unwraps nil: a Swift runtime trap in its own body, which the optimizer
    /// turns into a path that keeps nothing (its context register reused).
    case trapAfterAwait = "crash-trap"
    /// Awaits, then calls a synchronous function that stores through a null pointer.
    case crashInSyncCallee = "crash-sync"
    /// Awaits, then faults in C with its context register on a context of a two-link cycle.
    case hostileContext = "crash-hostile"
    /// Awaits, then blocks on a semaphore nobody signals.
    case block
    /// Awaits, then records a handled error and ends the process.
    case recordError = "error"
}

struct HarnessAsyncError: Error {}

/// A value the optimizer cannot see through.
@inline(never) func asyncHarnessOpaque(_ value: Int) -> Int {
    withExtendedLifetime(value) { value }
}

@inline(never) func asyncHarnessNullStore(_ seed: Int) {
    UnsafeMutablePointer<Int>(bitPattern: asyncHarnessOpaque(8))!.pointee = seed
}

@inline(never) func asyncHarnessLevel1(_ ending: Ending) async -> Int {
    await Task.yield()
    let r = await asyncHarnessLevel2(ending)
    return r &+ 1
}

@inline(never) func asyncHarnessLevel2(_ ending: Ending) async -> Int {
    await Task.yield()
    let r = ending == .trapAfterAwait ? await asyncHarnessLevel3Trap(3) : await asyncHarnessLevel3(ending)
    return r &+ 2
}

/// Level 3 of `crash-trap`: small enough that the optimizer's crash path keeps nothing of its
/// context (at -O its context register holds a string's bits at the trap).
@inline(never) func asyncHarnessLevel3Trap(_ n: Int) async -> Int {
    await Task.yield()
    if CommandLine.arguments.count > 1 && CommandLine.arguments[1] == "sync" { asyncHarnessNullStore(3) }
    let pointer = UnsafeMutablePointer<Int>(bitPattern: n &* 0)!
    pointer.pointee = 1
    return n
}

@inline(never) func asyncHarnessLevel3(_ ending: Ending) async -> Int {
    if ending == .crashAtEntry {
        UnsafeMutablePointer<Int>(bitPattern: asyncHarnessOpaque(8))!.pointee = 3
        return 0
    }
    await Task.yield()
    switch ending {
    case .crashAfterAwait: UnsafeMutablePointer<Int>(bitPattern: asyncHarnessOpaque(8))!.pointee = 3
    case .crashInSyncCallee: asyncHarnessNullStore(3)
    case .trapAfterAwait: break
    case .hostileContext: aft_test_hostile_async_fault()
    case .block: DispatchSemaphore(value: 0).wait()
    case .recordError:
        let written = Aftermath.record(error: HarnessAsyncError())
        writeNow(written ? "RECORDED\n" : "ERROR not recorded\n")
        exit(0)
    case .crashAtEntry: break
    }
    return asyncHarnessOpaque(3)
}

@MainActor @inline(never) func asyncHarnessMainLevel1() async -> Int {
    await Task.yield()
    return await asyncHarnessMainLevel2() &+ 1
}

@MainActor @inline(never) func asyncHarnessMainLevel2() async -> Int {
    await Task.yield()
    return await asyncHarnessMainLevel3() &+ 2
}

@MainActor @inline(never) func asyncHarnessMainLevel3() async -> Int {
    await Task.yield()
    DispatchSemaphore(value: 0).wait()
    return asyncHarnessOpaque(3)
}

/// A child: `crash` runs the scenario until the process dies (or is ended); `collect` starts
/// Aftermath again and prints what its delivery exported (RECORD lines).
enum AsyncChild {
    static let exporter = InMemoryExporter()

    static func run(_ scenario: String, phase: String, directory: String) -> Never {
        var config = Aftermath.Configuration(
            serviceName: "async-harness", serviceVersion: "1.0", exporter: exporter, reportsDirectory: directory,
            deliverPendingReportsSynchronously: true)
        if phase == "collect" || !scenario.hasPrefix("hang") { config.hangHeartbeat = .off }
        if phase == "collect" || scenario != "hang-pool" { config.watchConcurrencyPool = false }
        do { try Aftermath.start(config) } catch {
            writeNow("ERROR start: \(error)\n")
            exit(2)
        }
        if phase == "collect" {
            RecordLine.emit(exporter.batches)
            exit(0)
        }
        usleep(400_000)  // the watchdog armed (its first ping, the pool's first probe)
        switch scenario {
        case "hang-main":
            endAfter(seconds: 2.5)
            Task { @MainActor in _ = await asyncHarnessMainLevel1() }
        case "hang-pool":
            endAfter(seconds: 3.5)
            for _ in 0..<ProcessInfo.processInfo.activeProcessorCount {
                Task.detached(priority: .medium) { _ = await asyncHarnessLevel1(.block) }
            }
        default:
            guard let ending = Ending(rawValue: scenario) else {
                writeNow("ERROR unknown scenario \(scenario)\n")
                exit(2)
            }
            Task.detached { _ = await asyncHarnessLevel1(ending) }
        }
        RunLoop.main.run()
        exit(3)
    }

    /// Ends the process while it hangs: its hang is reported unfinished at the next launch.
    static func endAfter(seconds: Double) {
        Thread {
            Thread.sleep(forTimeInterval: seconds)
            writeNow("ENDING\n")
            _exit(0)
        }.start()
    }
}
