@_exported import AftermathOTLP
import AftermathNextLaunch
import CSignalShim
import Foundation
import Synchronization

/// Aftermath: crash, hang and exit reporting for Swift apps on Linux.
///
/// Call ``start(_:)`` once, at the top of `main`. Crashes are written to disk by a signal
/// handler and sent as OpenTelemetry log records on the next launch.
public enum Aftermath {
    /// Version of this SDK (telemetry.sdk.version).
    public static let version = SDK.version

    /// What the running process prepared at start. A class, replaced whole when it changes:
    /// an optional struct this size would have the Swift runtime build its type's metadata by
    /// name on start's caller, the first time the value is copied.
    package final class Running: Sendable {
        let configuration: Configuration
        let directory: ReportDirectory
        let context: ReportContext

        init(configuration: Configuration, directory: ReportDirectory, context: ReportContext) {
            self.configuration = configuration
            self.directory = directory
            self.context = context
        }
    }

    package static let state = Mutex<Running?>(nil)
    static let hangDetectionProblem = Mutex<String?>(nil)

    /// Why hang detection is off in this run (the watchdog could not start), or nil.
    public static var hangDetectionError: String? { hangDetectionProblem.withLock { $0 } }

    /// Installs the crash handlers for this run and reports what earlier runs left behind.
    ///
    /// Prepares the reports directory, this run's context (session, release, OS), installs the
    /// signal handlers on an alternate stack, then delivers pending reports to the
    /// configuration's exporter: in the background, or before returning when
    /// ``Configuration/deliverPendingReportsSynchronously`` is set. Calling it again replaces
    /// the configuration and starts a new run context.
    /// - Throws: ``StartError`` when the reports directory cannot be used or the handlers
    ///   cannot be installed. The app keeps running either way. A watchdog that cannot start
    ///   does not throw: see ``hangDetectionError``.
    ///
    /// With `OTEL_SDK_DISABLED=true` in the environment it returns at once: nothing installed,
    /// created or sent.
    public static func start(_ configuration: Configuration) throws(StartError) {
        // Only OTEL_SDK_DISABLED is read on the caller's thread: the whole environment as a
        // dictionary costs a third of start, and only the delivery needs it.
        guard !OTelEnvironment.disables(getenv("OTEL_SDK_DISABLED").map { String(cString: $0) }) else { return }
        try start(configuration) { OTelEnvironment.current() }
    }

    /// ``start(_:)`` reading environment instead of the process's.
    package static func start(_ configuration: Configuration, environment: OTelEnvironment) throws(StartError) {
        guard !environment.sdkDisabled else { return }
        try start(configuration) { environment }
    }

    /// ``start(_:)`` once OTEL_SDK_DISABLED is known to be unset; environment is called when the
    /// delivery needs the rest.
    private static func start(
        _ configuration: Configuration, environment: @escaping @Sendable () -> OTelEnvironment
    ) throws(StartError) {
        let hold = FileSizeSignalHold()  // a write past ulimit -f fails; it never ends the app
        defer { hold.release() }
        let directory = ReportDirectory(root: configuration.reportsDirectory)
        do {
            try directory.prepare()
        } catch {
            switch error {
            case .cannotCreate(let path, let reason): throw .reportsDirectoryUnusable(path: path, reason: reason)
            }
        }
        let context = makeContext(configuration)
        try installHandlers(configuration, directory: directory, context: context)
        // The build id the handler read from memory is the one records carry.
        var installed = context
        let id = currentAppBuildID()
        if !id.value.isEmpty {
            installed.appBuildID = id.value
            installed.isAppBuildIDTextHash = id.isTextHash
        }
        remember(configuration, directory: directory, context: installed)
        startRun(configuration, directory: directory, context: installed)
        // Crash capture is on by now: a watchdog that cannot start must not undo that, nor
        // hold back the delivery of earlier reports. The app can read why.
        var watchingHangs = false
        do {
            try startHangDetection(configuration, directory: directory)
            hangDetectionProblem.withLock { $0 = nil }
            watchingHangs = configuration.hangHeartbeat != .off
        } catch {
            hangDetectionProblem.withLock { $0 = error.description }
        }
        startDelivery(
            configuration, directory: directory, context: installed, watchingPool: watchingHangs,
            environment: environment)
    }

