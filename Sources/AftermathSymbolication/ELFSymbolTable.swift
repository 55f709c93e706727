import AftermathNextLaunch
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The function symbols and build ID of one ELF64 little-endian file (x86-64 or aarch64), read from disk.
///
/// Symbols come from `.symtab`, or from `.dynsym` when the file is stripped. Every offset and size is
/// checked against the file length, so truncated or hostile files throw an ``ELFError`` (or yield no
/// symbols) instead of crashing. Immutable after `init`, hence `Sendable`.
package final class ELFSymbolTable: Sendable {
    /// The `NT_GNU_BUILD_ID` note contents, if the file has one.
    package let buildID: [UInt8]?
    /// `p_vaddr` of the first `PT_LOAD`, rounded down to its `p_align`.
    /// A runtime address maps to the file's virtual address as
    /// `address - loadAddress + firstLoadVirtualAddress` (load address = start of the lowest mapping).
    package let firstLoadVirtualAddress: UInt64
    /// `true` if symbols came from `.symtab`, `false` if from `.dynsym` (or there were none).
    package let usesFullSymbolTable: Bool

    /// Sorted by `start`, unique starts, non-empty `[start, end)` ranges.
    private let entries: [ELFSymbolEntry]
    /// The string table the entries' `nameOffset`s point into.
    private let strings: [UInt8]

    /// Number of function symbols loaded.
    package var symbolCount: Int { entries.count }

    /// Loads the ELF file at `path`. Throws ``ELFError`` if it is missing, unreadable or malformed.
    /// A well-formed file without any symbol table loads with zero symbols (its build ID is still useful).
    /// With expectedBuildID, a file whose GNU build id differs (or is absent) throws
    /// ``ELFError/buildIDMismatch`` before its symbols are read: a file that is not the image
    /// the crash named costs a few small reads, whatever its size.
    package init(path: String, expectedBuildID: [UInt8]? = nil) throws(ELFError) {
        let file = try ELFFile(path: path)
        defer { file.close() }
        let parsed = try ELFParser(file: file, expectedBuildID: expectedBuildID).parse()
        buildID = parsed.buildID
        firstLoadVirtualAddress = parsed.firstLoadVirtualAddress
        usesFullSymbolTable = parsed.usesFullSymbolTable
        entries = parsed.entries
        strings = parsed.strings
    }

    /// The function containing the file virtual address `virtualAddress`, and the distance from its start.
    ///
    /// The address must lie in `[value, value + size)` of a symbol, or, for a size-0 symbol, before the
    /// next symbol (and within its section). Binary search, O(log n).
    package func lookup(virtualAddress: UInt64) -> (name: String, offset: UInt64)? {
        // Index of the first entry whose start is > address.
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].start <= virtualAddress { low = mid + 1 } else { high = mid }
        }
        // Check the nearest symbol, then a few earlier ones in case symbols nest
        // (alternate entry points inside a larger sized function).
        var index = low - 1
        var remaining = 4
        while index >= 0 && remaining > 0 {
            let entry = entries[index]
            if virtualAddress < entry.end {
                return (name(at: entry.nameOffset), virtualAddress - entry.start)
            }
            index -= 1
            remaining -= 1
        }
        return nil
    }

    private func name(at offset: UInt32) -> String {
        let start = Int(offset)
        guard start < strings.count else { return "" }
        let end = strings[start...].firstIndex(of: 0) ?? strings.count
        return String(decoding: strings[start..<end], as: UTF8.self)
    }
}

// MARK: - Parsing

private struct ELFParser {
    // ELF constants.
    package static let etExec: UInt16 = 2, etDyn: UInt16 = 3
    package static let emX86_64: UInt16 = 62, emAArch64: UInt16 = 183
    package static let ptLoad: UInt32 = 1, ptNote: UInt32 = 4
    package static let shtSymtab: UInt32 = 2, shtStrtab: UInt32 = 3, shtNote: UInt32 = 7, shtNobits: UInt32 = 8
    package static let shtDynsym: UInt32 = 11
    package static let shfExecInstr: UInt64 = 0x4
    package static let sttNotype: UInt8 = 0, sttFunc: UInt8 = 2, sttGnuIfunc: UInt8 = 10
    package static let shnUndef: UInt16 = 0, shnLoreserve: UInt16 = 0xff00, shnXindex: UInt16 = 0xffff
    package static let ntGnuBuildID: UInt32 = 3
    package static let ehdrSize = 64, phdrSize = 56, shdrSize = 64, symSize = 24
    /// Sanity caps: no real file comes near these, and they bound the work a hostile header can request.
    package static let maxSections = 1 << 20, maxSegments = 1 << 16

