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

        /// A configuration with the defaults.
        public init(serviceName: String, serviceVersion: String, exporter: any LogExporter,
                    reportsDirectory: String? = nil, appRoot: String? = nil,
                    fsyncReports: Bool = true, deliverPendingReportsSynchronously: Bool = false) {
            self.serviceName = serviceName
            self.serviceVersion = serviceVersion
            self.exporter = exporter
            self.reportsDirectory = reportsDirectory ?? ReportDirectory.defaultRoot(serviceName: serviceName)
            self.appRoot = appRoot
            self.fsyncReports = fsyncReports
            self.deliverPendingReportsSynchronously = deliverPendingReportsSynchronously
            self.handlerTimingFileDescriptor = -1
        }
    }
}
