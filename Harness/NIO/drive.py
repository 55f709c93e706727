#!/usr/bin/env python3
"""The SwiftNIO rows of the hang harness: a real SwiftNIO HTTP server (Sources/NIOServer), as a
user writes one, with Aftermath watching its event loops and the Swift concurrency pool. Each row
starts a fresh server, stalls it through HTTP as a handler would, and checks the records its
FileExporter wrote (symbolicated with the aftermath command). Prints a table; exit status 1 when
a row fails.

usage: drive.py <NIOServer binary> <aftermath binary> [row ...]
AFTERMATH_STACKWALK and AFTERMATH_LLDB in the environment: rust-minidump's minidump-stackwalk
and LLDB, which read the crash row's minidump (without them that row fails); NIO_KEEP=1 keeps
each row's directory.
"""
import http.client
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SERVER, AFTERMATH = sys.argv[1], sys.argv[2]
ONLY = set(sys.argv[3:])
WIDTH = os.sysconf("SC_NPROCESSORS_CONF")


class Server:
    """One server process on its own reports directory and outbox."""

    def __init__(self, root, env=None):
        self.root = root
        self.env = env or {}
        self.reports = os.path.join(root, "reports")
        self.outbox = os.path.join(root, "outbox")
        self.start()

    def start(self):
        self.process = subprocess.Popen(
            [SERVER, self.reports, self.outbox], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=dict(os.environ, SWIFT_BACKTRACE="enable=no", **self.env))
        line = self.process.stdout.readline().decode()
        if not line.startswith("READY "):
            raise RuntimeError("server did not start: " + line)
        self.port = int(line.split()[1])
        time.sleep(1.0)  # every loop's first ping has run: watched from here on

    def get(self, path, timeout=30):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        connection.request("GET", path)
        body = connection.getresponse().read()
        connection.close()
        return body

    def loop_threads(self):
        """The event loop threads: tid -> name."""
        task = "/proc/%d/task" % self.process.pid
        threads = {}
        for tid in os.listdir(task):
            try:
                name = open(os.path.join(task, tid, "comm")).read().strip()
            except OSError:
                continue
            if name.startswith("NIO-ELT-"):
                threads[int(tid)] = name
        return threads

    def switches(self, tid):
        with open("/proc/%d/task/%d/status" % (self.process.pid, tid)) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
        return 0

    def stop(self, sig=signal.SIGTERM):
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(timeout=10)

    def records(self):
        """(record, attributes, file) for every record in the outbox."""
        found = []
        if not os.path.isdir(self.outbox):
            return found
        for name in sorted(os.listdir(self.outbox)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(self.outbox, name)
            data = json.load(open(path))
            for resource in data.get("resourceLogs", []):
                for scope in resource.get("scopeLogs", []):
                    for record in scope.get("logRecords", []):
                        attributes = {a["key"]: list(a["value"].values())[0] for a in record.get("attributes", [])}
                        found.append((record, attributes, path))
        return found

    def hangs(self):
        return [r for r in self.records() if r[0].get("eventName") == "apsio.hang"]


def views(path):
    """The aftermath command's symbolicated views of the records in path."""
    out = subprocess.run(
        [AFTERMATH, "symbolicate", path, "--debug-dir", os.path.dirname(SERVER), "--json"],
        capture_output=True, text=True, timeout=120).stdout
    try:
        reports = json.loads(out)
    except ValueError:
        return []
    return reports if isinstance(reports, list) else [reports]


def frame_functions(frames):
    names = []
    for frame in frames:
        names.append(frame.get("function") or "")
        names += [i.get("function", "") for i in frame.get("inlined", [])]
    return names


def functions(path, uid):
    """The symbolicated function names of the records in path."""
    return [name for report in views(path) for name in frame_functions(report.get("frames", []))]


def in_stack(hang, function):
    record, attributes, path = hang
    return any(function in name for name in functions(path, attributes.get("log.record.uid")))


def check_loop_hang(hang, failures, low, high, function="nioHarnessBlockingHandler", unfinished=False):
    _, a, _ = hang
    if a.get("apsio.hang.kind") != "event_loop":
        failures.append("kind %s" % a.get("apsio.hang.kind"))
    if not str(a.get("apsio.hang.target", "")).startswith("loop-"):
        failures.append("target %s" % a.get("apsio.hang.target"))
    if not str(a.get("thread.name", "")).startswith("NIO-ELT-"):
        failures.append("thread.name %s" % a.get("thread.name"))
    duration = int(a.get("apsio.hang.duration", -1))
    if not low <= duration <= high:
        failures.append("duration %d ms not in %d...%d" % (duration, low, high))
    if bool(a.get("apsio.hang.unfinished", False)) != unfinished:
        failures.append("unfinished flag")
    if not in_stack(hang, function):
        failures.append("%s not in the stack" % function)
    return "%s %s %s ms" % (a.get("apsio.hang.kind"), a.get("thread.name"), duration)


def no_main_hang(server, failures):
    if any(a.get("apsio.hang.kind") == "main" for _, a, _ in server.hangs()):
        failures.append("a main-thread hang (the main thread parks in closeFuture.wait())")


def one_hang(server, failures, check):
    """What the single hang record shows (check(hang) describes it), or that there is not one."""
    hangs = server.hangs()
    if len(hangs) != 1:
        failures.append("expected 1 apsio.hang, got %d" % len(hangs))
        return "%d records" % len(hangs)
    return check(hangs[0])


def check_other_threads(hang, failures):
    """The hang record's other threads, as a user reads them: each idle loop (asleep in
    epoll_wait, known by sp and pc) unwound up to its run loop, and the main thread (parked in
    a future's wait) without a loop's frames a stale word on its stack would bring in."""
    hang_views = [v for v in views(hang[2]) if v.get("kind") == "hang"]
    threads = hang_views[0].get("threads") or [] if hang_views else []
    loops = [t for t in threads if str(t.get("name", "")).startswith("NIO-ELT-")]
    if not loops:
        failures.append("no other event loop among the record's %d threads" % len(threads))
    for t in loops:
        names = frame_functions(t.get("frames", []))
        if not any("SelectableEventLoop.run()" in n for n in names):
            failures.append("idle loop %s not unwound to SelectableEventLoop.run: %s"
                            % (t.get("name"), " < ".join(n.split("(")[0][:60] for n in names[:6])))
    main = [t for t in threads if t.get("main")]
    names = frame_functions(main[0].get("frames", [])) if main else []
    if not any("EventLoopFuture.wait" in n for n in names):
        failures.append("the main thread's stack lacks EventLoopFuture.wait")
    stale = [n for n in names if "NIOPosix.Selector" in n]
    if stale:
        failures.append("the main thread's stack shows a loop's frame: %s" % stale[0][:80])
    return "%d other loops" % len(loops)


def row_loop(root):
    server = Server(root)
    server.get("/block?ms=2000")
    time.sleep(1.0)
    failures = []
    seen = one_hang(server, failures, lambda hang: "%s; %s" % (
        check_loop_hang(hang, failures, 1800, 2300), check_other_threads(hang, failures)))
    no_main_hang(server, failures)
    server.stop()
    return seen, failures


def row_two_loops(root):
    server = Server(root)
    server.get("/block?ms=1200")
    time.sleep(1.0)
    server.get("/block?ms=1200")
    time.sleep(1.0)
    failures, seen = [], []
    hangs = server.hangs()
    if len(hangs) != 2:
        failures.append("expected 2 apsio.hang, got %d" % len(hangs))
    for hang in hangs:
        seen.append(check_loop_hang(hang, failures, 1000, 1500))
    if len({a.get("thread.id") for _, a, _ in hangs}) != len(hangs):
        failures.append("the same loop twice: connections were not spread over both loops")
    server.stop()
    return "; ".join(seen) or "0 records", failures


def row_idle(root):
    server = Server(root)
    threads = server.loop_threads()
    before = {tid: server.switches(tid) for tid in threads}
    started = time.monotonic()
    time.sleep(10)
    seconds = time.monotonic() - started
    rates = [(server.switches(tid) - before[tid]) / seconds for tid in threads]
    failures = []
    if server.hangs():
        failures.append("%d hang records" % len(server.hangs()))
    if not threads:
        failures.append("no NIO-ELT threads")
    if max(rates or [0]) > 1.0:
        failures.append("an idle loop woke %.2f times a second (budget 1)" % max(rates))
    server.stop()
    return "0 records, loop wake-ups max %.2f/s" % max(rates or [0]), failures


def row_pool(root):
    server = Server(root)
    server.get("/pool?ms=2500")
    time.sleep(3.5)
    failures = []

    def check(hang):
        _, a, _ = hang
        blocked, width = int(a.get("apsio.hang.pool.blocked", -1)), int(a.get("apsio.hang.pool.width", -1))
        if a.get("apsio.hang.kind") != "concurrency_pool":
            failures.append("kind %s" % a.get("apsio.hang.kind"))
        if width != WIDTH:
            failures.append("pool.width %d, expected %d" % (width, WIDTH))
        if blocked != WIDTH or a.get("apsio.hang.pool.state") != "blocked":
            failures.append("pool.blocked %d (%s), expected %d blocked" % (blocked, a.get("apsio.hang.pool.state"), WIDTH))
        workers = [t for t in json.loads(a.get("apsio.threads", "[]")) if t.get("swift_job")]
        if len(workers) < WIDTH:
            failures.append("%d threads marked swift_job" % len(workers))
        if not in_stack(hang, "nioHarnessPoolBlock"):
            failures.append("nioHarnessPoolBlock not in the stack")
        return "concurrency_pool %s ms, width %d, blocked %d" % (a.get("apsio.hang.duration"), width, blocked)

    seen = one_hang(server, failures, check)
    no_main_hang(server, failures)
    server.stop()
    return seen, failures


def row_killed(root):
    server = Server(root)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", "/block?ms=60000")
    time.sleep(2.0)
    server.stop(signal.SIGKILL)
    connection.close()
    server.start()  # the next launch delivers what the killed run left
    time.sleep(2.0)
    failures = []
    seen = one_hang(server, failures, lambda hang: check_loop_hang(hang, failures, 1000, 2300, unfinished=True))
    exits = [a for r, a, _ in server.records() if r.get("eventName") == "app.abnormal_exit"]
    evidence = exits[0].get("apsio.exit.evidence", "") if exits else ""
    if not exits:
        failures.append("no app.abnormal_exit")
    elif "event loop loop-" not in evidence:
        failures.append("exit evidence does not name the loop: %s" % evidence)
    server.stop()
    return seen + "; exit: " + evidence, failures


def row_spare_groups(root):
    # SWIFTNIO_STRICT: a job scheduled on a loop that has shut down is a fatalError, not a line
    # on stderr. Ended loops must never be pinged, and their targets must be freed: 16 groups of
    # 4 are more loops than the watchdog has targets.
    server = Server(root, env={"NIO_HARNESS_SPARE_GROUPS": "16", "SWIFTNIO_STRICT": "1"})
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(l.decode(errors="replace") for l in server.process.stdout))
    reader.start()
    failures = []
    deadline = time.monotonic() + 90
    while not any(l.startswith("SPARE DONE") for l in lines) and server.process.poll() is None:
        if time.monotonic() > deadline:
            failures.append("the spare groups did not end in 90 s")
            break
        time.sleep(0.2)
    time.sleep(2.5)  # an ended loop's next ping would be due within 2 s
    if server.process.poll() is not None:
        failures.append("the server ended (status %s)" % server.process.returncode)
    else:
        server.get("/block?ms=1200")
        time.sleep(1.0)
    done = [l.split()[2] for l in lines if l.startswith("SPARE DONE")]
    if done != ["0"]:
        failures.append("spare groups: %s" % (done or "no SPARE DONE"))
    failures += ["output: " + l.strip() for l in lines if "Cannot schedule" in l or "FAILED" in l][:3]
    hangs = server.hangs()
    spare = [a for _, a, _ in hangs if str(a.get("apsio.hang.target", "")).startswith("spare-")]
    if spare:
        failures.append("%d hangs of ended loops" % len(spare))
    loop = [h for h in hangs if str(h[1].get("apsio.hang.target", "")).startswith("loop-")]
    seen = "%d spare loops ended" % (16 * 4)
    if server.process.poll() is None:
        if len(loop) != 1:
            failures.append("expected 1 hang of the server's loops after, got %d" % len(loop))
        else:
            seen += "; then " + check_loop_hang(loop[0], failures, 1000, 1500)
    server.stop()
    reader.join(timeout=5)
    return seen, failures


