import AftermathOTLP
import Foundation

/// A handled error the app recorded with ``Aftermath/record(error:fingerprint:)``, as read
/// back from errors/.
package struct HandledError: Sendable, Hashable {
    /// The run's context when the error was recorded (its session at that moment).
    package var context: ReportContext
    /// exception.type: the Swift type of the error, `String(reflecting: type(of: error))`.
    package var type: String
    /// exception.message: `String(describing: error)`, cut at 8 KiB.
    package var message: String
    /// apsio.error.fingerprint, when the app gave one.
    package var fingerprint: String?
    /// When it was recorded, nanoseconds since the Unix epoch.
    package var timeUnixNano: UInt64
    /// Kernel thread id of the recording thread.
    package var threadID: UInt64
    /// The recording thread was the process's first thread.
    package var isMainThread: Bool
    /// The recording thread's stack, the caller of `record` first.
    package var frames: [UInt64]
    /// The images the frames fall in.
    package var images: [LoadedImage]
    /// session.previous_id when the session was started by ``Aftermath/startNewSession()``.
    package var previousSessionID: UUID?
    /// app.screen.name when the error was recorded.
    package var screen: String?
    /// The id that log.record.uid derives from.
    package var errorID: UUID
    /// The recording thread's Swift async callers, when it ran in a task.
    package var asyncChain: SwiftAsyncChain? = nil

    /// The record: severity ERROR, no event name.
    package func record(observedTimeUnixNano: UInt64) -> LogRecord {
        var a: [Attribute] = [
            Attribute("exception.type", .string(type)),
            Attribute("exception.message", .string(message)),
            Attribute("exception.stacktrace", .string(StackFormatter.stacktrace(frames: frames, images: images))),
            Attribute(
                "apsio.crash.images",
                .string(
                    StackFormatter.imagesJSON(
                        frames: frames + (asyncChain?.resumes ?? []), images: images,
                        appRoot: context.appRoot))),
        ]
        a += RecordMapper.asyncAttributes(asyncChain, images: images)
        if let fingerprint { a.append(Attribute("apsio.error.fingerprint", .string(fingerprint))) }
        a.append(Attribute("log.record.uid", .string(RecordMapper.recordUID(timeUnixNano: timeUnixNano, id: errorID))))
        a += RecordMapper.runAttributes(context)
        if let previousSessionID { a.append(Attribute("session.previous_id", .string(previousSessionID.lowercased))) }
        if let screen { a.append(Attribute("app.screen.name", .string(screen))) }
        a.append(Attribute("thread.id", .int(Int64(bitPattern: threadID))))
        return LogRecord(
            timeUnixNano: timeUnixNano, observedTimeUnixNano: observedTimeUnixNano,
            severityNumber: .error, attributes: a)
    }
}
