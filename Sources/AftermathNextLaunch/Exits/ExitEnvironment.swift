import CSignalShim
import Foundation

/// The launch that judges earlier runs: where /proc and /sys are, and its own boot, release
/// and OS, against which a dead run's are compared (a change means reboot or update: no report).
/// A nil field is unknown and compares equal.
package struct ExitEnvironment: Sendable, Hashable {
    /// Root of the proc file system ("/proc"; a crafted tree in tests).
    package var procRoot: String
    /// Root of the sys file system ("/sys"; a crafted tree in tests).
    package var sysRoot: String
    /// The kernel's boot_id now.
    package var bootID: String?
    /// service.version of this launch.
    package var serviceVersion: String?
    /// app.build_id of this launch.
    package var appBuildID: String?
    /// os.name of this launch.
    package var osName: String?
    /// os.version of this launch.
    package var osVersion: String?
    /// The kernel release now.
    package var kernelRelease: String?
    /// This process's pid and start time (/proc/self/stat starttime, clock ticks after boot):
    /// a dead run with both equal was this process before it replaced its image (execve).
    /// nil: unknown (a collection made outside the app), no run is taken for an exec.
    package var process: (pid: Int64, startTicks: UInt64)? {
        get { pid.flatMap { pid in processStartTicks.map { (pid, $0) } } }
        set {
            pid = newValue?.pid
            processStartTicks = newValue?.startTicks
        }
    }
    /// CLOCK_BOOTTIME when judging; nil: read the clock (tests set it).
    package var boottimeNanoseconds: UInt64?
    private var pid: Int64?
    private var processStartTicks: UInt64?

    /// An environment; the boot id is read under procRoot unless given.
    package init(
        procRoot: String = "/proc", sysRoot: String = "/sys", bootID: String? = nil,
        serviceVersion: String? = nil, appBuildID: String? = nil, osName: String? = nil,
        osVersion: String? = nil, kernelRelease: String? = nil,
        process: (pid: Int64, startTicks: UInt64)? = nil
    ) {
        self.procRoot = procRoot
        self.sysRoot = sysRoot
        self.bootID = bootID ?? EvidenceReader(procRoot: procRoot).bootID()
        self.serviceVersion = serviceVersion
        self.appBuildID = appBuildID
        self.osName = osName
        self.osVersion = osVersion
        self.kernelRelease = kernelRelease
        self.process = process
    }

    /// This process as ``process`` wants it, read under procRoot; nil when unreadable.
    package static func currentProcess(procRoot: String) -> (pid: Int64, startTicks: UInt64)? {
        let ticks = aft_process_start_ticks(procRoot)
        return ticks == 0 ? nil : (Int64(getpid()), ticks)
    }

    /// The system's environment, with the release unknown (a collection made outside a running
    /// app, such as the debug command's).
    package static func system() -> ExitEnvironment {
        let os = OSInfo.current()
        return ExitEnvironment(osName: os.name, osVersion: os.version, kernelRelease: os.kernelRelease)
    }
}
