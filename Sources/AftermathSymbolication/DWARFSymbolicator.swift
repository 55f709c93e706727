import CSymbolication
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Symbolicates addresses with DWARF (elfutils' libdwfl): function, file:line:column and
/// inlined functions, from debug files found and checked by a ``DebugFileLocator``. Falls back
/// to the symbol table when an image has no DWARF. Each image is located and opened once.
package final class DWARFSymbolicator: Sendable {
    package let locator: DebugFileLocator

    private struct Entry {
        var files: DebugFiles
        var handle: OpaquePointer?
        var openError: String?
        /// Names by binary search (libdwfl's own symbol search is linear): the debug file's
        /// full table, else the binary's.
        var symbols: ELFSymbolTable?
    }

    /// Images by build id, path and load address. libdwfl objects are not thread-safe: every
    /// use holds the lock.
    private let entries = Mutex<[ImageReference: Entry]>([:])

    package init(locator: DebugFileLocator) {
        self.locator = locator
    }

    deinit {
        entries.withLock { entries in
            for entry in entries.values where entry.handle != nil { aftsym_image_close(entry.handle) }
        }
    }

    /// What was found for `image` (locating it on first use).
    package func debugFiles(for image: ImageReference) -> DebugFiles {
        entries.withLock { entry(image, in: &$0).files }
    }

    /// Why the image's file could not be opened, if it could not.
    package func openError(for image: ImageReference) -> String? {
        entries.withLock { entry(image, in: &$0).openError }
    }

    /// The frame for the runtime `address` in `image`, or nil when neither DWARF nor a symbol
    /// covers it (or the files found do not match the report's build id).
    ///
    /// - Parameter isReturnAddress: `true` for caller frames: the lookup uses `address - 1`, the
    ///   call instruction, not what follows it. The reported offset is still from `address`.
    package func symbolicate(address: UInt64, image: ImageReference, isReturnAddress: Bool) -> SymbolicatedFrame? {
        entries.withLock { entries -> SymbolicatedFrame? in
            let opened = entry(image, in: &entries)
            guard let handle = opened.handle else { return nil }
            let adjust: UInt64 = isReturnAddress && address > 0 ? 1 : 0
            let capacity = 64
            var frames = [aftsym_frame](repeating: aftsym_frame(), count: capacity)
            var symbolOffset: UInt64 = 0
            let count = Int(
                aftsym_image_lookup(
                    handle, address - adjust, &frames, Int32(capacity), nil,
                    &symbolOffset))
            defer { aftsym_frames_free(&frames, Int32(count)) }
            var symbolName: String?
            if let table = opened.symbols, address - adjust >= image.loadAddress {
                let (fileAddress, overflow) = (address - adjust - image.loadAddress)
                    .addingReportingOverflow(table.firstLoadVirtualAddress)
                if !overflow, let hit = table.lookup(virtualAddress: fileAddress) {
                    symbolName = hit.name
                    symbolOffset = hit.offset
                }
            }
            let found = frames.prefix(count).map { frame in
                (
                    name: frame.name.map { String(cString: $0) }, location: Self.location(frame),
                    inlined: frame.inlined != 0
                )
            }
            let outer = found.last.flatMap { $0.inlined ? nil : $0 }
            guard let function = symbolName ?? outer?.name else { return nil }
            let inlined = found.prefix(outer == nil ? count : count - 1).map {
                InlinedFunction(
                    name: $0.name ?? "??", demangled: Demangler.demangle($0.name ?? "??"),
                    location: $0.location)
            }
            return SymbolicatedFrame(
                function: function, offset: symbolName == nil ? 0 : symbolOffset + adjust,
                demangled: Demangler.demangle(function),
                location: outer?.location, inlined: inlined)
        }
    }

    private static func location(_ frame: aftsym_frame) -> SourceLocation? {
        guard let file = frame.file, frame.line > 0 else { return nil }
        let path = String(cString: file)
        guard !path.hasSuffix("<compiler-generated>") else { return nil }
        return SourceLocation(file: path, line: Int(frame.line), column: Int(frame.column))
    }

    private func entry(_ image: ImageReference, in entries: inout [ImageReference: Entry]) -> Entry {
        if let cached = entries[image] { return cached }
        let files = locator.locate(image)
        var entry = Entry(files: files)
        if let elf = files.elfFile {
            var error = [CChar](repeating: 0, count: 512)
            entry.handle = aftsym_image_open(elf, files.separateDebugFile, image.loadAddress, &error, error.count)
            if entry.handle == nil { entry.openError = String(cBuffer: error) }
            let debugTable = files.separateDebugFile.flatMap { try? ELFSymbolTable(path: $0) }
            entry.symbols = debugTable.flatMap { $0.symbolCount > 0 ? $0 : nil } ?? (try? ELFSymbolTable(path: elf))
        }
        entries[image] = entry
        return entry
    }
}