def row_crash(root):
    # A server as it meets a bug: one loop stalled in a handler (a hang in progress), the other
    # traps in one. The next launch reports the crash with every thread, the stalled loop's
    # stack among them, the hang as unfinished, and a minidump a standard reader opens.
    server = Server(root)
    stalled = threading.Thread(target=lambda: quietly(server.get, "/block?ms=4000"))
    stalled.start()  # the first connection: one loop; the next goes to the other
    time.sleep(1.2)  # past the loop threshold (500 ms) and the watchdog's look
    quietly(server.get, "/crash?ms=3", timeout=10)
    status = server.process.wait(timeout=15)
    stalled.join(timeout=15)
    failures = []
    trap = signal.SIGTRAP if platform.machine() in ("aarch64", "arm64") else signal.SIGILL
    if status != -trap:
        failures.append("the server ended with %s, not %s" % (status, signal.Signals(trap).name))
    server.start()  # the next launch delivers the crash
    deadline = time.monotonic() + 15
    while not [r for r in server.records() if r[0].get("eventName") == "app.crash"] and time.monotonic() < deadline:
        time.sleep(0.2)
    crashes = [r for r in server.records() if r[0].get("eventName") == "app.crash"]
    server.stop()
    if len(crashes) != 1:
        failures.append("expected 1 app.crash, got %d" % len(crashes))
        return "%d crash records" % len(crashes), failures
    _, a, path = crashes[0]
    if not str(a.get("exception.type", "")).startswith(signal.Signals(trap).name):
        failures.append("exception.type %s" % a.get("exception.type"))
    if not str(a.get("thread.name", "")).startswith("NIO-ELT-"):
        failures.append("crashed thread.name %s" % a.get("thread.name"))
    crash_views = [v for v in views(path) if v.get("kind") == "crash"]
    threads = crash_views[0].get("threads") or [] if crash_views else []
    crashed = [t for t in threads if t.get("crashed")]
    loops = [t for t in threads if str(t.get("name", "")).startswith("NIO-ELT-") and not t.get("crashed")]
    if not crashed or "nioHarnessCrashingHandler" not in " ".join(frame_functions(crashed[0].get("frames", []))):
        failures.append("nioHarnessCrashingHandler not in the crashed thread's stack")
    if not any(t.get("main") for t in threads):
        failures.append("no main thread among %d threads" % len(threads))
    if not any("nioHarnessBlockingHandler" in " ".join(frame_functions(t.get("frames", []))) for t in loops):
        failures.append("the stalled loop's nioHarnessBlockingHandler not in any other thread's stack")
    hangs = [h for h in server.hangs() if h[1].get("apsio.hang.kind") == "event_loop"]
    if len(hangs) != 1:
        failures.append("expected 1 event-loop apsio.hang, got %d" % len(hangs))
    else:
        check_loop_hang(hangs[0], failures, 500, 2000, unfinished=True)
        if hangs[0][1].get("apsio.hang.run_crashed") is not True:
            failures.append("the hang is not marked run_crashed")
    seen = "%s on %s, %d threads" % (a.get("exception.type"), a.get("thread.name"), len(threads))
    seen += "; " + minidump_check(server, a, threads, failures)
    return seen + "; " + lldb_check(server, a, threads, signal.Signals(trap).name, failures), failures


