import AftermathOTLP
/// Maps hangs to `apsio.hang` records.
///
/// Crash and hang of the same run: both are reported. A crash is always an `app.crash`; a hang
/// file left by a run that also crashed still becomes its own `apsio.hang` (unfinished when the
/// crash came during the hang, as a watchdog's abort does), with
/// `apsio.hang.run_crashed = true` so the two can be joined. Neither replaces the other.
package enum HangRecordMapper {
    /// An `apsio.hang` record with source `live`: seen while the app ran, in its session.
    /// `unfinished` hangs (the run ended during the hang) carry the last updated duration,
    /// a lower bound.
    package static func hang(_ h: HangReport, observedTimeUnixNano: UInt64, runCrashed: Bool = false) -> LogRecord {
        let threads =
            h.threads.isEmpty
            ? nil
            : StackFormatter.threads(h.threads, crashFrames: [], images: h.images, architecture: h.context.architecture)
        var a: [Attribute] = [
            Attribute("apsio.hang.source", "live"),
            Attribute("apsio.hang.duration", .int(Int64(clamping: h.durationMilliseconds))),
        ]
        if !h.isFinished { a.append(Attribute("apsio.hang.unfinished", .bool(true))) }
        a += [
            Attribute("exception.stacktrace", .string(StackFormatter.stacktrace(frames: h.frames, images: h.images))),
            Attribute(
                "apsio.crash.images",
                .string(
                    StackFormatter.imagesJSON(
                        frames: h.frames + (threads?.frames ?? []) + (h.asyncChain?.resumes ?? []), images: h.images,
                        appRoot: h.context.appRoot))),
            Attribute("apsio.hang.id", .string(h.context.reportID.lowercased)),
            Attribute(
                "log.record.uid", .string(RecordMapper.recordUID(timeUnixNano: h.timeUnixNano, id: h.context.reportID))),
        ]
        a += RecordMapper.asyncAttributes(h.asyncChain, images: h.images)
        a += RecordMapper.runAttributes(h.context, previousSessionID: h.previousSessionID)
        a += [
            Attribute("thread.id", .int(Int64(bitPattern: h.threadID))),
            Attribute("thread.name", .string(h.threadName)),
            Attribute("apsio.hang.main_thread", .bool(h.threadID == UInt64(bitPattern: h.context.pid))),
            Attribute("apsio.hang.kind", .string(h.kind.rawValue)),
            Attribute("apsio.hang.target", .string(h.targetName)),
            Attribute("apsio.hang.thread_state", .string(h.threadStateName)),
            Attribute("apsio.hang.threshold", .int(Int64(clamping: h.thresholdMilliseconds))),
            Attribute("apsio.hang.capture", .string(h.captureMethod.rawValue)),
        ]
        if let nr = h.syscallNumber {
            a.append(Attribute("apsio.hang.syscall", .int(nr)))
            if let name = syscallName(nr, architecture: h.context.architecture) {
                a.append(Attribute("apsio.hang.syscall_name", .string(name)))
            }
        }
        if !h.waitChannel.isEmpty { a.append(Attribute("apsio.hang.wait_channel", .string(h.waitChannel))) }
        if h.framesTruncated { a.append(Attribute("apsio.hang.frames_truncated", .bool(true))) }
        if runCrashed { a.append(Attribute("apsio.hang.run_crashed", .bool(true))) }
        if h.suppressed > 0 { a.append(Attribute("apsio.hang.suppressed", .int(Int64(h.suppressed)))) }
        if let pool = h.pool {
            a += [
                Attribute("apsio.hang.pool.width", .int(Int64(pool.width))),
                Attribute("apsio.hang.pool.jobs", .int(Int64(pool.jobs))),
                Attribute("apsio.hang.pool.blocked", .int(Int64(pool.blocked))),
                Attribute("apsio.hang.pool.busy", .int(Int64(pool.busy))),
                Attribute("apsio.hang.pool.state", .string(pool.state)),
            ]
        }
        if let threads {
            a.append(Attribute("apsio.threads", .string(threads.json)))
            if threads.omitted > 0 { a.append(Attribute("apsio.threads.omitted", .int(Int64(threads.omitted)))) }
        }
        return LogRecord(
            timeUnixNano: h.timeUnixNano, observedTimeUnixNano: observedTimeUnixNano,
            severityNumber: .error, eventName: "apsio.hang", attributes: a)
    }

    /// Names of the system calls a blocked thread is usually found in.
    package static func syscallName(_ nr: Int64, architecture: Architecture) -> String? {
        let table: [Int64: String]
        switch architecture {
        case .x86_64:
            table = [
                0: "read", 1: "write", 7: "poll", 17: "pread64", 18: "pwrite64", 23: "select",
                34: "pause", 35: "nanosleep", 43: "accept", 45: "recvfrom", 61: "wait4",
                74: "fsync", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
                270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4",
                441: "epoll_pwait2",
            ]
        case .arm64:
            table = [
                22: "epoll_pwait", 63: "read", 64: "write", 72: "pselect6", 73: "ppoll",
                82: "fsync", 98: "futex", 101: "nanosleep", 115: "clock_nanosleep",
                202: "accept", 207: "recvfrom", 242: "accept4", 260: "wait4", 441: "epoll_pwait2",
            ]
        default:
            return nil
        }
        return table[nr]
    }
}
