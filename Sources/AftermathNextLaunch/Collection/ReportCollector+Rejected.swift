import Foundation

extension ReportCollector {
    /// The files already in rejected/, each with the reason recorded beside it (a collector's
    /// refusal, a torn file), oldest name first. Reads only: regular files, bounded, no link
    /// followed; control characters in a reason are shown as spaces.
    package func rejectedFiles() -> [RejectedFile] {
        listing(directory.rejected).filter { !$0.hasSuffix(".reason") }.map { name in
            let path = ReportDirectory.join(directory.rejected, name)
            let reason: String
            do {
                let bytes = try FileReader.read(path + ".reason", maximumSize: 16 * 1024)
                reason = String(decoding: bytes, as: UTF8.self).unicodeScalars
                    .map { $0.value < 0x20 || $0.value == 0x7F ? " " : String($0) }.joined()
                    .trimmingCharacters(in: .whitespaces)
            } catch {
                reason = "no reason recorded (\(error))"
            }
            return RejectedFile(path: path, reason: reason, movedTo: path)
        }
    }
}
