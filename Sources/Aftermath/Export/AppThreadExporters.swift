import AftermathNextLaunch
import CSignalShim

/// Runs the app's exporter code on Aftermath's own delivery thread under the name of the
/// thread that started Aftermath: threads the exporter creates there (a task that grows the
/// concurrency pool, a networking library's) inherit the name, and must be the app's, which a
/// crash's capture pauses and records. On any other thread, a plain call.
enum AppThreadName {
    static func run<T>(_ body: () throws -> T) rethrows -> T {
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: 16) { saved in
            let renamed = aft_thread_take_app_name(saved.baseAddress!) == 1
            defer { if renamed { aft_thread_restore_name(saved.baseAddress!) } }
            if renamed { aft_thread_note_handing_off() }  // where a crash meanwhile lists it
            return try body()
        }
    }
}

/// A log exporter whose exports run under the app's thread name (``AppThreadName``).
final class AppThreadLogExporter: LogExporter {
    let base: any LogExporter

    init(base: any LogExporter) { self.base = base }

    func export(_ batch: LogBatch) throws { try AppThreadName.run { try base.export(batch) } }

    var asAttachmentExporter: (any AttachmentExporter)? {
        base.asAttachmentExporter.map { AppThreadAttachmentExporter(base: $0) }
    }
}

/// An attachment exporter whose exports run under the app's thread name (``AppThreadName``).
final class AppThreadAttachmentExporter: AttachmentExporter {
    let base: any AttachmentExporter

    init(base: any AttachmentExporter) { self.base = base }

    func export(_ attachment: Attachment) throws -> String? {
        try AppThreadName.run { try base.export(attachment) }
    }
}