    /// The running configuration, for the calls that need it later. Never inlined, as
    /// ``startDelivery(_:directory:context:watchingPool:environment:)``: the copies it makes
    /// would widen `start`'s frame, under every deeper call of start on the caller's stack.
    @inline(never)
    private static func remember(_ configuration: Configuration, directory: ReportDirectory, context: ReportContext) {
        state.withLock { $0 = Running(configuration: configuration, directory: directory, context: context) }
    }

    /// Start's delivery of earlier reports: on a thread of its own, or on the caller.
    @inline(never)
    private static func startDelivery(
        _ configuration: Configuration, directory: ReportDirectory, context installed: ReportContext,
        watchingPool: Bool, environment: @escaping @Sendable () -> OTelEnvironment
    ) {
        if configuration.deliverPendingReportsSynchronously {
            deliverOnCaller(
                configuration, directory: directory, context: installed, watchingPool: watchingPool,
                environment: environment)
        } else {
            // The install's completion, the collector and the resource are the delivery thread's
            // work: start does not pay for them.
            let installed = installed
            let body: @Sendable () -> Void = {
                waitWhileCrashing()
                startBackgroundThreads(configuration, watchingPool: watchingPool, rolesLater: true)
                aft_install_complete()  // every image's build id, the older threads' stacks
                deliverAtStart(configuration, directory: directory, context: installed, environment: environment)
            }
            // Once body's frames are gone, so that the loop runs on as few stack pages as can be:
            // where the delivery found nothing to send, the thread becomes the pinger (hangs
            // watched) or the run record's updater until they stop, one thread's creation and end
            // less. What the delivery allocated (files read, records encoded) then goes back to
            // the system, so a long-running app does not keep its start's peak resident.
            let roles: @Sendable () -> Void = {
                if aft_pinger_adopt() == 0 { _ = aft_run_updater_adopt() }
                aft_release_free_memory()
            }
            if !StartHelpers.detachedThread(named: "aftermath.deliver", body, then: roles) {
                body()
                // No thread to take the roles on: theirs, made now, not this one, the app's.
                aft_pinger_start_pending()
                aft_run_updater_start_pending()
                aft_release_free_memory()
            }
        }
    }

    /// The crash handlers' install. A function of its own, never inlined: its C structures
    /// (the install's options with the context, 2 KiB) would otherwise widen `start`'s frame on
    /// the caller's stack, whose deepest page stays the app's for good.
    @inline(never)
    private static func installHandlers(
        _ configuration: Configuration, directory: ReportDirectory, context: ReportContext
    ) throws(StartError) {
        var options = aft_install_options()
        options.fsync_reports = configuration.fsyncReports ? 1 : 0
        options.timing_fd = configuration.handlerTimingFileDescriptor
        options.context = cContext(context)
        options.complete_later = 1  // by the delivery: start does not pay for it
        options.capture_signal = configuration.hangCaptureSignal
        let (status, message) = StartHelpers.withErrorMessage { error, capacity in
            directory.crashes.withCString { dir in
                options.crash_directory = dir
                return aft_install(&options, error, capacity)
            }
        }
        guard status == 0 else { throw .crashHandlersNotInstalled(message) }
    }

    /// Start's background work on its caller, for ``Configuration/deliverPendingReportsSynchronously``.
    /// Never inlined: the delivery's frames would widen start's on every caller's stack.
    @inline(never)
    private static func deliverOnCaller(
        _ configuration: Configuration, directory: ReportDirectory, context: ReportContext, watchingPool: Bool,
        environment: @Sendable () -> OTelEnvironment
    ) {
        startBackgroundThreads(configuration, watchingPool: watchingPool, rolesLater: false)
        aft_install_complete()
        deliverAtStart(configuration, directory: directory, context: context, environment: environment)
    }

