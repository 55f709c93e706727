extension CrashReport {
    /// The crashing thread's frames, symbolicated from the ELF files on this machine where they
    /// are still there with the same build id; nil entries could not be resolved.
    public func symbolicatedFrames(using symbolicator: Symbolicator = Symbolicator()) -> [SymbolicatedFrame?] {
        frames.enumerated().map { index, address in
            guard let image = image(containing: address), !image.isVDSO, !image.isAnonymous,
                  !image.isPathTruncated else { return nil }
            return symbolicator.symbolicate(address: address, imagePath: image.path, loadAddress: image.start,
                                            isReturnAddress: index > 0,
                                            expectedBuildID: image.buildID.isEmpty ? nil : Hex.decode(image.buildID))
        }
    }
}

extension Hex {
    /// Bytes of a hex string; nil when it is not hex.
    static func decode(_ s: String) -> [UInt8]? {
        let chars = Array(s.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 97...102: return c - 87
            case 65...70: return c - 55
            default: return nil
            }
        }
        var i = 0
        while i < chars.count {
            guard let hi = value(chars[i]), let lo = value(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
