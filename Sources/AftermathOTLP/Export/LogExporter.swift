#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Sends batches of records somewhere: a collector, a file, memory.
///
/// The contract is acknowledgement: returning normally from ``export(_:)`` means the batch is
/// delivered, and the caller then deletes the reports it was made from. Throwing means it is
/// not: the caller keeps the reports and sends them again on a later attempt, so an exporter
/// must throw whenever it cannot be sure the batch is durably delivered, and a receiver may
/// see a batch more than once (records carry `log.record.uid` to deduplicate). An
/// ``ExportError`` says more through its ``ExportError/kind``: the receiver is unavailable
/// (later batches wait too), or it refused the batch for good (its reports go to `rejected/`).
public protocol LogExporter: Sendable {
    /// Delivers `batch`, returning only once it is acknowledged; throws if it is not.
    func export(_ batch: LogBatch) throws
}
