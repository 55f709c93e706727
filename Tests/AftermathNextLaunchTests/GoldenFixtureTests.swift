import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import TestSupport
import Foundation
import Testing

/// Files written by the real writers (format v1), kept so every later build still reads them:
/// a hang file of a process SIGKILLed mid-hang (the watchdog), its run file, and a handled
/// error (`record(error:)`). The crash fixture is in CrashFileTests.
@Suite("Golden fixtures, format v1")
struct GoldenFixtureTests {
    @Test("An unfinished hang written by the real watchdog, its duration from the live block")
    func hang() throws {
        let file = try ReportFile.decode(TestSupport.fixture("v1/hang-unfinished-killed.hang"))
        let hang = try HangReport(file: file)
        #expect(!hang.isFinished)
        #expect(hang.durationMilliseconds >= 1000 && hang.durationMilliseconds < 5000)
        #expect(hang.thresholdMilliseconds == 250)
        #expect(!hang.frames.isEmpty)
        #expect(hang.images.contains { $0.isMainExecutable && $0.buildID == hang.context.appBuildID })
        #expect(hang.context.appBuildID.count == 40)
        // A damaged body is refused, like a crash's.
        var damaged = try TestSupport.fixture("v1/hang-unfinished-killed.hang")
        damaged[damaged.count - 100] ^= 0xFF
        #expect(throws: ReportFileError.self) { try ReportFile.decode(damaged) }
    }

    @Test("The run file of that process: alive until killed, no clean exit, same run as the hang")
    func run() throws {
        let run = try RunFile.decode(TestSupport.fixture("v1/run-killed-during-hang.run"))
        let hang = try HangReport(file: ReportFile.decode(TestSupport.fixture("v1/hang-unfinished-killed.hang")))
        #expect(run.runID == hang.context.runID)
        #expect(run.sessionID == hang.context.sessionID)
        #expect(run.exit?.clean != AFT_RUN_CLEAN_MARKER, "killed: no clean exit")
        #expect(run.lastSeenUnixNano >= run.context.startTimeUnixNano)
        #expect(run.bootID.count == 36)
        var torn = try TestSupport.fixture("v1/run-killed-during-hang.run")
        torn.removeLast(torn.count - 200)
        #expect(throws: ReportFileError.self) { try RunFile.decode(torn) }
    }

    @Test("A handled error written by record(error:), then decoded to its record")
    func handledError() throws {
        let error = try HandledErrorFile.decode(TestSupport.fixture("v1/handled-error.error"))
        #expect(!error.type.isEmpty && !error.message.isEmpty)
        #expect(!error.frames.isEmpty)
        #expect(error.images.contains { $0.isMainExecutable })
        #expect(error.context.serviceName == "exit-harness")
    }
}