    /// Start's delivery of what earlier runs left: the quiet one when nothing is pending (the
    /// runs that ended cleanly marked ended, nothing collected, no resource read), else the
    /// full one.
    private static func deliverAtStart(
        _ configuration: Configuration, directory: ReportDirectory, context: ReportContext,
        environment: @Sendable () -> OTelEnvironment
    ) {
        let collector = ReportCollector(
            directory: directory, currentRunID: context.runID, limits: limits(configuration))
        // Dropped errors' count to send: not quiet.
        // The next launch's spare run file once the delivery is done with the runs it found:
        // the quiet one may make the run that ended cleanly the spare (no inode made).
        if HandledErrorRecorder.droppedCount == 0, collector.deliverQuietly(own: .installed()) {
            aft_run_make_spare_once()
            lastDeliveryState.withLock { $0 = Delivery.nothing() }
            return
        }
        aft_run_make_spare_once()  // before an export that may take long
        // Their threads of their own: this one delivers, maybe long.
        aft_pinger_start_pending()
        aft_run_updater_start_pending()
        deliver(
            self.collector(configuration, directory: directory, context: context), to: configuration.exporter,
            attachments: configuration.attachmentExporter,
            resource: resource(for: configuration, environment: environment()))
    }

    /// Holds the delivery thread while a crash of this process is being written (one right
    /// after start): the threads it would start are more the crash must record, on a machine
    /// whose cores it needs. The process dies of the crash, or lives on and this returns.
    static func waitWhileCrashing() {
        while aft_crash_in_progress() != 0 { usleep(1000) }
    }

    /// The threads start leaves to its delivery thread (creating one holds the caller a tenth
    /// of a millisecond or more, and each competes with it for the CPU at once): the hang
    /// watchdog's and the run record's updater, which reads the OOM counters' baseline first.
    /// The Swift concurrency pool's targets, when hangs are watched, before the watchdog's
    /// thread, which finds them at its first look (added after, each woke it: a wake-up, two
    /// system calls and a sleep again); their probes wait for the pool's first thread.
    /// With rolesLater, the pinger's and the updater's roles wait for the calling thread (start's
    /// delivery thread), which takes one on or makes their threads before a long delivery.
    static func startBackgroundThreads(_ configuration: Configuration, watchingPool: Bool, rolesLater: Bool) {
        if watchingPool { HangMonitor.watchPool(configuration) }
        let (status, message) = StartHelpers.withErrorMessage { error, capacity in
            aft_watchdog_start_thread(rolesLater ? 1 : 0, error, capacity)
        }
        if status != 0 {
            hangDetectionProblem.withLock { $0 = StartError.hangWatchdogNotStarted(message).description }
        }
        _ = aft_run_start_updater(rolesLater ? 1 : 0)
    }

    /// Collects and exports what is pending now, synchronously; nil before ``start(_:)``.
    @discardableResult
    public static func deliverPendingReports() -> Delivery? {
        let hold = FileSizeSignalHold()  // a write past ulimit -f fails; it never ends the app
        defer { hold.release() }
        guard let running = state.withLock({ $0 }) else { return nil }
        let collector = self.collector(running.configuration, directory: running.directory, context: running.context)
        return deliver(
            collector, to: running.configuration.exporter, attachments: running.configuration.attachmentExporter,
            resource: resource(for: running.configuration))
    }

    static let lastDeliveryState = Mutex<Delivery?>(nil)

    /// What the last delivery of pending reports did (at start, in the background, or through
    /// ``deliverPendingReports()``): records sent, files set aside, the exporter's error. Nil
    /// until one has finished.
    public static var lastDelivery: Delivery? { lastDeliveryState.withLock { $0 } }

    /// One delivery, remembered as ``lastDelivery``. Its first batch counts the handled errors
    /// dropped since the last one; a count that was not acknowledged waits for the next.
    @discardableResult
    static func deliver(
        _ collector: ReportCollector, to exporter: any LogExporter,
        attachments attachmentExporter: (any AttachmentExporter)?,
        resource: Resource
    ) -> Delivery {
        // The app's code, under the app's thread name where this is Aftermath's own thread.
        let exporter = AppThreadLogExporter(base: exporter)
        let attachmentExporter = attachmentExporter.map { AppThreadAttachmentExporter(base: $0) }
        let dropped = HandledErrorRecorder.takeDropped()
        let counting = dropped > 0 ? DropReportingExporter(base: exporter, droppedErrors: dropped) : nil
        let delivery = Delivery(
            collector.deliver(to: counting ?? exporter, attachments: attachmentExporter, resource: resource))
        if let counting, !counting.delivered { HandledErrorRecorder.restoreDropped(dropped) }
        lastDeliveryState.withLock { $0 = delivery }
        return delivery
    }

