import Foundation

/// Turns raw frames and images into the record text: exception.stacktrace and
/// apsio.crash.images.
package enum StackFormatter {
    /// One frame per line: index, image name, absolute address, offset in the image.
    /// `3 libc.so.6 0x00007f1c2a4b5c6d + 0x9c6d`; a frame outside every image: `3 ??? 0x…`.
    package static func stacktrace(frames: [UInt64], images: [LoadedImage]) -> String {
        let sorted = images.sorted { $0.start < $1.start }
        return frames.enumerated().map { index, address in
            if let image = find(address, in: sorted) {
                return
                    "\(index) \(image.name) \(Hex.address(address)) + \(Hex.address(address - image.start, width: 0))"
            }
            return "\(index) ??? \(Hex.address(address))"
        }.joined(separator: "\n")
    }

    /// The images the frames refer to, plus the main executable: apsio.crash.images, a JSON
    /// array of {name, build_id, load_address, arch, in_app}, plus build_id_type "text_hash"
    /// when build_id is an image's text hash rather than its GNU build id.
    package static func imagesJSON(frames: [UInt64], images: [LoadedImage], appRoot: String) -> String {
        let sorted = images.sorted { $0.start < $1.start }
        var used = Set<UInt64>()
        for frame in frames { if let image = find(frame, in: sorted) { used.insert(image.start) } }
        let classifier = InAppClassifier(appRoot: appRoot)
        let entries = sorted.filter { used.contains($0.start) || $0.isMainExecutable }.map { image in
            ImageEntry(
                name: image.name, build_id: image.buildID,
                build_id_type: image.isBuildIDTextHash ? "text_hash" : nil, load_address: Hex.address(image.start),
                arch: image.architecture.rawValue,
                in_app: image.isAnonymous
                    ? false
                    : classifier.isInApp(path: image.path, isMainExecutable: image.isMainExecutable))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings and a boolean only: encoding cannot fail.
        return (try? encoder.encode(entries)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
    }

    /// One entry of apsio.crash.images.
    private struct ImageEntry: Encodable {
        var name: String
        var build_id: String
        var build_id_type: String?  // encodeIfPresent: absent for GNU build ids
        var load_address: String
        var arch: String
        var in_app: Bool
    }

    /// Binary search in images sorted by start.
    package static func find(_ address: UInt64, in sorted: [LoadedImage]) -> LoadedImage? {
        var low = 0, high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid].start <= address { low = mid + 1 } else { high = mid }
        }
        guard low > 0, sorted[low - 1].contains(address) else { return nil }
        return sorted[low - 1]
    }
}