def quietly(call, *args, **kwargs):
    """call, whose connection may end without an answer (the server died)."""
    try:
        call(*args, **kwargs)
    except (OSError, http.client.HTTPException):
        pass


def minidump_check(server, attributes, threads, failures):
    """What rust-minidump's minidump-stackwalk reads in the crash's minidump attachment."""
    stackwalk = os.environ.get("AFTERMATH_STACKWALK", "")
    dump = os.path.join(server.outbox, "%s.dmp" % attributes.get("apsio.attachment.id"))
    if not os.path.isfile(dump):
        failures.append("no minidump %s in the outbox" % os.path.basename(dump))
        return "no minidump"
    if not os.access(stackwalk, os.X_OK):
        failures.append("no minidump-stackwalk (AFTERMATH_STACKWALK): the minidump is unread")
        return "minidump unread"
    run = subprocess.run([stackwalk, "--json", dump], capture_output=True, text=True, timeout=120)
    try:
        walked = json.loads(run.stdout)
    except ValueError:
        failures.append("minidump-stackwalk: %s" % run.stderr.strip()[-300:])
        return "minidump unreadable"
    listed = walked.get("threads", [])
    index = (walked.get("crash_info") or {}).get("crashing_thread")
    name = listed[index].get("thread_name", "") if isinstance(index, int) and 0 <= index < len(listed) else ""
    if not str(name).startswith("NIO-ELT-"):
        failures.append("minidump crashing thread %s named %r" % (index, name))
    if len(listed) != len(threads):
        failures.append("minidump lists %d threads, the record %d" % (len(listed), len(threads)))
    named = sum(1 for t in listed if str(t.get("thread_name", "")).startswith("NIO-ELT-"))
    if named < 2:
        failures.append("minidump names %d NIO-ELT threads" % named)
    return "minidump: %d threads, crashing %s" % (len(listed), name)


