@_exported import AftermathOTLP
import Foundation

/// Keeps exported batches in memory, for tests.
///
/// Every call to ``export(_:)`` is recorded, empty batches included, unless ``failNext(_:)``
/// makes it throw, in which case nothing is recorded (the batch is not acknowledged).
public final class InMemoryExporter: LogExporter, @unchecked Sendable {
    private let lock = NSLock()
    private var exported: [LogBatch] = []
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

    /// Makes the next `n` exports throw ``ExportError`` without recording their batches.
    public func failNext(_ n: Int) {
        lock.withLock { failuresLeft = max(0, n) }
    }

    /// Forgets all batches and pending failures.
    public func reset() {
        lock.withLock {
            exported = []
            failuresLeft = 0
        }
    }

    /// Records `batch`, or throws ``ExportError`` if a failure was requested with ``failNext(_:)``.
    public func export(_ batch: LogBatch) throws {
        try lock.withLock {
            if failuresLeft > 0 {
                failuresLeft -= 1
                throw ExportError("InMemoryExporter: simulated failure (failNext)")
            }
            exported.append(batch)
        }
    }
}