    /// The session of the running process; nil before ``start(_:)``.
    public static var sessionID: UUID? { state.withLock { $0?.context.sessionID } }

    /// This run's context (ids, release, OS) as records carry it; nil before ``start(_:)``.
    package static var currentContext: ReportContext? { state.withLock { $0?.context } }

    /// The resource of records sent by this launch: it describes the reporting process. The
    /// attributes of OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME come after Aftermath's own,
    /// which win (service.name from the environment only when the configuration's is empty).
    package static func resource(
        for c: Configuration,
        environment: OTelEnvironment = OTelEnvironment.current()
    ) -> Resource {
        // The OS this run's context read at start, not os-release and uname again.
        let os = currentContext.map { OSInfo(name: $0.osName, version: $0.osVersion, kernelRelease: $0.kernelRelease) }
        var resource = SDK.resource(serviceName: c.serviceName, serviceVersion: c.serviceVersion, os: os ?? .current())
        if c.serviceName.isEmpty { resource.attributes.removeAll { $0.key == "service.name" } }
        for attribute in environment.resourceAttributes
        where !resource.attributes.contains(where: { $0.key == attribute.key }) {
            resource.attributes.append(attribute)
        }
        if !resource.attributes.contains(where: { $0.key == "service.name" }) {
            resource.attributes.insert(Attribute("service.name", "unknown_service"), at: 0)
        }
        return resource
    }

    /// A collector that judges dead runs with this launch's release, OS and configured roots.
    package static func collector(
        _ c: Configuration, directory: ReportDirectory, context: ReportContext
    ) -> ReportCollector {
        // The boot id and start ticks this run's record read at start: the same boot and
        // process, not read again.
        let started = startedWith(procRoot: c.procRoot)
        let environment = ExitEnvironment(
            procRoot: c.procRoot, sysRoot: c.sysRoot, bootID: started?.bootID,
            serviceVersion: context.serviceVersion,
            appBuildID: context.appBuildID.isEmpty ? nil : context.appBuildID,
            osName: context.osName, osVersion: context.osVersion,
            kernelRelease: context.kernelRelease,
            process: started?.startTicks.map { (Int64(getpid()), $0) }
                ?? ExitEnvironment.currentProcess(procRoot: c.procRoot))
        var collector = ReportCollector(
            directory: directory, currentRunID: context.runID, environment: environment, limits: limits(c))
        collector.minidump = c.minidump
        return collector
    }

    /// The collection's limits from the configuration.
    static func limits(_ c: Configuration) -> ReportCollector.Limits {
        var limits = ReportCollector.Limits(
            maxRunFiles: c.maxRunFiles, maxRunAgeSeconds: c.maxRunAge.seconds,
            maxReportAgeSeconds: c.maxReportAge.seconds)
        limits.maxPendingErrors = max(c.maxPendingErrors, 1)
        limits.maxPendingAttachments = max(c.maxPendingAttachments, 0)
        limits.maxAttachmentAgeSeconds = c.maxAttachmentAge.seconds
        limits.maxAttachmentBytes = max(c.maxAttachmentBytes, 0)
        return limits
    }

    /// The boot id and process start ticks this process's run record read at start under
    /// procRoot (each nil when it could not read it); nil without such a record.
    static func startedWith(procRoot: String) -> (bootID: String?, startTicks: UInt64?)? {
        var bootID = [CChar](repeating: 0, count: Int(AFT_BOOT_ID_CAPACITY) + 1)
        var ticks: UInt64 = 0
        guard aft_run_started_with(procRoot, &bootID, bootID.count, &ticks) == 1 else { return nil }
        let id = String(decoding: bootID.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (id.isEmpty ? nil : id, ticks == 0 ? nil : ticks)
    }
}
