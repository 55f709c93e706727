import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathSymbolication
import HarnessSupport
import CHarnessFaults
import Foundation

/// Everything one scenario produced: the two crashing children, the next launch, the files
/// left on disk and the records exported (the next launch's RECORD lines).
struct Evidence: Sendable {
    var scenario: Scenario
    var withAftermath: ChildResult
    var withoutAftermath: ChildResult
    var nextLaunch: ChildResult
    /// Names in crashes/ after the crash, and after the next launch delivered them.
    var crashFilesAfterCrash: [String]
    var crashFilesAfterNextLaunch: [String]
    /// Those of the first that were crash reports then (`.crash`, or a reserve committed in place).
    var committedAfterCrash: [String]
    /// Names in rejected/ after the next launch (files it could not read).
    var rejectedAfterNextLaunch: [String]
    /// The app.crash records the next launch exported.
    var crashRecords: [LogRecord]
    /// The event names of the other records it exported (shown, not judged).
    var otherEventNames: [String]
    /// RECORD lines that did not decode.
    var exportProblems: [String]
    /// What the crashing child printed on its AFTERMATH_CONTEXT line.
    var printedSession: String?
    var printedBuildID: String?
    var reportsDirectory: String
    /// What the handler detector logged for the crashing child; nil when it ran without one.
    var detectorLog: String?
    /// The crash's minidump and `aftermath show`, taken before the next launch.
    var artifacts = ThreadArtifacts()

    var crashesDirectory: String { ReportDirectory(root: reportsDirectory).crashes }
}

/// Runs one scenario: the crashing child with Aftermath, the same without, then the next launch.
struct ScenarioRunner: Sendable {
    /// The harness's own executable: every child is this file.
    var executable: String
    /// Per-scenario directories are created under this one.
    var baseDirectory: String
    var environment: [String: String]
    var timeoutSeconds = 60.0
    /// A handler detector (an LD_PRELOAD library) to load into the child with Aftermath.
    var detector: String?

    /// Text the Swift runtime's backtracer prints when it handles a crash.
    static let backtracerMarkers = ["*** Program crashed:", "Backtracing from"]

    func run(_ scenario: Scenario) -> Evidence {
        let root = (baseDirectory as NSString).appendingPathComponent(scenario.name)
        let reports = (root as NSString).appendingPathComponent("reports")
        let crashes = ReportDirectory(root: reports).crashes
        let unusedDirectory = (root as NSString).appendingPathComponent("without-aftermath")  // never created
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)

        // The moment the backtracer's text shows up, our crash file must already be in place.
        let watch = StderrWatch(markers: Self.backtracerMarkers) { !Self.committedCrashFiles(crashes).isEmpty }
        var environment = environment
        if !scenario.swiftBacktracer { environment["SWIFT_BACKTRACE"] = "enable=no" }
        var withEnvironment = environment
        let detectorLog = (root as NSString).appendingPathComponent("handler-detector.log")
        if let detector {
            withEnvironment["LD_PRELOAD"] = detector
            withEnvironment["AFTERMATH_DETECTOR_LOG"] = detectorLog
        }
        let with = ChildProcess.run(
            executable, ["child", scenario.name, "--dir", reports],
            environment: withEnvironment, timeout: timeoutSeconds, watch: watch)
        let without = ChildProcess.run(
            executable, ["child", scenario.name, "--dir", unusedDirectory, "--no-aftermath"],
            environment: environment, timeout: timeoutSeconds)
        let afterCrash = Self.listing(crashes), committedAfterCrash = Self.committedCrashFiles(crashes)
        let artifacts = ThreadArtifacts.collect(reports: reports, root: root)
        let next = ChildProcess.run(
            executable, ["next-launch", "--dir", reports],
            environment: environment, timeout: timeoutSeconds)
        let (records, problems) = RecordLine.records(in: next.lines)
        let crashRecords = records.filter { $0.eventName == "app.crash" }
        let context = Self.printedContext(with.standardOutput)
        return Evidence(
            scenario: scenario, withAftermath: with, withoutAftermath: without, nextLaunch: next,
            crashFilesAfterCrash: afterCrash, crashFilesAfterNextLaunch: Self.listing(crashes),
            committedAfterCrash: committedAfterCrash,
            rejectedAfterNextLaunch: Self.listing(ReportDirectory(root: reports).rejected),
            crashRecords: crashRecords,
            otherEventNames: records.filter { $0.eventName != "app.crash" }.map { $0.eventName ?? "(none)" },
            exportProblems: problems,
            printedSession: context["session"], printedBuildID: context["build"], reportsDirectory: reports,
            detectorLog: detector == nil ? nil : ((try? String(contentsOfFile: detectorLog, encoding: .utf8)) ?? ""),
            artifacts: artifacts)
    }

    /// The key=value pairs of the child's AFTERMATH_CONTEXT line.
    static func printedContext(_ output: String) -> [String: String] {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix(ChildMode.contextPrefix + " ") })
        else { return [:] }
        var pairs: [String: String] = [:]
        for field in line.split(separator: " ").dropFirst() {
            let kv = field.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { pairs[kv[0]] = kv[1] }
        }
        return pairs
    }

    /// Crash reports as they lie: `.crash` files and reserves committed in place.
    static func committedCrashFiles(_ directory: String) -> [String] {
        listing(directory).filter { FileHeader.holdsCrashReport((directory as NSString).appendingPathComponent($0)) }
    }

    /// Names in directory, hidden ones included (a leftover .tmp is worth seeing); [] if absent.
    static func listing(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }
}