def lldb_check(server, attributes, threads, signal_name, failures):
    """What LLDB reads in the crash's minidump: its threads, the stop reason, both handlers."""
    lldb = os.environ.get("AFTERMATH_LLDB", "")
    dump = os.path.join(server.outbox, "%s.dmp" % attributes.get("apsio.attachment.id"))
    if not os.access(lldb, os.X_OK) or not os.path.isfile(dump):
        failures.append("no LLDB (AFTERMATH_LLDB) or no minidump: the minidump is unread by LLDB")
        return "lldb: unread"
    run = subprocess.run([lldb, "-b", "-c", dump, "-o", "thread list", "-o", "bt all"],
                         capture_output=True, text=True, timeout=300)
    text = run.stdout
    tids = {line.split("tid = ")[1].split(",")[0].split()[0] for line in text.splitlines() if "tid = " in line}
    if run.returncode != 0 or len(tids) != len(threads):
        failures.append("lldb: exit %d, %d threads, the record %d" % (run.returncode, len(tids), len(threads)))
    # An optimized build's trap carries the runtime's reason in its debug info, which LLDB
    # gives as the stop reason instead of the signal.
    if ("stop reason = signal %s" % signal_name not in text
            and "stop reason = Swift runtime failure: Index out of range" not in text):
        failures.append("lldb: no stop reason signal %s or Swift runtime failure" % signal_name)
    for function in ("nioHarnessCrashingHandler", "nioHarnessBlockingHandler"):
        if function not in text:
            failures.append("lldb: %s not in bt all" % function)
    return "lldb: %d threads" % len(tids)


