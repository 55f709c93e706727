"""Checks one report as `aftermath show ID --json` decoded it (scripts/arm64.sh --quick).

usage: check_report.py MODE SHOW_JSON EXPECTED_TYPE "CHAIN OF FUNCTIONS"
Prints one line: "ok|<detail>" or "fail|<reasons>".
"""
import json
import sys

mode, path, expected_type, chain = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
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
    if mode == "overflow-thread":
        if thread.get("name") != "overflower" or thread.get("main"):
            why.append("not the second thread 'overflower': %s" % thread)
    elif not thread.get("main"):
        why.append("not the main thread: %s" % thread)
    # The helper's stack, not the frame-pointer fallback (which misses a leaf's caller on arm64).
    if thread.get("unwinder") != "libunwind":
        why.append("unwinder '%s', expected libunwind" % thread.get("unwinder"))
    detail = "%s, unwinder %s" % (signal, thread.get("unwinder"))
    registers = "34 (pc = frame 0, sp aligned)"
print(("fail|" + "; ".join(why)) if why else
      "ok|%s; %d frames, %s..%s; registers %s" % (detail, len(frames), chain[0], chain[-1], registers))
