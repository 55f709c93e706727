"""Checks one report as `aftermath show ID --json` decoded it (scripts/arm64.sh --quick).

usage: check_report.py MODE SHOW_JSON EXPECTED_TYPE "CHAIN OF FUNCTIONS" [FILE DUMP_JSON DRIVER]
Prints one line: "ok|<detail>" or "fail|<reasons>".

With FILE (the report file), DUMP_JSON (`aftermath dump` of its directory) and DRIVER (the
crash driver's executable), a crash's every-thread capture is checked too: the file's
THREADS_INFO, THREADS and THREAD_FRAMES sections are read here, by the layouts of
CSignalShim/include/aftermath_format.h, and compared with apsio.threads, the Swift decoder's
list of the same threads.
"""
import json
import struct
import subprocess
import sys

mode, path, expected_type, chain = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
crash_file, dump_path, driver = (sys.argv[5:8] + [None] * 3)[:3]

# ---- the file's sections (aftermath_format.h) -------------------------------------------
SECTION_IMAGES, SECTION_THREADS_INFO, SECTION_THREADS, SECTION_THREAD_FRAMES = 4, 6, 7, 8
SECTION_IMAGE_LIST, SECTION_IMAGE_PATHS = 14, 15  # aftermath_format_images.h (format 3)
THREAD_CRASHED, THREAD_MAIN = 0x1, 0x2
CONTEXTS = {0: "none", 1: "signal", 2: "syscall", 3: "crash", 4: "parked"}
UNWIND_STATUSES = {0: "not_recorded", 1: "complete", 2: "timed_out", 3: "helper_failed", 4: "skipped"}
WHYS = {0: "-", 1: "blocks_signal", 2: "stopped", 3: "uninterruptible", 4: "no_answer",
        5: "signal_failed", 6: "no_signal", 7: "exiting"}
THREADS_INFO = struct.Struct("<8I3Q2I32x")  # aft_threads_info, 96 bytes
THREAD = struct.Struct("<Q16s4I2Q40Q2I528sq2Q3Iic7x32x")  # aft_thread, 992 bytes
IMAGE = struct.Struct("<3Q2I32s2I256s")  # aft_image, 328 bytes
assert THREADS_INFO.size == 96 and THREAD.size == 992 and IMAGE.size == 328


def sections(data):
    """(type, entry_size, count, flags, bytes) of every section after the 64-byte header."""
    magic, version, header_size = struct.unpack_from("<IHH", data)
    if magic != 0x4D544641:
        raise ValueError("not an Aftermath file")
    at, out = header_size, []
    while at + 16 <= len(data):
        kind, entry_size, count, flags = struct.unpack_from("<4I", data, at)
        end = at + 16 + entry_size * count
        out.append((kind, entry_size, count, flags, data[at + 16:end]))
        at = end
    return version, out


