import AftermathNextLaunch

extension Aftermath {
    /// Everything ``Aftermath/start(_:)`` needs. Only the service's name, version and an
    /// exporter are required.
    public struct Configuration: Sendable {
        /// service.name of the app.
        public var serviceName: String
        /// service.version of the app: its release.
        public var serviceVersion: String
        /// Where reports are kept between runs. Default: `$STATE_DIRECTORY/aftermath/<serviceName>`
        /// (systemd's `StateDirectory=`), else `$XDG_STATE_HOME/aftermath/<serviceName>`, else
        /// `~/.local/state/aftermath/<serviceName>` when `HOME` is a writable directory, else
        /// `/var/tmp/aftermath-<uid>/<serviceName>`. It must be owned by the app's user; a mode
        /// wider than 0700 is repaired.
        public var reportsDirectory: String
        /// Receives the records; a file is deleted only after its record is acknowledged.
        public var exporter: any LogExporter
        /// Receives each crash's minidump, named by its record's `apsio.attachment.id`, after
        /// the records; a pending attachment is deleted only once this exporter acknowledged it.
        /// Default: ``exporter`` when it is also an ``AttachmentExporter`` (``FileExporter``
        /// is); nil: crashes get no attachment.
        public var attachmentExporter: (any AttachmentExporter)? {
            get { attachmentExporterBox?.exporter }
            set { attachmentExporterBox = newValue.map(AttachmentExporterBox.init) }
        }
        /// The attachment exporter in a box: an optional reference copies with a retain, where
        /// an optional existential has the runtime build its type's metadata by name, on start's
        /// caller, at the configuration's first copy.
        var attachmentExporterBox: AttachmentExporterBox?
        /// Pending attachments kept at most (default 64); the oldest beyond are deleted.
        public var maxPendingAttachments = 64
        /// Pending attachments older than this are deleted (default 365 days, as Crashpad).
        public var maxAttachmentAge: Duration = .seconds(365 * 24 * 3600)
        /// Bytes of pending attachments kept at most, the newest first (default 128 MiB, as
        /// Crashpad).
        public var maxAttachmentBytes = 128 << 20
        /// Makes a crash's minidump for its attachment (empty: none for that crash).
        package var minidump: (@Sendable (CrashReport) -> [UInt8])? = { MinidumpWriter.write($0) }
        /// Images under this directory are in-app. Default: the executable's directory.
        public var appRoot: String?
        /// fsync each crash file before it is renamed into place. Off by default, as in
        /// sentry-native, Crashpad and Breakpad: a crash ends the process, not the kernel, whose
        /// writeback puts the file on disk within about 30 s. Turn it on where a device may
        /// lose power in that window (a battery, a hardware watchdog's reset); it costs the
        /// handler about 0.6-1.1 ms per crash on an SSD, more on flash.
        public var fsyncReports: Bool
        /// Deliver earlier runs' reports before ``Aftermath/start(_:)`` returns, instead of on a
        /// background thread.
        public var deliverPendingReportsSynchronously: Bool
        /// How often the run record's evidence is refreshed (default 1 s).
        public var runUpdateInterval: Duration = .seconds(1)
        /// Record SIGTERM, SIGINT and SIGHUP in the run record, then let them act as before.
        public var recordTerminationSignals = true
        /// Run files kept at most (default 64). Over it, the oldest are removed until three
        /// quarters of it are left.
        public var maxRunFiles = 64
        /// Run files older than this are removed (default 7 days), looked for at one launch in
        /// 16 and whenever ``maxRunFiles`` is exceeded.
        public var maxRunAge: Duration = .seconds(7 * 24 * 3600)
        /// Handled errors waiting in errors/ at most (default 256); later ones are dropped.
        public var maxPendingErrors = 256
        /// Pending crashes, hangs, handled errors and dead runs older than this are not sent:
        /// the next delivery moves them to `rejected/` with the reason (default 30 days).
        public var maxReportAge: Duration = .seconds(30 * 24 * 3600)
        /// The watched thread blocked longer than this is a hang (default 250 ms).
        public var hangThreshold: Duration = .milliseconds(250)
        /// Signal sent to the blocked thread to take its stack. The default, 0, takes the highest
        /// real-time signal nobody handles at start that can be sent (SIGURG if none is free). The watched thread
        /// lets it through at each ping, even on libdispatch's workers, which block all others.
        /// Never used when the app has its own handler for it; the stack then comes from /proc.
        public var hangCaptureSignal: Int32 = HangMonitor.defaultCaptureSignal
        /// Where the hang watchdog's heartbeat comes from (default: main-queue pings).
        public var hangHeartbeat: HangHeartbeat = .mainQueue
        /// A hang also lists every other thread with its stack (`apsio.threads`): the blocked
        /// thread usually waits for one of them (default on). Each is paused for a moment
        /// through the capture signal; one asleep in a call a signal would cut short (sleep,
        /// poll, epoll_wait) is read from /proc instead and never woken.
        public var hangOtherThreads = true
        /// Watch the Swift concurrency pool (default on): a probe Task per priority in
        /// ``concurrencyPoolPriorities`` about every 100 ms; one not started within
        /// ``concurrencyPoolThreshold`` is an `apsio.hang` of kind `concurrency_pool`, listing
        /// every thread inside a Swift job and how many of them are blocked or busy.
        public var watchConcurrencyPool = true
        /// How long the pool's probe may wait to start (default 1 s).
        public var concurrencyPoolThreshold: Duration = Aftermath.defaultConcurrencyPoolThreshold
        /// The priorities whose pool is probed (default `.medium`, the priority of a plain
        /// `Task {}` off the main actor; each priority has a queue and a width of its own).
        public var concurrencyPoolPriorities: [TaskPriority] {
            get { poolPriorityRawValues.map { TaskPriority(rawValue: $0) } }
            set { poolPriorityValues = newValue.map(\.rawValue) }
        }
        /// The probed priorities' raw values, the default's included.
        var poolPriorityRawValues: [UInt8] { poolPriorityValues ?? [TaskPriority.medium.rawValue] }
        /// The priorities' raw values, nil for the default: an array made at `init` would have
        /// the runtime build its storage's type by name, deep on the caller's stack.
        var poolPriorityValues: [UInt8]?

