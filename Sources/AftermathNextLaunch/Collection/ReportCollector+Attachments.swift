import AftermathOTLP
import CSignalShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// attachments/: each crash's minidump waits there, `<apsio.attachment.id>.attachment`, from
/// the delivery that exports its record until the attachment exporter acknowledges it. The
/// crash file goes as soon as its record is acknowledged; the attachment has its own
/// retention (``Limits/maxPendingAttachments``, ``Limits/maxAttachmentAgeSeconds``,
/// ``Limits/maxAttachmentBytes``) and is sent only once its record left crashes/.
extension ReportCollector {
    package enum StoredAttachment: Equatable {
        /// The maker had nothing for this crash.
        case none
        /// Durably in attachments/ under this id.
        case stored(id: String, path: String)
        /// Not stored, and why: the record goes without an attachment.
        case failed(String)
    }

    /// Stores crash's minidump as its pending attachment: written whole under a temporary name
    /// (created new, 0600, no link followed), synced, renamed over any earlier copy (the same
    /// bytes, from an earlier attempt at the same crash), the directory synced.
    package func storeAttachment(of crash: CrashReport, _ bytes: [UInt8]) -> StoredAttachment {
        guard !bytes.isEmpty else { return .none }
        guard bytes.count <= limits.maxAttachmentFileBytes else {
            return .failed("minidump of \(bytes.count) bytes, over the \(limits.maxAttachmentFileBytes)-byte limit")
        }
        do { try directory.prepareAttachments() } catch {
            guard case .cannotCreate(let path, let reason) = error else { return .failed("\(error)") }
            return .failed("cannot use \(path): \(reason)")
        }
        let attachment = PendingAttachment.minidump(of: crash, bytes: bytes)
        let path = directory.attachments + "/" + attachment.id + PendingAttachment.suffix
        let temporary = path + ".tmp"
        unlink(temporary)  // a leftover of a writer that died; unlink never follows a link
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else { return .failed("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var err = fchmod(fd, 0o600) == 0 ? StoreFiles.writeAll(fd, PendingAttachment.encode(attachment)) : errno
        if err == 0, fsync(fd) != 0 { err = errno }
        close(fd)
        if err == 0, rename(temporary, path) != 0 { err = errno }
        guard err == 0 else {
            unlink(temporary)
            return .failed("cannot write \(path): \(String(cString: strerror(err)))")
        }
        let dirFD = open(directory.attachments, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if dirFD >= 0 {
            _ = fsync(dirFD)
            close(dirFD)
        }
        return .stored(id: attachment.id, path: path)
    }

    /// Applies the retention, then exports the pending attachments oldest first, one at a time.
    /// Acknowledged: deleted. Unavailable: it and the later ones wait for the next delivery.
    /// Refused for good: moved to rejected/ with the receiver's message. A file that is not a
    /// whole attachment of ours is moved to rejected/ with the reason, never sent, and never
    /// stops the others. Without an exporter they wait, still under the retention.
    package func deliverAttachments(to exporter: (any AttachmentExporter)?, _ delivery: inout Delivery) {
        var st = stat()
        guard lstat(directory.attachments, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { return }
        var pass = Pass(moveRejected: true, observedTimeUnixNano: Clock.realtimeNanoseconds())
        pass.removalBudget = limits.maxRemovalsPerCollection
        let kept = retainedAttachments(&pass)
        delivery.rejected += pass.rejected
        let before = delivery.rejected.count
        defer {
            if delivery.rejected.dropFirst(before - pass.rejected.count).contains(where: { $0.movedTo != nil }) {
                trimRejected()
            }
        }
        guard let exporter else { return }
        for (path, id) in kept {
            let attachment: Attachment
            do {
                attachment = try PendingAttachment.decode(
                    FileReader.read(path, maximumSize: limits.maxAttachmentFileBytes), expectedID: id)
            } catch {
                let reason = (error as? ReportFileError)?.description ?? String(describing: error)
                delivery.rejected.append(reject(path, reason: reason, moveRejected: true))
                continue
            }
            if recordIsPending(attachment) { continue }
            // As a batch of records: refused once the process is ending, waited for by a
            // crash or termination signal while it runs.
            guard aft_export_begin() != 0 else {
                delivery.attachmentError = delivery.attachmentError ?? Self.endingError
                return
            }
            defer { aft_export_end() }
            do {
                let receipt = try exporter.export(attachment)
                unlink(path)
                delivery.attachments[id] = receipt ?? ""
            } catch {
                delivery.attachmentError = delivery.attachmentError ?? String(describing: error)
                switch (error as? ExportError)?.kind ?? .failed {
                case .failed: continue
                case .unavailable: return
                case .rejectedByCollector(let message):
                    delivery.rejected.append(
                        reject(path, reason: "refused by the attachment receiver: \(message)", moveRejected: true))
                }
            }
        }
    }

    /// The crash file of attachment's record is still in crashes/: its record has not been
    /// acknowledged yet, and the attachment waits for it.
    func recordIsPending(_ attachment: Attachment) -> Bool {
        guard let crashID = attachment.attribute("app.crash.id").flatMap(UUID.init(uuidString:)) else { return false }
        var st = stat()
        let base = directory.crashes + "/" + crashID.fileStem + ".crash"
        return lstat(base, &st) == 0 || lstat(base + ".tmp", &st) == 0
    }

    /// The pending attachments within the retention, oldest first, as (path, id). Without
    /// opening anything, the others are dealt with: non-regular entries, unexpected names and
    /// leftovers of unfinished writes are moved to rejected/ with the reason; files over
    /// ``Limits/maxAttachmentFileBytes``, older than ``Limits/maxAttachmentAgeSeconds``, or,
    /// the newest kept first, beyond ``Limits/maxPendingAttachments`` files or
    /// ``Limits/maxAttachmentBytes`` bytes are deleted with the reason.
    func retainedAttachments(_ pass: inout Pass) -> [(String, String)] {
        let dir = directory.attachments
        var candidates: [(entry: StoreFiles.Entry, size: Int, id: String)] = []
        var misplaced: [(StoreFiles.Entry, String)] = []
        for entry in StoreFiles.entries(dir) {
            let id = String(entry.name.dropLast(PendingAttachment.suffix.count))
            var st = stat()
            if !entry.isRegular {
                misplaced.append((entry, ReportFileError.notARegularFile(kind: entry.typeDescription).description))
            } else if entry.name.hasSuffix(PendingAttachment.suffix + ".tmp") {
                misplaced.append((entry, "torn attachment: an unfinished write (its writer died)"))
            } else if entry.name.hasSuffix(PendingAttachment.suffix), Attachment.isValidID(id),
                lstat(dir + "/" + entry.name, &st) == 0
            {
                candidates.append((entry, Int(st.st_size), id))
            } else {
                misplaced.append((entry, "unexpected file in attachments/"))
            }
        }
        let reasons = Dictionary(misplaced.map { ($0.0.name, $0.1) }, uniquingKeysWith: { a, _ in a })
        rejectMany(&pass, in: dir, misplaced.map(\.0)) { reasons[$0.name] ?? "" }
        var kept: [(entry: StoreFiles.Entry, id: String)] = []
        var dropped: [(StoreFiles.Entry, String)] = []
        var bytes = 0
        let newestFirst = candidates.sorted { ($0.entry.modified, $0.entry.name) > ($1.entry.modified, $1.entry.name) }
        for c in newestFirst {
            let age = pass.now - c.entry.modified
            if c.size > limits.maxAttachmentFileBytes {
                dropped.append((c.entry, "too large: \(c.size) bytes, over \(limits.maxAttachmentFileBytes)"))
            } else if age > limits.maxAttachmentAgeSeconds {
                dropped.append(
                    (
                        c.entry,
                        "older than \(Self.describeAge(limits.maxAttachmentAgeSeconds)) (\(Self.describeAge(age)))"
                    ))
            } else if kept.count >= limits.maxPendingAttachments {
                dropped.append(
                    (c.entry, "retention: more than \(limits.maxPendingAttachments) pending attachments, the oldest"))
            } else if bytes + c.size > limits.maxAttachmentBytes {
                dropped.append((c.entry, "retention: pending attachments over \(limits.maxAttachmentBytes) bytes"))
            } else {
                kept.append((c.entry, c.id))
                bytes += c.size
            }
        }
        for (entry, reason) in dropped.reversed() where pass.removalBudget > 0 {
            let path = dir + "/" + entry.name
            pass.removalBudget -= 1
            let outcome = unlink(path) == 0 ? "deleted" : "could not delete: \(String(cString: strerror(errno)))"
            pass.rejected.append(RejectedFile(path: path, reason: "\(reason) (\(outcome))", movedTo: nil))
        }
        return kept.reversed().map { (dir + "/" + $0.entry.name, $0.id) }
    }
}