ROWS = [
    ("nio-loop", "a handler blocks its event loop 2 s", row_loop),
    ("nio-two-loops", "two loops blocked one after the other", row_two_loops),
    ("nio-idle", "idle server, 10 s: no record, no wake-ups", row_idle),
    ("nio-pool", "every pool thread in a semaphore, 3 awaits deep", row_pool),
    ("nio-killed", "SIGKILL while a loop is stuck, next launch", row_killed),
    ("nio-spare-groups", "64 watched loops shut down unwatched (SWIFTNIO_STRICT)", row_spare_groups),
    ("nio-crash", "a handler traps on one loop, the other stalled; next launch", row_crash),
]


def main():
    results = []
    for name, what, run in ROWS:
        if ONLY and name not in ONLY:
            continue
        print("nio-harness: %s..." % name, file=sys.stderr, flush=True)
        root = tempfile.mkdtemp(prefix="aftermath-nio-")
        started = time.monotonic()
        try:
            seen, failures = run(root)
        except Exception as error:  # a row that cannot run fails, with why
            seen, failures = "error", ["%s: %s" % (type(error).__name__, error)]
        results.append((name, what, seen, failures, int((time.monotonic() - started) * 1000)))
        if not os.environ.get("NIO_KEEP"): shutil.rmtree(root, ignore_errors=True)
    widths = [max(len(r[i]) for r in results + [("row", "what", "seen")]) for i in range(3)]
    print("%-*s | %-*s | %-*s | %6s | result" % (widths[0], "row", widths[1], "what", widths[2], "seen", "ms"))
    print("-" * (sum(widths) + 24))
    for name, what, seen, failures, ms in results:
        print("%-*s | %-*s | %-*s | %6d | %s" % (
            widths[0], name, widths[1], what, widths[2], seen, ms, "FAIL" if failures else "PASS"))
    failed = [r for r in results if r[3]]
    for name, _, _, failures, _ in failed:
        print("  %s: %s" % (name, "; ".join(failures)))
    print("%d passed, %d failed" % (len(results) - len(failed), len(failed)))
    sys.exit(1 if failed else 0)


main()
