#!/usr/bin/env python3
"""Where a live process's private memory is: the pages it alone holds (anonymous, or copied on
write from a file), by mapping, and those of one binary's writable segments by the symbols they
hold. The idle-memory figure of scripts/peer-bench.sh (Private_Dirty of smaps_rollup) in pages
that can be named.

    python3 scripts/resident-pages.py PID [BINARY]

BINARY defaults to the process's executable. Reads /proc/PID/maps and /proc/PID/pagemap, and
/proc/kpageflags to leave out the kernel's shared zero page (a page only read since it was
mapped is that page, and costs nothing): both need root; without it the page frames read as 0,
zero pages are counted and the script says so. Symbols from `nm`.
"""
import bisect
import os
import struct
import subprocess
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")
PRESENT, FILE_OR_SHARED, ZERO_PAGE_FLAG = 1 << 63, 1 << 61, 1 << 24
PFN_MASK = (1 << 55) - 1


def mappings(pid):
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            out.append((start, end, parts[1], int(parts[2], 16), parts[5].strip() if len(parts) > 5 else ""))
    return out


def private_pages(pagemap, kpageflags, start, end):
    """Addresses of the present, private pages in [start, end), the zero page left out."""
    pagemap.seek(start // PAGE * 8)
    data = pagemap.read((end - start) // PAGE * 8)
    pages = []
    for i in range(len(data) // 8):
        entry = struct.unpack_from("<Q", data, i * 8)[0]
        if not entry & PRESENT or entry & FILE_OR_SHARED:
            continue
        pfn = entry & PFN_MASK
        if kpageflags is not None and pfn:
            kpageflags.seek(pfn * 8)
            if struct.unpack("<Q", kpageflags.read(8))[0] & ZERO_PAGE_FLAG:
                continue
        pages.append(start + i * PAGE)
    return pages


def symbols(binary):
    """(offset, size, name) of the binary's data and bss symbols, by offset."""
    listing = subprocess.run(["nm", "-S", "-n", binary], capture_output=True, text=True).stdout
    out = []
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "bBdDrRvV":
            out.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    pid = int(sys.argv[1])
    binary = os.path.realpath(sys.argv[2] if len(sys.argv) == 3 else f"/proc/{pid}/exe")
    maps = mappings(pid)
    try:
        kpageflags = open("/proc/kpageflags", "rb")
    except OSError:
        kpageflags = None
        print("note: /proc/kpageflags unreadable (not root): zero pages are counted", file=sys.stderr)
    own = [m for m in maps if m[4] == binary]
    if not own:
        sys.exit(f"{binary} is not mapped in process {pid}")
    base = min(start - offset for start, _, _, offset, _ in own)
    # The binary's bss past its file's end is an anonymous mapping right after its last one.
    top = max(end for _, end, _, _, _ in own)
    syms = symbols(binary)
    starts = [s[0] for s in syms]
    by_mapping, binary_pages = [], []
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for start, end, perms, _, name in maps:
            in_binary = name == binary or (not name and start == top)
            if "w" not in perms and not in_binary:
                continue
            pages = private_pages(pagemap, kpageflags, start, end)
            if in_binary:
                binary_pages += pages
            if pages:
                label = name or ("[bss of the binary]" if in_binary else f"[anonymous {(end - start) // 1024} KiB]")
                by_mapping.append((len(pages), f"{label} {perms} at {start:#x}"))
    total = sum(n for n, _ in by_mapping)
    print(f"{total} private pages ({total * PAGE // 1024} KiB) in process {pid}")
    for n, label in sorted(by_mapping, reverse=True):
        print(f"{n:6d}  {label}")
    print(f"\n{len(binary_pages)} pages of {binary}, by the symbols they hold:")
    for page in sorted(binary_pages):
        offset = page - base
        first = max(bisect.bisect_right(starts, offset) - 1, 0)
        names = [n for s, size, n in syms[first:] if s < offset + PAGE and s + max(size, 1) > offset][:4]
        print(f"  {offset:#9x}  {', '.join(names) or '(no symbol)'}")


if __name__ == "__main__":
    main()