    package struct Result {
        package var buildID: [UInt8]?
        package var firstLoadVirtualAddress: UInt64
        package var usesFullSymbolTable: Bool
        package var entries: [ELFSymbolEntry]
        package var strings: [UInt8]
    }

    package struct Segment {
        var type: UInt32
        var offset, vaddr, filesz, align: UInt64
    }
    package struct Section {
        var type: UInt32
        var flags, addr, offset, size, entsize: UInt64
        var link: UInt32
    }

    package let file: ELFFile
    /// When set, the file's build id must equal it before anything else is read.
    package var expectedBuildID: [UInt8]? = nil

    package func parse() throws(ELFError) -> Result {
        guard file.size >= 4 else { throw .notELF }
        let ident = try file.read("ELF identification", offset: 0, size: 4)
        guard ident == [0x7f, 0x45, 0x4c, 0x46] else { throw .notELF }
        let header = try file.read("ELF header", offset: 0, size: UInt64(Self.ehdrSize))
        guard header[4] == 2 else { throw .unsupported("not ELF64 (EI_CLASS \(header[4]))") }
        guard header[5] == 1 else { throw .unsupported("not little-endian (EI_DATA \(header[5]))") }
        let type: UInt16 = header.elfLE(16)
        guard type == Self.etExec || type == Self.etDyn else { throw .unsupported("e_type \(type)") }
        let machine: UInt16 = header.elfLE(18)
        guard machine == Self.emX86_64 || machine == Self.emAArch64 else {
            throw .unsupported("e_machine \(machine)")
        }

        let segments = try readSegments(header)
        let sections = try readSections(header)

        // First PT_LOAD, rounded down to its alignment.
        guard let firstLoad = segments.first(where: { $0.type == Self.ptLoad }) else {
            throw .malformed("no PT_LOAD segment")
        }
        var loadBase = firstLoad.vaddr
        if firstLoad.align > 1 && firstLoad.align.nonzeroBitCount == 1 {
            loadBase &= ~(firstLoad.align - 1)
        }

        let buildID = try findBuildID(segments: segments, sections: sections)
        if let expectedBuildID, buildID != expectedBuildID { throw .buildIDMismatch }

        // Symbols: .symtab, else .dynsym.
        var entries: [ELFSymbolEntry] = []
        var strings: [UInt8] = []
        var full = false
        if let index = sections.firstIndex(where: { $0.type == Self.shtSymtab }) {
            (entries, strings) = try readSymbols(sections: sections, index: index, name: ".symtab")
            full = true
        }
        if entries.isEmpty, let index = sections.firstIndex(where: { $0.type == Self.shtDynsym }) {
            (entries, strings) = try readSymbols(sections: sections, index: index, name: ".dynsym")
            full = false
        }
        return Result(
            buildID: buildID, firstLoadVirtualAddress: loadBase, usesFullSymbolTable: full,
            entries: entries, strings: entries.isEmpty ? [] : strings)
    }

    private func readSegments(_ header: [UInt8]) throws(ELFError) -> [Segment] {
        let phoff: UInt64 = header.elfLE(32)
        let phentsize: UInt16 = header.elfLE(54)
        let phnum = Int(header.elfLE(56, as: UInt16.self))
        guard phnum > 0 else { return [] }
        guard Int(phentsize) >= Self.phdrSize else { throw .malformed("e_phentsize \(phentsize)") }
        guard phnum <= Self.maxSegments else { throw .malformed("e_phnum \(phnum)") }
        let table = try file.read(
            "program header table", offset: phoff,
            size: UInt64(phnum) * UInt64(phentsize))
        return (0..<phnum).map { i in
            let o = i * Int(phentsize)
            return Segment(
                type: table.elfLE(o), offset: table.elfLE(o + 8), vaddr: table.elfLE(o + 16),
                filesz: table.elfLE(o + 32), align: table.elfLE(o + 48))
        }
    }

