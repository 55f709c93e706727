import CSignalShim
import Foundation

/// One run file (runs/<run id>.run) decoded: strict about the header and the info block
/// (magic, version, kind, commit, CRC), lenient after it: each live slot, the termination block
/// and the exit block count only when their own check value holds, and a file cut short keeps
/// what is whole.
package struct RunFile: Sendable {
    /// The largest run file accepted (a newer writer may append blocks).
    package static let maximumSize = 64 * 1024
    /// Size of the fixed layout this build writes.
    package static let size = MemoryLayout<aft_run_file>.size

    /// Written once at start.
    package var info: aft_run_info
    /// The newest valid live block, if any.
    package var live: aft_run_live?
    /// The termination request the handler recorded, if any.
    package var term: aft_run_term?
    /// The normal-termination block, if the run ended normally.
    package var exit: aft_run_exit?

    /// The run's context as its records carry it (its first session).
    package var context: ReportContext { ReportContext(info.context) }
    /// The run's id.
    package var runID: UUID { context.runID }
    /// The kernel's boot_id when the run started.
    package var bootID: String {
        var i = info
        return CString.read(&i.boot_id)
    }
    /// The session the run was in at its last update.
    package var sessionID: UUID {
        guard var l = live else { return context.sessionID }
        return UUID(bytes: &l.session_id)
    }
    /// The session before it, when the run started a new one.
    package var previousSessionID: UUID? {
        guard var l = live else { return nil }
        let id = UUID(bytes: &l.previous_session_id)
        return id.bytes.allSatisfy { $0 == 0 } ? nil : id
    }
    /// app.screen.name at the last update; nil when none was set.
    package var screen: String? {
        guard var l = live else { return nil }
        let s = CString.read(&l.screen)
        return s.isEmpty ? nil : s
    }
    /// Whether the run was in the foreground at its last update (true when never updated).
    package var foreground: Bool { live.map { $0.foreground != 0 } ?? true }
    /// Whether a debugger was attached at some update.
    package var debuggerSeen: Bool { live.map { $0.debugger_seen != 0 } ?? false }
    /// The last time the run was seen alive: its newest update, or its termination request.
    package var lastSeenUnixNano: UInt64 {
        max(info.context.start_realtime_ns, live?.updated_realtime_ns ?? 0, term?.time_realtime_ns ?? 0)
    }
    /// The cgroup directories the run recorded (AFT_CGROUP_* order; "" when absent).
    package var cgroupDirectories: [String] {
        var i = info
        return withUnsafeBytes(of: &i.cgroup_dirs) { raw in
            (0..<Int(AFT_CGROUP_DIRS)).map { n in
                let slice = raw[(n * Int(AFT_PATH_CAPACITY))..<((n + 1) * Int(AFT_PATH_CAPACITY))]
                return String(decoding: slice.prefix { $0 != 0 }, as: UTF8.self)
            }
        }
    }

    /// Decodes a run file's bytes.
    package static func decode(_ bytes: [UInt8]) throws(ReportFileError) -> RunFile {
        try bytes.withRawBytes { raw throws(ReportFileError) in try decode(raw) }
    }

    /// Decodes a run file's bytes in memory of the caller's (``FileReader/withBytes(fd:maximumSize:_:)``).
    package static func decode(_ raw: UnsafeRawBufferPointer) throws(ReportFileError) -> RunFile {
        let headerSize = MemoryLayout<aft_file_header>.size
        let infoSize = MemoryLayout<aft_run_info>.size
        let h = try FileHeader.validate(raw, kinds: .run, maximumSize: maximumSize)
        guard Int(h.header_size) == headerSize else { throw .badHeaderSize(h.header_size) }
        guard h.commit == AFT_COMMIT_MARKER else { throw .notCommitted }
        // The CRC covers the fixed info only; the live slots and the termination and exit
        // blocks after it change in place and carry their own checks.
        try FileHeader.verifyBody(raw, header: h, start: headerSize, length: infoSize)

        func block<T>(_ type: T.Type, at offset: Int, checkAt checkOffset: Int) -> T? {
            guard offset + MemoryLayout<T>.size <= raw.count else { return nil }
            let stored = raw.loadUnaligned(fromByteOffset: offset + checkOffset, as: UInt32.self)
            guard stored != 0, stored == aft_run_check(raw.baseAddress! + offset, checkOffset) else { return nil }
            return raw.loadUnaligned(fromByteOffset: offset, as: T.self)
        }
        let info = raw.loadUnaligned(fromByteOffset: headerSize, as: aft_run_info.self)
        let liveBase = MemoryLayout<aft_run_file>.offset(of: \.live)!
        let liveSize = MemoryLayout<aft_run_live>.size
        let liveCheck = MemoryLayout<aft_run_live>.offset(of: \.check)!
        // The newest valid slot, without an array of them: its storage's type would be
        // built by name at every launch's first judged run.
        var live: aft_run_live?
        for slot in 0..<Int(AFT_RUN_LIVE_SLOTS) {
            guard let l = block(aft_run_live.self, at: liveBase + slot * liveSize, checkAt: liveCheck),
                l.sequence > 0, l.sequence > live?.sequence ?? 0
            else { continue }
            live = l
        }
        let term = block(
            aft_run_term.self, at: MemoryLayout<aft_run_file>.offset(of: \.term)!,
            checkAt: MemoryLayout<aft_run_term>.offset(of: \.check)!)
        let exit = block(
            aft_run_exit.self, at: MemoryLayout<aft_run_file>.offset(of: \.exit)!,
            checkAt: MemoryLayout<aft_run_exit>.offset(of: \.check)!)
        return RunFile(
            info: info, live: live,
            term: term.flatMap { $0.signal != 0 ? $0 : nil },
            exit: exit.flatMap { $0.clean == AFT_RUN_CLEAN_MARKER ? $0 : nil })
    }
}
