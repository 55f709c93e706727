import AftermathNextLaunch
import CSignalShim
import Foundation

/// The run's context as start makes it: ids, release, OS, the executable and its build id, for
/// the records and, as C structures, for the crash handler.
extension Aftermath {
    @inline(never)  // its strings and files stay out of start's frame
    package static func makeContext(_ c: Configuration) -> ReportContext {
        let os = OSInfo.current()
        let exe = executablePath()
        let root = c.appRoot ?? ReportDirectory.parent(of: exe)
        // Every string as its fixed-size field keeps it, so what this run compares and sends
        // equals what a later launch reads back from the files (a long service.version must
        // not look like an update).
        func clip(_ s: String, _ capacity: UInt32) -> String { CString.clipped(s, capacity: Int(capacity)) }
        let ids = StartHelpers.randomUUIDs3()
        return ReportContext(
            reportID: ids.0, sessionID: ids.1, runID: ids.2, pid: Int64(getpid()),
            startTimeUnixNano: Clock.realtimeNanoseconds(), serviceName: clip(c.serviceName, AFT_NAME_STRING),
            serviceVersion: clip(c.serviceVersion, AFT_SHORT_STRING), appBuildID: "",
            osName: clip(os.name, AFT_SHORT_STRING), osVersion: clip(os.version, AFT_SHORT_STRING),
            kernelRelease: clip(os.kernelRelease, AFT_SHORT_STRING),
            architecture: .current,
            executablePath: clip(exe, AFT_PATH_CAPACITY), appRoot: clip(root, AFT_PATH_CAPACITY))
    }

    package static func cContext(_ c: ReportContext) -> aft_context {
        var out = aft_context()
        withUnsafeMutableBytes(of: &out.report_id) { c.reportID.copyBytes(into: $0) }
        withUnsafeMutableBytes(of: &out.session_id) { c.sessionID.copyBytes(into: $0) }
        withUnsafeMutableBytes(of: &out.run_id) { c.runID.copyBytes(into: $0) }
        out.pid = UInt64(bitPattern: c.pid)
        out.start_realtime_ns = c.startTimeUnixNano
        withUnsafeMutableBytes(of: &out.service_name) { CString.write(c.serviceName, intoBytes: $0) }
        withUnsafeMutableBytes(of: &out.service_version) { CString.write(c.serviceVersion, intoBytes: $0) }
        withUnsafeMutableBytes(of: &out.os_name) { CString.write(c.osName, intoBytes: $0) }
        withUnsafeMutableBytes(of: &out.os_version) { CString.write(c.osVersion, intoBytes: $0) }
        withUnsafeMutableBytes(of: &out.kernel_release) { CString.write(c.kernelRelease, intoBytes: $0) }
        withUnsafeMutableBytes(of: &out.executable_path) { CString.write(c.executablePath, intoBytes: $0) }
        withUnsafeMutableBytes(of: &out.app_root) { CString.write(c.appRoot, intoBytes: $0) }
        out.arch = Architecture.current.code
        if let buildID = Hex.decode(c.appBuildID) {
            withUnsafeMutableBytes(of: &out.app_build_id) { raw in
                let bytes = buildID.prefix(raw.count)
                raw.copyBytes(from: bytes)
                out.app_build_id_size = UInt32(bytes.count)
                if c.isAppBuildIDTextHash && bytes.count == Int(AFT_TEXT_HASH_SIZE) {
                    let marker = ReportContext.textHashMarker
                    UnsafeMutableRawBufferPointer(rebasing: raw[bytes.count..<bytes.count + marker.count])
                        .copyBytes(from: marker)
                }
            }
        }
        return out
    }

    /// The main executable's path, as /proc/self/maps names it.
    package static func executablePath() -> String {
        // readlink(2) itself: start calls this on the app's thread, and FileManager's first use
        // costs a tenth of a millisecond. Into a buffer on the stack, 256 bytes first: a 4 KiB
        // one from the heap would grow the app's main heap by a page that stays dirty.
        var path = ""
        var capacity = 256
        while true {
            let n = withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer in
                let n = readlink("/proc/self/exe", buffer.baseAddress!, capacity)
                if n > 0 && n < capacity {
                    // Decoded where it lies: a [UInt8] copy would have the runtime build its type
                    // by name.
                    path = UnsafeRawBufferPointer(start: buffer.baseAddress!, count: n).withMemoryRebound(
                        to: UInt8.self
                    ) { String(decoding: $0, as: UTF8.self) }
                }
                return n
            }
            if n <= 0 || capacity > 4096 { break }
            if n < capacity { return path }
            capacity = 4097  // PATH_MAX and its NUL
        }
        return CommandLine.arguments.first ?? ""
    }

    /// The main executable's GNU build id (or its text hash, without one), as the handler read
    /// it from memory at install; an empty value when it has neither. Not an optional: one of
    /// this tuple has the runtime build its type by name, on start's caller.
    @inline(never)  // its C context stays out of start's frame on the caller's stack
    static func currentAppBuildID() -> (value: String, isTextHash: Bool) {
        var context = aft_context()
        aft_installed_context(&context)
        // The build id alone, not a whole ReportContext (its strings and ids) read back.
        let count = Int(min(context.app_build_id_size, AFT_BUILD_ID_CAPACITY))
        guard count > 0 else { return ("", false) }
        let value = withUnsafeBytes(of: &context.app_build_id) {
            Hex.encode(raw: UnsafeRawBufferPointer(rebasing: $0.prefix(count)))
        }
        return (value, ReportContext.hasTextHashMarker(context))
    }
}