    private func readSections(_ header: [UInt8]) throws(ELFError) -> [Section] {
        let shoff: UInt64 = header.elfLE(40)
        let shentsize: UInt16 = header.elfLE(58)
        var shnum = UInt64(header.elfLE(60, as: UInt16.self))
        guard shoff != 0 else { return [] }
        guard Int(shentsize) >= Self.shdrSize else { throw .malformed("e_shentsize \(shentsize)") }
        if shnum == 0 {
            // Extended numbering: the real count is in the sh_size of the first section header (index 0).
            let first = try file.read("section header 0", offset: shoff, size: UInt64(shentsize))
            shnum = first.elfLE(32)
        }
        guard shnum <= UInt64(Self.maxSections) else { throw .malformed("section count \(shnum)") }
        let table = try file.read("section header table", offset: shoff, size: shnum * UInt64(shentsize))
        return (0..<Int(shnum)).map { i in
            let o = i * Int(shentsize)
            return Section(
                type: table.elfLE(o + 4), flags: table.elfLE(o + 8), addr: table.elfLE(o + 16),
                offset: table.elfLE(o + 24), size: table.elfLE(o + 32), entsize: table.elfLE(o + 56),
                link: table.elfLE(o + 40))
        }
    }

    /// `NT_GNU_BUILD_ID` from the PT_NOTE segments, else from SHT_NOTE sections.
    private func findBuildID(segments: [Segment], sections: [Section]) throws(ELFError) -> [UInt8]? {
        for segment in segments where segment.type == Self.ptNote {
            if let id = try buildID(offset: segment.offset, size: segment.filesz, align: segment.align) {
                return id
            }
        }
        for section in sections where section.type == Self.shtNote {
            if let id = try buildID(offset: section.offset, size: section.size, align: 4) {
                return id
            }
        }
        return nil
    }

    private func buildID(offset: UInt64, size: UInt64, align: UInt64) throws(ELFError) -> [UInt8]? {
        // Out-of-file notes are skipped, not fatal: separate debug files (`objcopy --only-keep-debug`)
        // keep the original program headers, whose offsets no longer match their contents.
        guard size >= 12, size <= 1 << 20, (try? file.check("note", offset: offset, size: size)) != nil else {
            return nil
        }
        let notes = try file.read("note", offset: offset, size: size)
        // Notes are padded to 4 bytes, or 8 in 8-aligned note segments (e.g. .note.gnu.property).
        let pad = align == 8 ? 8 : 4
        func padded(_ n: Int) -> Int { (n + pad - 1) / pad * pad }
        var cursor = 0
        while cursor + 12 <= notes.count {
            let namesz = Int(notes.elfLE(cursor, as: UInt32.self))
            let descsz = Int(notes.elfLE(cursor + 4, as: UInt32.self))
            let type: UInt32 = notes.elfLE(cursor + 8)
            let nameStart = cursor + 12
            let descStart = nameStart + padded(namesz)
            let descEnd = descStart + descsz
            guard descEnd <= notes.count else { return nil }
            if type == Self.ntGnuBuildID && namesz == 4
                && notes[nameStart..<nameStart + 4].elementsEqual([0x47, 0x4e, 0x55, 0])
            {
                return descsz > 0 ? Array(notes[descStart..<descEnd]) : nil
            }
            cursor = descStart + padded(descsz)
        }
        return nil
    }

