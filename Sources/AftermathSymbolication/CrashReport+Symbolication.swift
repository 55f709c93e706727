import AftermathNextLaunch
extension CrashReport {
    /// The crashing thread's frames, symbolicated from the ELF files on this machine where they
    /// are still there with the same build id; nil entries could not be resolved.
    package func symbolicatedFrames(using symbolicator: Symbolicator = Symbolicator()) -> [SymbolicatedFrame?] {
        frames.enumerated().map { index, address in
            guard let image = image(containing: address), !image.isVDSO, !image.isAnonymous,
                  !image.isPathTruncated else { return nil }
            return symbolicator.symbolicate(address: address, imagePath: image.path, loadAddress: image.start,
                                            isReturnAddress: index > 0,
                                            expectedBuildID: image.buildID.isEmpty ? nil : Hex.decode(image.buildID))
        }
    }
}
