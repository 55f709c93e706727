extension Aftermath {
    /// Everything ``Aftermath/start(_:)`` needs. Only the service's name, version and an
    /// exporter are required.
    public struct Configuration: Sendable {
        /// service.name of the app.
        public var serviceName: String
        /// service.version of the app: its release.
        public var serviceVersion: String
        /// Where reports are kept between runs. Default:
        /// `$XDG_STATE_HOME/aftermath/<serviceName>`, else `~/.local/state/aftermath/<serviceName>`.
        public var reportsDirectory: String
        /// Receives the records; a file is deleted only after its record is acknowledged.
        public var exporter: any LogExporter
        /// Images under this directory are in-app (section 6.5). Default: the executable's directory.
        public var appRoot: String?
        /// fsync each crash file before it is renamed into place (about 0.2-0.3 ms per crash).
        public var fsyncReports: Bool
        /// Deliver earlier runs' reports before ``Aftermath/start(_:)`` returns, instead of on a
        /// background thread.
        public var deliverPendingReportsSynchronously: Bool
        /// Benchmarks only: the handler writes its duration (UInt64 ns) to this descriptor.
        public var handlerTimingFileDescriptor: Int32
        /// Root of the proc file system the run record reads ("/proc"; a crafted tree in tests).
        public var procRoot: String
        /// Root of the sys file system the run record reads ("/sys"; a crafted tree in tests).
        public var sysRoot: String
        /// How often the run record's evidence is refreshed, in milliseconds (default 1000).
        public var runUpdateIntervalMilliseconds: UInt32 = 1000
        /// Record SIGTERM, SIGINT and SIGHUP in the run record, then let them act as before.
        public var recordTerminationSignals = true
        /// Run files kept at most (default 64); older ones are removed first.
        public var maxRunFiles = 64
        /// Run files older than this are removed (default 7 days), in seconds.
        public var maxRunAgeSeconds: Double = 7 * 24 * 3600
        /// Handled errors waiting in errors/ at most (default 256); later ones are dropped.
        public var maxPendingErrors = 256
        /// The watched thread blocked longer than this is a hang, in milliseconds (default 250).
        public var hangThresholdMilliseconds: UInt32 = 250
        /// Signal sent to the blocked thread to take its stack (default SIGURG). Never used when
        /// the app has its own handler for it; the stack then comes from /proc.
        public var hangCaptureSignal: Int32 = HangMonitor.defaultCaptureSignal
        /// Where the hang watchdog's heartbeat comes from (default: main-queue pings).
        public var hangHeartbeat: HangHeartbeat = .mainQueue

        /// A configuration with the defaults.
        public init(serviceName: String, serviceVersion: String, exporter: any LogExporter,
                    reportsDirectory: String? = nil, appRoot: String? = nil,
                    fsyncReports: Bool = true, deliverPendingReportsSynchronously: Bool = false,
                    procRoot: String = "/proc", sysRoot: String = "/sys") {
            self.serviceName = serviceName
            self.serviceVersion = serviceVersion
            self.exporter = exporter
            self.reportsDirectory = reportsDirectory ?? ReportDirectory.defaultRoot(serviceName: serviceName)
            self.appRoot = appRoot
            self.fsyncReports = fsyncReports
            self.deliverPendingReportsSynchronously = deliverPendingReportsSynchronously
            self.handlerTimingFileDescriptor = -1
            self.procRoot = procRoot
            self.sysRoot = sysRoot
        }
    }
}