        /// Benchmarks only: the handler writes its duration (UInt64 ns) to this descriptor.
        package var handlerTimingFileDescriptor: Int32 = -1
        /// Root of the proc file system the run record reads ("/proc"; a crafted tree in tests).
        package var procRoot = "/proc"
        /// Root of the sys file system the run record reads ("/sys"; a crafted tree in tests).
        package var sysRoot = "/sys"

        /// A configuration with the defaults.
        public init(
            serviceName: String, serviceVersion: String, exporter: any LogExporter,
            attachmentExporter: consuming (any AttachmentExporter)? = nil,
            reportsDirectory: String? = nil, appRoot: String? = nil,
            fsyncReports: Bool = false, deliverPendingReportsSynchronously: Bool = false
        ) {
            self.serviceName = serviceName
            self.serviceVersion = serviceVersion
            self.exporter = exporter
            switch consume attachmentExporter {
            case .some(let chosen): attachmentExporterBox = AttachmentExporterBox(chosen)
            case .none: attachmentExporterBox = exporter.asAttachmentExporter.map(AttachmentExporterBox.init)
            }
            self.reportsDirectory = reportsDirectory ?? ReportDirectory.defaultRoot(serviceName: serviceName)
            self.appRoot = appRoot
            self.fsyncReports = fsyncReports
            self.deliverPendingReportsSynchronously = deliverPendingReportsSynchronously
        }
    }
}

/// An attachment exporter held by reference (``Aftermath/Configuration/attachmentExporter``).
final class AttachmentExporterBox: Sendable {
    let exporter: any AttachmentExporter

    init(_ exporter: any AttachmentExporter) { self.exporter = exporter }
}

extension Duration {
    /// The duration in (fractional) seconds.
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }

    /// The duration in whole milliseconds, clamped to UInt32.
    var clampedMilliseconds: UInt32 {
        let ms = seconds * 1000
        return ms <= 0 ? 0 : ms >= Double(UInt32.max) ? UInt32.max : UInt32(ms)
    }
}
