import AftermathNextLaunch
import Synchronization

/// Symbolicates runtime addresses using the symbol tables of the ELF files on disk.
///
/// Each file is parsed once and cached (failures too); safe to use from any thread.
package final class Symbolicator: Sendable {
    private enum CacheEntry: Sendable {
        case loaded(ELFSymbolTable)
        case failed(ELFError)
    }

    /// Path (after stripping " (deleted)") to its parsed table or load failure.
    private let cache = Mutex<[String: CacheEntry]>([:])

    package init() {}

    /// Symbolicates `address`, which lies in the image at `imagePath` whose lowest mapping starts at
    /// `loadAddress`.
    ///
    /// - Parameters:
    ///   - isReturnAddress: `true` for caller frames; the lookup then uses `address - 1` so that it
    ///     lands on the call instruction, not on whatever follows it. The reported offset is still
    ///     relative to `address`.
    ///   - expectedBuildID: if given and the file on disk has a different build ID, returns `nil`
    ///     (the file was replaced since the process loaded it, so names would be wrong).
    /// - Returns: `nil` if the file cannot be read, has no symbol covering the address, or mismatches.
    package func symbolicate(
        address: UInt64,
        imagePath: String,
        loadAddress: UInt64,
        isReturnAddress: Bool,
        expectedBuildID: [UInt8]? = nil
    ) -> SymbolicatedFrame? {
        guard let table = table(for: Self.normalizedPath(imagePath), expectedBuildID: expectedBuildID) else {
            return nil
        }

        guard address >= loadAddress else { return nil }
        let (fileAddress, overflow) = (address - loadAddress).addingReportingOverflow(table.firstLoadVirtualAddress)
        guard !overflow else { return nil }
        let adjust: UInt64 = isReturnAddress && fileAddress > 0 ? 1 : 0
        guard let hit = table.lookup(virtualAddress: fileAddress - adjust) else { return nil }
        return SymbolicatedFrame(
            function: hit.name, offset: hit.offset + adjust,
            demangled: SwiftDemangle.demangle(hit.name))
    }

    /// The cached table for `path`, loading it on first use. `nil` if it failed to load.
    /// With expectedBuildID, a file with another build id is not loaded (its symbols unread).
    package func table(for path: String, expectedBuildID: [UInt8]? = nil) -> ELFSymbolTable? {
        let key = expectedBuildID.map { path + "\u{0}" + Hex.encode($0) } ?? path
        if let cached = cache.withLock({ $0[key] }) {
            return Self.unwrap(cached)
        }
        // Parse outside the lock so slow files do not block other lookups; a racing loader's
        // result simply wins or loses.
        let entry: CacheEntry
        do {
            entry = .loaded(try ELFSymbolTable(path: path, expectedBuildID: expectedBuildID))
        } catch {
            entry = .failed(error)
        }
        let stored = cache.withLock { cache -> CacheEntry in
            if let existing = cache[key] { return existing }
            cache[key] = entry
            return entry
        }
        return Self.unwrap(stored)
    }

    private static func unwrap(_ entry: CacheEntry) -> ELFSymbolTable? {
        if case .loaded(let table) = entry { return table }
        return nil
    }

    /// Strips the " (deleted)" suffix the kernel appends in /proc/<pid>/maps to unlinked files.
    package static func normalizedPath(_ path: String) -> String {
        let suffix = " (deleted)"
        return path.hasSuffix(suffix) ? String(path.dropLast(suffix.count)) : path
    }
}