    private func readSymbols(
        sections: [Section], index: Int, name: String
    )
        throws(ELFError) -> ([ELFSymbolEntry], [UInt8])
    {
        let table = sections[index]
        guard table.entsize >= UInt64(Self.symSize), table.entsize <= 1024 else {
            throw .malformed("\(name) sh_entsize \(table.entsize)")
        }
        guard Int(table.link) < sections.count, table.link != 0 else {
            throw .malformed("\(name) sh_link \(table.link) is not a section")
        }
        let stringSection = sections[Int(table.link)]
        guard stringSection.type == Self.shtStrtab else {
            throw .malformed("\(name) string table has type \(stringSection.type)")
        }
        let symbolBytes = try file.read(name, offset: table.offset, size: table.size)
        let strings = try file.read("\(name) string table", offset: stringSection.offset, size: stringSection.size)

        struct Candidate {
            var start, size: UInt64
            var nameOffset: UInt32
            var rank: Int
            var section: Int
        }
        var candidates: [Candidate] = []
        let entsize = Int(table.entsize)
        let count = symbolBytes.count / entsize
        candidates.reserveCapacity(count)
        for i in 0..<count {
            let o = i * entsize
            let nameOffset: UInt32 = symbolBytes.elfLE(o)
            let info = symbolBytes[o + 4]
            let shndx: UInt16 = symbolBytes.elfLE(o + 6)
            let value: UInt64 = symbolBytes.elfLE(o + 8)
            let size: UInt64 = symbolBytes.elfLE(o + 16)
            let type = info & 0xf
            let binding = info >> 4
            guard nameOffset != 0, Int(nameOffset) < strings.count, strings[Int(nameOffset)] != 0,
                value != 0, shndx != Self.shnUndef
            else { continue }
            // Section index (when an ordinary one) to bound size-0 symbols and vet NOTYPE ones.
            let section = shndx < Self.shnLoreserve && Int(shndx) < sections.count ? Int(shndx) : -1
            var rank: Int
            switch type {
            case Self.sttFunc, Self.sttGnuIfunc:
                guard shndx != 0xfff1 else { continue }  // SHN_ABS: not code
                rank = 4
            case Self.sttNotype:
                // Hand-written assembly often lacks `.type @function`; accept such symbols only if they
                // have a size and sit in an executable section, which excludes linker markers
                // (`_end`, `__bss_start`, ...) and local labels.
                guard size > 0, section >= 0, sections[section].flags & Self.shfExecInstr != 0 else { continue }
                rank = 0
            default:
                continue
            }
            // Among aliases at one address prefer global, then weak, then local; then sized symbols.
            rank += binding == 1 ? 2 : binding == 2 ? 1 : 0
            rank = rank * 2 + (size > 0 ? 1 : 0)
            candidates.append(Candidate(start: value, size: size, nameOffset: nameOffset, rank: rank, section: section))
        }
        guard !candidates.isEmpty else { return ([], strings) }

        candidates.sort { a, b in
            if a.start != b.start { return a.start < b.start }
            if a.rank != b.rank { return a.rank > b.rank }
            if a.size != b.size { return a.size > b.size }
            return a.nameOffset < b.nameOffset
        }
        // Keep the best-ranked symbol per address.
        var unique: [Candidate] = []
        unique.reserveCapacity(candidates.count)
        for candidate in candidates where unique.last?.start != candidate.start {
            unique.append(candidate)
        }

        var entries: [ELFSymbolEntry] = []
        entries.reserveCapacity(unique.count)
        for (i, symbol) in unique.enumerated() {
            var end: UInt64
            if symbol.size > 0 {
                let (sum, overflow) = symbol.start.addingReportingOverflow(symbol.size)
                end = overflow ? UInt64.max : sum
            } else {
                // Size 0: extends to the next symbol, but not past the end of its section.
                end = i + 1 < unique.count ? unique[i + 1].start : UInt64.max
                if symbol.section >= 0 {
                    let s = sections[symbol.section]
                    let (sectionEnd, overflow) = s.addr.addingReportingOverflow(s.size)
                    if !overflow, symbol.start >= s.addr, symbol.start < sectionEnd {
                        end = min(end, sectionEnd)
                    } else {
                        end = symbol.start == .max ? .max : symbol.start + 1
                    }
                } else if end == UInt64.max {
                    end = symbol.start == .max ? .max : symbol.start + 1
                }
            }
            entries.append(.init(start: symbol.start, end: end, nameOffset: symbol.nameOffset))
        }
        return (entries, strings)
    }
}

/// One function's address range and the offset of its name in the string table.
private struct ELFSymbolEntry: Sendable {
    package var start: UInt64
    package var end: UInt64
    package var nameOffset: UInt32
}
