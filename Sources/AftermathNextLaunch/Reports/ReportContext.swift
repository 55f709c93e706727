import CSignalShim
import Foundation

/// The run a report belongs to, as recorded by that run at start: ids, release and OS.
package struct ReportContext: Sendable, Hashable {
    /// The report's own id (for a crash, app.crash.id).
    package var reportID: UUID
    /// session.id of the run when the report was written.
    package var sessionID: UUID
    /// The run (process instance) that wrote the report.
    package var runID: UUID
    /// Process id of that run.
    package var pid: Int64
    /// When that run started, in nanoseconds since the Unix epoch.
    package var startTimeUnixNano: UInt64
    /// service.name of that run.
    package var serviceName: String
    /// service.version of that run (its release).
    package var serviceVersion: String
    /// app.build_id of that run: the GNU build id of its main executable, lowercase hex.
    package var appBuildID: String
    /// `appBuildID` is the text hash of the main executable, which has no GNU build id.
    package var isAppBuildIDTextHash: Bool
    /// os.name of that run (from /etc/os-release).
    package var osName: String
    /// os.version of that run (from /etc/os-release).
    package var osVersion: String
    /// The kernel release of that run (uname -r).
    package var kernelRelease: String
    /// The CPU architecture of that run: x86_64, arm64 or unknown.
    package var architecture: Architecture
    /// Path of that run's main executable.
    package var executablePath: String
    /// The directory whose images count as in-app for that run.
    package var appRoot: String

    package init(
        reportID: UUID, sessionID: UUID, runID: UUID, pid: Int64, startTimeUnixNano: UInt64,
        serviceName: String, serviceVersion: String, appBuildID: String, osName: String,
        osVersion: String, kernelRelease: String, architecture: Architecture,
        executablePath: String, appRoot: String, isAppBuildIDTextHash: Bool = false
    ) {
        self.reportID = reportID
        self.sessionID = sessionID
        self.runID = runID
        self.pid = pid
        self.startTimeUnixNano = startTimeUnixNano
        self.serviceName = serviceName
        self.serviceVersion = serviceVersion
        self.appBuildID = appBuildID
        self.isAppBuildIDTextHash = isAppBuildIDTextHash
        self.osName = osName
        self.osVersion = osVersion
        self.kernelRelease = kernelRelease
        self.architecture = architecture
        self.executablePath = executablePath
        self.appRoot = appRoot
    }
}

extension ReportContext {
    /// The context as a file records it.
    package init(_ c: aft_context) {
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
        isAppBuildIDTextHash = Self.hasTextHashMarker(c)
        architecture = Architecture(code: c.arch)
        executablePath = CString.read(&c.executable_path)
        appRoot = CString.read(&c.app_root)
    }

    /// The marker after the hash in app_build_id: a GNU build id leaves those bytes zero.
    package static let textHashMarker = Array(AFT_TEXT_HASH_MARKER.utf8) + [0]

    package static func hasTextHashMarker(_ c: aft_context) -> Bool {
        guard c.app_build_id_size == AFT_TEXT_HASH_SIZE else { return false }
        return withUnsafeBytes(of: c.app_build_id) { raw in
            Array(raw.dropFirst(Int(AFT_TEXT_HASH_SIZE)).prefix(textHashMarker.count)) == textHashMarker
        }
    }
}
