import CSignalShim
import Foundation

/// The run a report belongs to, as recorded by that run at start: ids, release and OS.
public struct ReportContext: Sendable, Hashable {
    /// The report's own id (for a crash, app.crash.id).
    public var reportID: UUID
    /// session.id of the run when the report was written.
    public var sessionID: UUID
    /// The run (process instance) that wrote the report.
    public var runID: UUID
    /// Process id of that run.
    public var pid: Int64
    /// When that run started, in nanoseconds since the Unix epoch.
    public var startTimeUnixNano: UInt64
    /// service.name of that run.
    public var serviceName: String
    /// service.version of that run (its release).
    public var serviceVersion: String
    /// app.build_id of that run: the GNU build id of its main executable, lowercase hex.
    public var appBuildID: String
    /// os.name of that run (from /etc/os-release).
    public var osName: String
    /// os.version of that run (from /etc/os-release).
    public var osVersion: String
    /// The kernel release of that run (uname -r).
    public var kernelRelease: String
    /// The CPU architecture of that run: "x86_64", "arm64" or "unknown".
    public var architecture: String
    /// Path of that run's main executable.
    public var executablePath: String
    /// The directory whose images count as in-app for that run (section 6.5).
    public var appRoot: String
}

extension ReportContext {
    init(_ c: aft_context) {
        var c = c
        reportID = UUID(bytes: &c.report_id)
        sessionID = UUID(bytes: &c.session_id)
        runID = UUID(bytes: &c.run_id)
        pid = Int64(bitPattern: c.pid)
        startTimeUnixNano = c.start_realtime_ns
        serviceName = CString.read(&c.service_name)
        serviceVersion = CString.read(&c.service_version)
        osName = CString.read(&c.os_name)
        osVersion = CString.read(&c.os_version)
        kernelRelease = CString.read(&c.kernel_release)
        appBuildID = Hex.encode(&c.app_build_id, count: Int(min(c.app_build_id_size, AFT_BUILD_ID_CAPACITY)))
        architecture = Architecture.name(c.arch)
        executablePath = CString.read(&c.executable_path)
        appRoot = CString.read(&c.app_root)
    }
}
