@_exported import AftermathOTLP
import Foundation

/// Keeps exported batches and attachments in memory, for tests.
///
/// Every call to an `export` is recorded, empty batches included, unless ``failNext(_:)``
/// makes it throw, in which case nothing is recorded (not acknowledged).
public final class InMemoryExporter: LogExporter, AttachmentExporter, @unchecked Sendable {
    private let lock = NSLock()
    private var exported: [LogBatch] = []
    private var exportedAttachments: [Attachment] = []
    private var failuresLeft = 0

    /// Creates an empty exporter.
    public init() {}

    /// The acknowledged batches, in export order.
    public var batches: [LogBatch] {
        lock.withLock { exported }
    }

    /// The records of all acknowledged batches, in export order.
    public var records: [LogRecord] {
        lock.withLock { exported.flatMap(\.records) }
    }

    /// The acknowledged attachments, in export order.
    public var attachments: [Attachment] {
        lock.withLock { exportedAttachments }
    }

    /// Makes the next `n` exports throw ``ExportError`` without recording their batches.
    public func failNext(_ n: Int) {
        lock.withLock { failuresLeft = max(0, n) }
    }

    /// Forgets all batches and pending failures.
    public func reset() {
        lock.withLock {
            exported = []
            exportedAttachments = []
            failuresLeft = 0
        }
    }

    /// Records `batch`, or throws ``ExportError`` if a failure was requested with ``failNext(_:)``.
    public func export(_ batch: LogBatch) throws {
        try lock.withLock {
            try takeFailure()
            exported.append(batch)
        }
    }

    /// Records `attachment` and returns its id, or throws ``ExportError`` if a failure was
    /// requested with ``failNext(_:)``.
    public func export(_ attachment: Attachment) throws -> String? {
        try lock.withLock {
            try takeFailure()
            exportedAttachments.append(attachment)
            return attachment.id
        }
    }

    /// Throws the failure ``failNext(_:)`` asked for, if any is left; called under the lock.
    private func takeFailure() throws {
        guard failuresLeft > 0 else { return }
        failuresLeft -= 1
        throw ExportError("InMemoryExporter: simulated failure (failNext)")
    }
}
