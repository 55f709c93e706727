import AftermathOTLP
import Foundation

/// Maps decoded reports to OpenTelemetry log records (`app.crash`, `app.abnormal_exit`).
package enum RecordMapper {
    /// The attributes every record of a run carries: that run's session (and the one before,
    /// when the app started a new one) and release (2.5).
    package static func runAttributes(_ c: ReportContext, previousSessionID: UUID? = nil) -> [Attribute] {
        var a = [
            Attribute("session.id", .string(c.sessionID.lowercased)),
            Attribute("service.version", .string(c.serviceVersion)),
            Attribute("os.name", .string(c.osName)),
            Attribute("os.version", .string(c.osVersion)),
        ]
        if let previousSessionID { a.append(Attribute("session.previous_id", .string(previousSessionID.lowercased))) }
        if !c.appBuildID.isEmpty {
            a.append(Attribute("app.build_id", .string(c.appBuildID)))
            if c.isAppBuildIDTextHash { a.append(Attribute("apsio.app.build_id_type", .string("text_hash"))) }
        }
        if !c.kernelRelease.isEmpty { a.append(Attribute("apsio.os.kernel_release", .string(c.kernelRelease))) }
        return a
    }

    /// The Swift async callers of the record's thread: apsio.async_stacktrace (the format of
    /// exception.stacktrace, innermost caller first, each line a resume address: symbolicate it
    /// as it is, not less one as a return address), apsio.async_stacktrace.anchor (`register`,
    /// `frame` or `task`: with `task`, callers that returned since the task last resumed may
    /// come first), and apsio.async_stacktrace.cut when the chain went on. None without a chain.
    package static func asyncAttributes(_ chain: SwiftAsyncChain?, images: [LoadedImage]) -> [Attribute] {
        guard let chain, !chain.resumes.isEmpty else { return [] }
        var a = [
            Attribute(
                "apsio.async_stacktrace", .string(StackFormatter.stacktrace(frames: chain.resumes, images: images))),
            Attribute("apsio.async_stacktrace.anchor", .string(chain.anchor.rawValue)),
        ]
        if chain.isCut { a.append(Attribute("apsio.async_stacktrace.cut", .bool(true))) }
        return a
    }

    /// log.record.uid: a ULID whose time is the event's and whose randomness comes from the
    /// report id, so every attempt to send the same report carries the same uid.
    package static func recordUID(timeUnixNano: UInt64, id: UUID) -> String {
        ULID.make(timeMilliseconds: timeUnixNano / 1_000_000, entropy: id.bytes)
    }

    /// An `app.crash` record. With the report's threads (format 2), apsio.threads lists them
    /// (``StackFormatter/threads(_:crashFrames:images:architecture:maxBytes:)``) and
    /// apsio.crash.images covers their frames too; a report without them (format 1) has no
    /// apsio.threads: its absence means the other threads were not captured.
    /// - Parameter previousSessionID: session.previous_id, from the crashed run's file (the
    ///   crash file does not carry it).
    package static func crash(
        _ r: CrashReport, observedTimeUnixNano: UInt64, previousSessionID: UUID? = nil
    ) -> LogRecord {
        let threads =
            r.threads.isEmpty
            ? nil
            : StackFormatter.threads(
                r.threads, crashFrames: r.frames, images: r.images, architecture: r.context.architecture)
        var a: [Attribute] = [
            Attribute("exception.type", .string(SignalDescription.exceptionType(signal: r.signal, code: r.code))),
            Attribute(
                "exception.message",
                .string(
                    SignalDescription.explanation(
                        signal: r.signal, code: r.code, faultAddress: r.faultAddress, pc: r.pc, sp: r.sp,
                        senderPID: r.senderPID, senderUID: r.senderUID))),
            Attribute("exception.stacktrace", .string(StackFormatter.stacktrace(frames: r.frames, images: r.images))),
            Attribute("app.crash.id", .string(r.context.reportID.lowercased)),
            Attribute("log.record.uid", .string(recordUID(timeUnixNano: r.timeUnixNano, id: r.context.reportID))),
            Attribute(
                "apsio.crash.images",
                .string(
                    StackFormatter.imagesJSON(
                        frames: r.frames + (threads?.frames ?? []) + (r.asyncChain?.resumes ?? []), images: r.images,
                        appRoot: r.context.appRoot))),
        ]
        a += asyncAttributes(r.asyncChain, images: r.images)
        if let threads {
            a.append(Attribute("apsio.threads", .string(threads.json)))
            if threads.omitted > 0 { a.append(Attribute("apsio.threads.omitted", .int(Int64(threads.omitted)))) }
        }
        if let capture = r.threadCapture {
            if capture.omitted > 0 { a.append(Attribute("apsio.threads.not_captured", .int(Int64(capture.omitted)))) }
            // How long the other threads were held: paused and answering, then unwound.
            a.append(Attribute("apsio.threads.capture_ms", .double(Double(capture.captureNs) / 1e6)))
            a.append(Attribute("apsio.threads.unwind_ms", .double(Double(capture.unwindNs) / 1e6)))
            if capture.deadlineReached { a.append(Attribute("apsio.threads.deadline_reached", .bool(true))) }
        }
        a += runAttributes(r.context, previousSessionID: previousSessionID)
        a += [
            Attribute("thread.id", .int(Int64(bitPattern: r.threadID))),
            Attribute("thread.name", .string(r.threadName)),
            Attribute("apsio.crash.signal", .int(Int64(r.signal))),
            Attribute("apsio.crash.fault_address", .string(Hex.address(r.faultAddress))),
            Attribute("apsio.crash.main_thread", .bool(r.isMainThread)),
            Attribute("apsio.crash.unwinder", .string(r.unwinder.rawValue)),
        ]
        if let pid = r.senderPID { a.append(Attribute("apsio.crash.sender_pid", .int(pid))) }
        if let uid = r.senderUID { a.append(Attribute("apsio.crash.sender_uid", .int(uid))) }
        if let reason = r.unwindStatus.fallbackReason {
            a.append(Attribute("apsio.crash.unwind_fallback", .string(reason)))
        }
        if r.framesTruncated { a.append(Attribute("apsio.crash.frames_truncated", .bool(true))) }
        if r.isPartial { a.append(Attribute("apsio.crash.partial", .bool(true))) }
        if r.handlerFaulted { a.append(Attribute("apsio.crash.handler_fault", .bool(true))) }
        return LogRecord(
            timeUnixNano: r.timeUnixNano, observedTimeUnixNano: observedTimeUnixNano,
            severityNumber: .fatal, eventName: "app.crash", attributes: a)
    }
}