def thread_records(data):
    fields = ("tid name flags context why register_count pc sp registers fp_size unwinder fp "
              "syscall stack_start stack_size frame_count frames_truncated unwind_status "
              "crash_signal state").split()
    out = []
    for i in range(len(data) // THREAD.size):
        v = THREAD.unpack_from(data, i * THREAD.size)
        t = dict(zip(fields[:8], v[:8]))
        t["registers"] = list(v[8:48])
        t.update(zip(fields[9:], v[48:]))
        t["name"] = t["name"].split(b"\0")[0].decode(errors="replace")
        t["state"] = t["state"].decode(errors="replace")
        out.append(t)
    return out


def symbols_of(executable):
    """(start, end, name) of the executable's functions, from its symbol table."""
    out = subprocess.run(["aarch64-linux-gnu-nm", "-S", "--defined-only", executable],
                         capture_output=True, text=True).stdout
    table = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            table.append((int(parts[0], 16), int(parts[0], 16) + int(parts[1], 16), parts[3]))
    return table


def fp_state(t):
    """fpsr, fpcr and v0-v31 (16 bytes each) of an arm64 record, or None."""
    if t["fp_size"] != 8 + 32 * 16:
        return None
    fpsr, fpcr = struct.unpack_from("<2I", t["fp"])
    return fpsr, fpcr, [t["fp"][8 + 16 * i:24 + 16 * i] for i in range(32)]


def check_fp_control(why, who, fp):
    """fpsr and fpcr hold only bits the architecture defines (FPSR: NZCV, QC, the cumulative
    exception bits; FPCR: AHP DN FZ RMode Stride FZ16 Len, the trap enables, NEP AH FIZ)."""
    fpsr, fpcr, _ = fp
    if fpsr & ~0xF800009F or fpcr & ~0x07FF9F07:
        why.append("%s: fpsr 0x%x / fpcr 0x%x set reserved bits" % (who, fpsr, fpcr))


def check_threads(why, regs, signal_pc):
    """Checks the threads of a crash file; returns a detail text."""
    data = open(crash_file, "rb").read()
    version, found = sections(data)
    by_type = {}
    for kind, entry_size, count, flags, body in found:
        by_type.setdefault(kind, []).append(body)
    if version < 2 or SECTION_THREADS not in by_type or SECTION_THREADS_INFO not in by_type:
        why.append("format version %d file without THREADS sections" % version)
        return ""
    info = dict(zip("seen recorded omitted exited signalled answered rounds capture_signal "
                    "capture_ns unwind_ns deadline_ns flags stack_bytes".split(),
                    THREADS_INFO.unpack(by_type[SECTION_THREADS_INFO][0])))
    threads = thread_records(by_type[SECTION_THREADS][0])
    frames = list(struct.unpack("<%dQ" % (len(by_type.get(SECTION_THREAD_FRAMES, [b""])[0]) // 8),
                                by_type.get(SECTION_THREAD_FRAMES, [b""])[0]))
    at = 0
    for t in threads:
        t["frames"] = frames[at:at + t["frame_count"]]
        at += t["frame_count"]
    images = [IMAGE.unpack_from(by_type[SECTION_IMAGES][0], i * IMAGE.size)
              for i in range(len(by_type.get(SECTION_IMAGES, [b""])[0]) // IMAGE.size)]
    if SECTION_IMAGE_LIST in by_type:
        # Each entry is an aft_image up to its path (72 bytes, path_size last); the paths follow
        # in IMAGE_PATHS, path_size bytes each.
        listed, paths, at = by_type[SECTION_IMAGE_LIST][0], by_type.get(SECTION_IMAGE_PATHS, [b""])[0], 0
        for i in range(len(listed) // 72):
            fields = IMAGE.unpack_from(listed[i * 72:(i + 1) * 72] + bytes(256))
            size = fields[-2]
            images.append(fields[:-1] + (paths[at:at + size],))
            at += size
    table = symbols_of(driver)

    def function(address):
        for start, end, bias, *_rest, path in images:
            if start <= address < end and path.split(b"\0")[0].decode().endswith("/crash_driver"):
                for s, e, name in table:
                    if s <= address - bias < e:
                        return name
                return "crash_driver+?"
        return "?"

    if info["recorded"] != len(threads):
        why.append("threads info says %d recorded, THREADS has %d" % (info["recorded"], len(threads)))
    crashed = threads[0] if threads else {}
    if not crashed or not crashed["flags"] & THREAD_CRASHED or CONTEXTS[crashed["context"]] != "crash":
        why.append("the first thread is not the crashed one with its crash context: %s" % crashed)
        return ""
    if crashed["register_count"] != 34 or crashed["registers"][:34] != [regs.get(n) for n in REGISTER_ORDER]:
        why.append("the crashed thread's 34 registers differ from the report's")
    if crashed["pc"] != signal_pc:
        why.append("the crashed thread's pc 0x%x is not the signal's 0x%x" % (crashed["pc"], signal_pc))
    fp = fp_state(crashed)
    if fp is None:
        why.append("the crashed thread has no fp state (size %d, expected 520)" % crashed["fp_size"])
    else:
        check_fp_control(why, "the crashed thread", fp)
        if mode in ("null", "threads") and fp[2][31] != b"\x7f" * 16:  # set by driver_null
            why.append("the crashed thread's v31 is %s, expected 16 bytes of 0x7f" % fp[2][31].hex())
    listed = ", ".join("%s %s/%s%s" % (t["name"] or t["tid"], CONTEXTS.get(t["context"], "?"),
                                       t["state"], "" if not t["why"] else " " + WHYS.get(t["why"], "?"))
                       for t in threads)
    detail = "threads %d (seen %d, signalled %d, answered %d, %.0f ms capture%s): %s" % (
        len(threads), info["seen"], info["signalled"], info["answered"], info["capture_ns"] / 1e6,
        ", the 100 ms deadline reached" if info["flags"] & 0x1 else "", listed)

    # The Swift decoder's list of the same threads.
    swift = []
    if dump_path:
        for rl in json.load(open(dump_path))["resourceLogs"]:
            for sl in rl["scopeLogs"]:
                for r in sl["logRecords"]:
                    a = {x["key"]: x["value"] for x in r["attributes"]}
                    if "apsio.threads" in a:
                        swift = json.loads(a["apsio.threads"]["stringValue"])
    if [(s["id"], s["crashed"], s["context"]) for s in swift] != \
            [(t["tid"], bool(t["flags"] & THREAD_CRASHED), CONTEXTS[t["context"]]) for t in threads]:
        why.append("apsio.threads %s does not list the file's threads" %
                   [(s["id"], s["name"], s["context"]) for s in swift])

    if mode != "threads":
        return detail
    if len(threads) < 2:
        why.append("%d threads recorded, expected the crashed one and 'parked'" % len(threads))
        return detail
    if not crashed["flags"] & THREAD_MAIN:
        why.append("the crashed thread is not flagged main")
    parked = [t for t in threads if t["name"] == "parked"]
    if len(parked) != 1:
        why.append("no thread 'parked' among %s" % listed)
        return detail
    p = parked[0]
    if p["flags"] & THREAD_CRASHED:
        why.append("'parked' is flagged crashed")
    if CONTEXTS.get(p["context"]) != "signal":
        why.append("'parked' has context %s (why %s), expected its signal frame" %
                   (CONTEXTS.get(p["context"]), WHYS.get(p["why"])))
        return detail
    if p["register_count"] != 34:
        why.append("'parked' has %d registers, expected 34" % p["register_count"])
    r = p["registers"]
    if (r[31], r[32]) != (p["sp"], p["pc"]) or r[31] % 16 or not r[31]:
        why.append("'parked' sp/pc 0x%x/0x%x (record sp 0x%x pc 0x%x)" % (r[31], r[32], p["sp"], p["pc"]))
    if function(p["pc"]) != "driver_parked":
        why.append("'parked' pc 0x%x is in %s, not driver_parked" % (p["pc"], function(p["pc"])))
    if r[33] & 0x1F != 0 or r[33] >> 32:  # M[4:0] 0: AArch64 EL0t; a 32-bit value
        why.append("'parked' pstate 0x%x is not that of AArch64 EL0" % r[33])
    if r[29] % 16 or not r[30]:
        why.append("'parked' fp 0x%x / lr 0x%x" % (r[29], r[30]))
    if function(r[30] - 4) != "driver_parked":  # the return from pthread_setname_np
        why.append("'parked' lr 0x%x is in %s, not driver_parked" % (r[30], function(r[30] - 4)))
    fp = fp_state(p)
    if fp is None:
        why.append("'parked' has no fp state (size %d, expected 520)" % p["fp_size"])
    else:
        check_fp_control(why, "'parked'", fp)
        fpsr, fpcr, v = fp
        if fpcr & 0x3000000 != 0x3000000:
            why.append("'parked' fpcr 0x%x lacks DN and FZ, which it set" % fpcr)
        bad = [i for i in range(32) if v[i] != bytes([0x40 + i]) * 16]
        if bad:
            why.append("'parked' v%d is %s, expected 16 bytes of 0x%02x" % (bad[0], v[bad[0]].hex(), 0x40 + bad[0]))
    # Frame 0 is the pc; the others are return addresses, looked up at the call before them.
    names = [function(a if i == 0 else a - 4) for i, a in enumerate(p["frames"])]
    if names[:2] != ["driver_parked", "driver_parked_thread"]:
        why.append("'parked' frames %s, expected driver_parked driver_parked_thread" % " ".join(names[:6]))
    unwinder = {1: "libunwind", 2: "frame_pointer"}.get(p["unwinder"])
    if unwinder is None:
        why.append("'parked' unwinder %d, expected libunwind or frame_pointer" % p["unwinder"])
    entry = [s for s in swift if s["name"] == "parked"]
    if not entry or entry[0]["crashed"] or entry[0]["main"] or entry[0]["context"] != "signal":
        why.append("apsio.threads entry of 'parked': %s" % entry)
    # The rest: qemu-user's own host thread (named like the process) blocks every signal, so it
    # is not signalled and is listed with why blocks_signal and a syscall context from
    # /proc/self/task/<tid>/syscall, whose numbers are the emulator's x86-64 ones (a host
    # address as pc, host futex 202 as the syscall, which the arm64 table calls accept); the
    # capture then ends without waiting for its 100 ms deadline. Each has a context or a reason.
    others = [t for t in threads if t is not crashed and t is not p]
    for t in others:
        if CONTEXTS.get(t["context"]) != "signal" and not t["why"]:
            why.append("thread %d '%s' has context %s and no reason" % (t["tid"], t["name"], CONTEXTS.get(t["context"])))
    return detail + "; parked: pc and lr in driver_parked, fpcr 0x%x, v0-v31 as set, %d frames (%s, libunwind %s) %s" % (
        fp[1] if fp else 0, len(names), unwinder, UNWIND_STATUSES.get(p["unwind_status"], "?"), " ".join(names[:3]))


REGISTER_ORDER = ["x%d" % i for i in range(29)] + ["fp", "lr", "sp", "pc", "pstate"]
report = json.load(open(path))
why = []
frames = report.get("frames", [])
names = [f.get("function") or "?" for f in frames]

# The chain, in order (other frames may sit between its links).
at = 0
for name in names:
    if at < len(chain) and name == chain[at]:
        at += 1
if at < len(chain):
    why.append("frames lack '%s' in order: %s" % (" ".join(chain), " ".join(names[:8])))

thread = report.get("thread", {})
details = {d["key"]: d["value"] for d in report.get("details", [])}
if mode == "hang":
    duration = int(details.get("duration (ms)", "0") or 0)
    if duration < 1000:
        why.append("hang duration %d ms < 1000" % duration)
    if details.get("unfinished") in ("true", "yes"):
        why.append("hang not marked finished")
    detail = "hang %d ms, captured by %s" % (duration, thread.get("unwinder", "?"))
    registers = "-"
else:
    signal = report.get("signal", "")
    if not signal.startswith(expected_type):
        why.append("type '%s', expected %s" % (signal, expected_type))
    regs = {r["name"]: int(r["value"], 16) for r in report.get("registers", [])}
    want = ["x%d" % i for i in range(29)] + ["fp", "lr", "sp", "pc", "pstate"]
    if sorted(regs) != sorted(want):
        why.append("registers %s, expected x0-x28 fp lr sp pc pstate" % sorted(regs))
    pc, sp = regs.get("pc", 0), regs.get("sp", 0)
    frame0 = int(frames[0]["address"], 16) if frames else -1
    if mode != "abort" and pc != frame0:
        why.append("pc 0x%x is not frame 0 (0x%x)" % (pc, frame0))
    if sp == 0 or sp % 16:
        why.append("sp 0x%x is not a 16-byte aligned stack pointer" % sp)
    if mode.startswith("overflow"):
        if "Stack overflow" not in report.get("explanation", ""):
            why.append("not explained as a stack overflow")
        if names.count("driver_overflow") < 1000:
            why.append("only %d recursion frames" % names.count("driver_overflow"))
        if not thread.get("truncated"):
            why.append("frames not marked truncated")
    if crash_file:
        threads_detail = check_threads(why, regs, pc)
    if mode == "overflow-thread":
        if thread.get("name") != "overflower" or thread.get("main"):
            why.append("not the second thread 'overflower': %s" % thread)
    elif not thread.get("main"):
        why.append("not the main thread: %s" % thread)
    # The helper's stack, not the frame-pointer fallback (which misses a leaf's caller on arm64).
    if thread.get("unwinder") != "libunwind":
        why.append("unwinder '%s', expected libunwind" % thread.get("unwinder"))
    detail = "%s, unwinder %s" % (signal, thread.get("unwinder"))
    if crash_file:
        detail += "; " + threads_detail
    registers = "34 (pc = frame 0, sp aligned)"
print(("fail|" + "; ".join(why)) if why else
      "ok|%s; %d frames, %s..%s; registers %s" % (detail, len(frames), chain[0], chain[-1], registers))
