import Foundation

/// The launch that judges earlier runs: where /proc and /sys are, and its own boot, release
/// and OS, against which a dead run's are compared (a change means reboot or update: no report).
/// A nil field is unknown and compares equal.
public struct ExitEnvironment: Sendable, Hashable {
    /// Root of the proc file system ("/proc"; a crafted tree in tests).
    public var procRoot: String
    /// Root of the sys file system ("/sys"; a crafted tree in tests).
    public var sysRoot: String
    /// The kernel's boot_id now.
    public var bootID: String?
    /// service.version of this launch.
    public var serviceVersion: String?
    /// app.build_id of this launch.
    public var appBuildID: String?
    /// os.name of this launch.
    public var osName: String?
    /// os.version of this launch.
    public var osVersion: String?
    /// The kernel release now.
    public var kernelRelease: String?

    /// An environment; the boot id is read under procRoot unless given.
    public init(procRoot: String = "/proc", sysRoot: String = "/sys", bootID: String? = nil,
                serviceVersion: String? = nil, appBuildID: String? = nil, osName: String? = nil,
                osVersion: String? = nil, kernelRelease: String? = nil) {
        self.procRoot = procRoot
        self.sysRoot = sysRoot
        self.bootID = bootID ?? EvidenceReader(procRoot: procRoot).bootID()
        self.serviceVersion = serviceVersion
        self.appBuildID = appBuildID
        self.osName = osName
        self.osVersion = osVersion
        self.kernelRelease = kernelRelease
    }

    /// Tests: replaces the environment a collection judges with.
    @TaskLocal static var override: ExitEnvironment?

    /// The running process's environment (after ``Aftermath/start(_:)``), else the system's
    /// with the release unknown.
    static func current() -> ExitEnvironment {
        if let override { return override }
        if let running = Aftermath.state.withLock({ $0 }) {
            let c = running.context
            return ExitEnvironment(procRoot: running.configuration.procRoot, sysRoot: running.configuration.sysRoot,
                                   serviceVersion: c.serviceVersion,
                                   appBuildID: c.appBuildID.isEmpty ? nil : c.appBuildID,
                                   osName: c.osName, osVersion: c.osVersion, kernelRelease: c.kernelRelease)
        }
        let os = OSInfo.current()
        return ExitEnvironment(osName: os.name, osVersion: os.version, kernelRelease: os.kernelRelease)
    }
}
