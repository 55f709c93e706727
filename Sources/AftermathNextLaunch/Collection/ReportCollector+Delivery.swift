import AftermathOTLP
import CSignalShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension ReportCollector {
    /// What one delivery did.
    package struct Delivery: Sendable {
        /// Records the exporter acknowledged (their files are deleted).
        package var exported: Int
        /// Files that were not reported, with the reason.
        package var rejected: [RejectedFile]
        /// Why the exporter refused the batch, when it did (the files are kept).
        package var exportError: String?
        /// Attachments their exporter acknowledged (deleted), by id, with what the receiver
        /// calls each ("" when it said nothing).
        package var attachments: [String: String] = [:]
        /// Why an attachment was not stored or not delivered, the first time it happened.
        package var attachmentError: String?
    }

    /// Why a delivery asked for from inside another on the same thread (by its exporter) did
    /// not run: the one running delivers what is pending.
    package static let nestedDeliveryError = "a delivery is already running on this thread"

    /// Records per exported batch: a refused batch holds back no more than this many.
    package static let batchSize = 50

    /// Why a delivery stopped, or did not begin, in a process that is ending: what is left
    /// waits for the next launch.
    package static var endingError: String {
        aft_crash_in_progress() != 0 ? "the process is crashing" : "the process is terminating"
    }

    /// Collects, then exports in batches of at most ``batchSize`` records, deleting the files of
    /// each acknowledged batch. A batch that fails keeps its files for the next attempt; an
    /// unavailable receiver (``ExportError/Kind/unavailable``: unreachable, out of time) stops
    /// the batches after it too; a batch refused for good goes to rejected/ with the reason.
    /// One delivery at a time per reports directory, across processes too (a lock file), so
    /// two instances never send the same report twice. Once a crash of this process has begun
    /// (`aft_crash_in_progress()`) no batch or attachment is handed on: what is left waits
    /// for the next launch.
    ///
    /// With an attachment exporter and a ``minidump`` maker, each crash's minidump is stored in
    /// attachments/ before its record is exported (the record then names it in
    /// `apsio.attachment.id`), and the pending attachments are exported after every batch of
    /// records, whatever became of them: an attachment never holds back a record.
    package func deliver(
        to exporter: any LogExporter, attachments attachmentExporter: (any AttachmentExporter)? = nil,
        resource: Resource
    ) -> Delivery {
        // One at a time in this process: the lock is C's (a Swift global's would dirty a page of
        // its own in every app). Asked for from inside a delivery (by its exporter): refused.
        guard aft_delivery_lock() == 0 else {
            return Delivery(exported: 0, rejected: [], exportError: Self.nestedDeliveryError)
        }
        defer { aft_delivery_unlock() }
        return deliverExclusively(to: exporter, attachments: attachmentExporter, resource: resource)
    }

    /// ``deliver(to:attachments:resource:)`` once no other delivery of this process runs.
    private func deliverExclusively(
        to exporter: any LogExporter, attachments attachmentExporter: (any AttachmentExporter)?,
        resource: Resource
    ) -> Delivery {
        let lockPath = directory.deliveryLock
        let lock: Int32
        switch StoreFiles.openLockFile(lockPath) {
        case .success(let fd): lock = fd
        case .failure(let error): return Delivery(exported: 0, rejected: [], exportError: error.description)
        }
        defer { close(lock) }
        // A record lock (fcntl), not flock: it is the process's, so a child forked meanwhile
        // (an app starting a process, a test runner) holds none with the descriptor it
        // inherits, and never makes the next delivery of this process look like another's.
        // Deliveries within the process are one at a time already (aft_delivery_lock).
        guard Self.lockWholeFile(lock) else {
            return Delivery(exported: 0, rejected: [], exportError: "another process is delivering these reports")
        }
        // A crash of this process in progress: it dies before an export would finish; the
        // next launch delivers, and this crash with the rest.
        guard aft_crash_in_progress() == 0 else {
            return Delivery(exported: 0, rejected: [], exportError: Self.endingError)
        }
        let collection = collect(moveRejected: true)
        var delivery = Delivery(exported: 0, rejected: collection.rejected, exportError: nil)
        let minidump = attachmentExporter == nil ? nil : self.minidump
        var start = 0
        batches: while start < collection.reports.count {
            guard aft_crash_in_progress() == 0 else {
                delivery.exportError = delivery.exportError ?? Self.endingError
                break batches
            }
            var chunk = Array(collection.reports[start..<min(start + Self.batchSize, collection.reports.count)])
            start += chunk.count
            // A termination signal ending the process, or a crash of it, waits for this
            // hand-off to finish (its attachments written whole, its files deleted once
            // acknowledged), or refuses it: never exported twice, never a torn attachment.
            guard aft_export_begin() != 0 else {
                delivery.exportError = delivery.exportError ?? Self.endingError
                break batches
            }
            var stored: [String] = []
            if let minidump {
                for i in chunk.indices {
                    guard let crash = chunk[i].crash else { continue }
                    switch storeAttachment(of: crash, minidump(crash)) {
                    case .none: break
                    case .stored(let id, let path):
                        chunk[i].record.attributes.append(Attribute("apsio.attachment.id", .string(id)))
                        stored.append(path)
                    case .failed(let why): delivery.attachmentError = delivery.attachmentError ?? why
                    }
                }
            }
            let batch = LogBatch(
                resource: resource, scopeName: SDK.scopeName,
                scopeVersion: SDK.version, records: chunk.map(\.record))
            do {
                try exporter.export(batch)
            } catch {
                aft_export_end()
                delivery.exportError = delivery.exportError ?? String(describing: error)
                switch (error as? ExportError)?.kind ?? .failed {
                case .failed: continue batches
                case .unavailable: break batches
                case .rejectedByCollector(let message):
                    // Resending cannot succeed: kept aside with the collector's word; their
                    // attachments would name records the backend never got.
                    for report in chunk {
                        delivery.rejected.append(
                            reject(report.path, reason: "refused by the collector: \(message)", moveRejected: true))
                    }
                    stored.forEach { unlink($0) }
                    continue batches
                }
            }
            for report in chunk { unlink(report.path) }
            aft_export_end()
            delivery.exported += chunk.count
        }
        deliverAttachments(to: attachmentExporter, &delivery)
        return delivery
    }

    /// Takes an exclusive record lock on the whole of fd's file without waiting; false when
    /// another process holds one.
    static func lockWholeFile(_ fd: Int32) -> Bool {
        var region = flock()
        region.l_type = Int16(F_WRLCK)
        region.l_whence = Int16(SEEK_SET)
        region.l_start = 0
        region.l_len = 0  // to the end, whatever it becomes
        return fcntl(fd, F_SETLK, &region) == 0
    }
}
