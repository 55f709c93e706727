import CSignalShim

/// Reads the Linux evidence files under a proc root (shared C parsers, so the running process
/// and the next launch read them the same way).
package struct EvidenceReader: Sendable {
    /// Root of the proc file system.
    package var procRoot: String

    /// /proc/sys/kernel/random/boot_id; nil when unreadable or empty.
    package func bootID() -> String? {
        var buf = [CChar](repeating: 0, count: Int(AFT_BOOT_ID_CAPACITY))
        let n = aft_read_line(procRoot + "/sys/kernel/random/boot_id", &buf, buf.count)
        guard n > 0 else { return nil }
        return String(decoding: buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// /proc/vmstat oom_kill: the system's OOM kills since boot; nil when unreadable.
    package func vmstatOOMKills() -> UInt64? {
        let v = aft_read_counter(procRoot + "/vmstat", "oom_kill")
        return v == AFT_RUN_UNREAD ? nil : v
    }

    /// The OOM-kill counters of the cgroups a run recorded, now (AFT_OOM_* order; nil unreadable).
    package static func oomCounters(of info: aft_run_info) -> [UInt64?] {
        var out = [UInt64](repeating: AFT_RUN_UNREAD, count: Int(AFT_OOM_COUNTERS))
        withUnsafePointer(to: info) { aft_run_read_oom_now($0, &out) }
        return out.map { $0 == AFT_RUN_UNREAD ? nil : $0 }
    }

    /// Names of the OOM counters, for evidence text.
    package static func counterName(_ index: Int, directories: [String]) -> String {
        switch UInt32(index) {
        case AFT_OOM_V1_SELF: return "\(directories[Int(AFT_CGROUP_V1_SELF)])/memory.oom_control oom_kill"
        case AFT_OOM_V1_PARENT: return "\(directories[Int(AFT_CGROUP_V1_PARENT)])/memory.oom_control oom_kill"
        case AFT_OOM_V2_SELF: return "\(directories[Int(AFT_CGROUP_V2_SELF)])/memory.events oom_kill"
        case AFT_OOM_V2_SELF_GROUP: return "\(directories[Int(AFT_CGROUP_V2_SELF)])/memory.events oom_group_kill"
        case AFT_OOM_V2_PARENT: return "\(directories[Int(AFT_CGROUP_V2_PARENT)])/memory.events oom_kill"
        case AFT_OOM_V2_PARENT_GROUP: return "\(directories[Int(AFT_CGROUP_V2_PARENT)])/memory.events oom_group_kill"
        default: return "counter \(index)"
        }
    }
}
