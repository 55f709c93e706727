import AftermathNextLaunch
extension CrashReport {
    /// The crashing thread's frames, symbolicated from the ELF files on this machine where they
    /// are still there with the same build id; nil entries could not be resolved. An image
    /// without a recorded build id is not opened: a path read from a crash file is used only
    /// when the file there proves to be that image.
    package func symbolicatedFrames(using symbolicator: Symbolicator = Symbolicator()) -> [SymbolicatedFrame?] {
        frames.enumerated().map { index, address in
            guard let image = image(containing: address), !image.isVDSO, !image.isAnonymous,
                !image.isPathTruncated, let buildID = Hex.decode(image.buildID), !buildID.isEmpty
            else { return nil }
            return symbolicator.symbolicate(
                address: address, imagePath: image.path, loadAddress: image.start,
                isReturnAddress: index > 0, expectedBuildID: buildID)
        }
    }
}
