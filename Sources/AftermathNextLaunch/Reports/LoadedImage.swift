import CSignalShim

/// A binary image (executable or shared library) loaded in the process that wrote a report.
package struct LoadedImage: Sendable, Hashable {
    /// Lowest mapped address: the load address.
    package var start: UInt64
    /// End of the highest mapping (exclusive).
    package var end: UInt64
    /// Runtime address minus file virtual address.
    package var loadBias: UInt64
    /// The path it was mapped from, without a trailing " (deleted)".
    package var path: String
    /// The GNU build id read from the image in memory, lowercase hex; empty when it has none.
    /// For an image linked without one, its text hash (see `isBuildIDTextHash`).
    package var buildID: String
    /// `buildID` is the text hash of the image's first executable segment, not a GNU build id.
    package var isBuildIDTextHash: Bool
    /// "x86_64", "arm64" or "unknown".
    package var architecture: Architecture
    /// The process's main executable.
    package var isMainExecutable: Bool
    /// The file was replaced or removed while the process ran.
    package var isDeleted: Bool
    /// The path was longer than the format keeps: only its end is here.
    package var isPathTruncated: Bool
    /// The kernel's vDSO.
    package var isVDSO: Bool
    /// A memfd or other mapping that is not a file.
    package var isAnonymous: Bool

    /// The image's name, as records carry it: its last path component.
    package var name: String { InAppClassifier.imageName(path) }

    /// Whether address lies in this image.
    package func contains(_ address: UInt64) -> Bool { address >= start && address < end }
}

extension LoadedImage {
    package init(_ i: aft_image) {
        var i = i
        start = i.start
        end = i.end
        loadBias = i.load_bias
        path = CString.read(&i.path)
        buildID = Hex.encode(&i.build_id, count: Int(min(i.build_id_size, AFT_BUILD_ID_CAPACITY)))
        architecture = Architecture(code: i.arch)
        isMainExecutable = i.flags & UInt32(AFT_IMAGE_MAIN_EXECUTABLE) != 0
        isDeleted = i.flags & UInt32(AFT_IMAGE_DELETED) != 0
        isPathTruncated = i.flags & UInt32(AFT_IMAGE_PATH_TRUNCATED) != 0
        isVDSO = i.flags & UInt32(AFT_IMAGE_VDSO) != 0
        isAnonymous = i.flags & UInt32(AFT_IMAGE_ANONYMOUS) != 0
        isBuildIDTextHash = i.flags & UInt32(AFT_IMAGE_BUILD_ID_TEXT_HASH) != 0
    }
}
