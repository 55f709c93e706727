# scripts/arm64.sh without --quick (sourced by it): the whole package built for arm64 with
# Debian's Swift 6.0.3 and run under qemu-user.
#
# The roots, in_root and the parsing shared with the native amd64 run are in roots.sh; the
# native amd64 build and run with the same Swift (native.sh) is this run's last step.

t_all=$(now)

need_packages qemu-user-static mmdebstrap
setup_binfmt
if [ "$BINFMT" != 1 ]; then
  say "SKIPPED: the arm64 package run needs binfmt_misc (the test suite and harnesses start arm64"
  say "child processes inside a chroot): $binfmt_reason"
  say "0 passed, 0 failed, 1 skipped"; CLOSED=1
  exit 0
fi

t=$(now)
make_root trixie-amd64 amd64 apt "$AMD_PACKAGES"
make_root trixie-arm64 arm64 extract "$ARM_PACKAGES"
link_roots
roots_time=$(elapsed "$t")
mkdir -p "$BUILD"

SWIFT_VERSION=$(in_root "$AMD" "swift --version 2>&1" | sed -n 's/.*Swift version \([0-9.]*\).*/\1/p' | head -1)

# 1. build everything for arm64 (Swift 6.0.3, cross, native speed)
t=$(now)
if in_root "$AMD" "swift build --build-tests $CROSS" >"$CACHE/build.log" 2>&1; then
  row "build (Swift $SWIFT_VERSION)" PASS "library, CLI, harnesses, bench, tests for $TRIPLE ($(elapsed "$t"), cross, not emulated)"
else
  grep -E "error:" "$CACHE/build.log" | sort -u | head -30
  row "build (Swift $SWIFT_VERSION)" FAIL "swift build --build-tests for $TRIPLE failed ($(elapsed "$t")); log: $CACHE/build.log"
  print_table "arm64 (full): Swift $SWIFT_VERSION, qemu-user"
  exit 1
fi
BIN=.build/$TRIPLE/debug

python_deps "$CACHE/python-arm64" "$ARM" manylinux2014_aarch64

# 2. the test suite, on arm64 under qemu
t=$(now)
# The minidump readers (scripts/minidump-readers.sh: x86-64 binaries and the host toolchain's
# lldb) are not in the roots: their checks are skipped; the minidump layout tests still run.
TEST_ENV="PYTHONPATH=/opt/python-arm64 SWIFT_BACKTRACE=enable=no AFTERMATH_NO_READERS=1"
in_root "$ARM" "$TEST_ENV timeout 3600 $BIN/AftermathPackageTests.xctest --testing-library swift-testing$skip_args" \
  >"$CACHE/tests.log" 2>&1
test_status=$?
test_time=$(elapsed "$t")

test_rows "" "$CACHE/tests.log" "$test_status" "$test_time emulated"

# Harness rows that qemu-user cannot run as the kernel would, by row name, with the reason and
# what covers them instead. Each reason was checked under qemu-user 7.2 with a small arm64 program
# and, where the row has one, by its run without Aftermath failing the same way.
SIGBLK="under qemu-user /proc/<tid>/status SigBlk holds host signal numbers, and qemu maps guest real-time signals to other host ones (guest 62 is host 64), so the watchdog reads the wrong bit, finds the capture signal blocked and takes the stack from /proc, whose registers are the emulator's. Runs with the signal on x86-64 (hang-harness 17/17); the signal capture on arm64 is checked by live1s, lock, busy, heartbeat, urgowner, first and --quick's hang row"
PROCREGS="a sleep on a main queue served by a worker thread is captured through /proc/<tid>/syscall and the stack it names; under qemu-user those are the emulator's x86-64 syscall, stack pointer and pc, so the scan finds no app frames. Runs on x86-64 (hang-harness 17/17)"
NOPTRACE="qemu-user implements no ptrace (ENOSYS: emulator probe ptrace)"
declare -A HARNESS_LIMIT=(
  [tracer]="$NOPTRACE, so no strace for arm64 can attach and none is in the root. Runs on x86-64 (hang-harness)"
  [dispatchmain]="$SIGBLK"
  [dmbusy]="$SIGBLK"
  [asyncbusy]="$SIGBLK"
  [asyncblock]="$SIGBLK"
  [first]="$SIGBLK"
  [loader-lock-here]="qemu-user accepts clone with CLONE_VM only together with the thread flags (emulator probe clone-vm-process), so the handler's unwinding helper is a copy of the process, in which the loader's lock stays held: it waits out its 300 ms deadline, and the emulated handler, write and chain took 1,012 ms longer than without Aftermath (the row allows 1,000). Runs on x86-64 (crash-harness loader-lock-here); row loader-lock, where the next launch unwinds, passes here"
  [dmsleep]="$PROCREGS"
  [asyncsleep]="$PROCREGS"
  [file-size-limit]="qemu-user builds its emulated /proc/self/maps in a memory file, which RLIMIT_FSIZE limits: under ulimit -f 8 the maps are cut (no libc entry) and SIGXFSZ ends the unwinding helper, which reads them (frame-pointer stack, helper_failed). The kernel's /proc files are not limited. Runs on x86-64 (crash-harness)"
  [sleep]="the watchdog reads /proc/<tid>/syscall to see that a thread sleeps in a call a handler would cut short; under qemu-user it holds the emulator's x86-64 syscall number and stack pointer, so the capture signal is sent and ends usleep early. Runs on x86-64"
  [pid1-abort]="as PID 1 of a PID namespace qemu-user hangs in its own abort path once the guest takes a default-action signal (the kernel drops the signal qemu sends itself), with or without Aftermath: a plain C abort() does the same. Runs on x86-64 (crash-harness)"
  [seccomp-kill]="qemu-user implements no seccomp (installing the filter fails with ENOSYS, without Aftermath too). Runs on x86-64 (crash-harness)"
  [seccomp-eperm]="qemu-user implements no seccomp (installing the filter fails with ENOSYS, without Aftermath too). Runs on x86-64 (crash-harness)"
  [helper-killed]="qemu-user accepts clone with CLONE_VM only together with the thread flags (EINVAL otherwise: emulator probe clone-vm-process), so no resident unwinding helper is started and there is none to kill; every request starts a helper of its own. Runs on x86-64 (crash-harness)"
  ["unwinding helper: exec, then SIGKILL"]="qemu-user accepts clone with CLONE_VM only together with the thread flags (EINVAL otherwise: emulator probe clone-vm-process), so no resident unwinding helper is started. Runs on x86-64 (exit-harness)"
  [threads-blocker]="a thread that blocks every signal is known only by /proc/<tid>/syscall's sp and pc; under qemu-user those are the emulator's x86-64 values (emulator probe proc-syscall), from which no arm64 stack can be walked, so its function is not in its stack. Checked on x86-64 (crash-harness threads-blocker); --quick's threads row lists qemu's own such thread"
  [lock]="the lock holder sleeps, and a hang's capture reads a sleeping thread from /proc/<tid>/syscall (never woken); under qemu-user its sp and pc are the emulator's x86-64 values (emulator probe proc-syscall), so no arm64 stack comes of them. Checked on x86-64 (hang-harness lock)"
  [threads-traced]="$NOPTRACE; the row's setup fails (the tracer child's PTRACE_SEIZE fails, 'starting a traced worker failed: 10'), exit 70 with and without Aftermath. A thread stopped by a tracer is checked on x86-64 (crash-harness)"
  [threads-no-answer]="$NOPTRACE; the tracer child exits before it says it is ready, and the harness's read of that pipe (whose write end the harness itself still holds) waits until the 60 s timeout, with and without Aftermath. A thread that never answers the capture is checked on x86-64 (crash-harness); qemu-user's own thread, which blocks every signal, is listed by --quick's threads row"
  [srv-loop-idle]="an event loop is idle when /proc/<tid>/syscall names epoll_wait, poll or select; under qemu-user it holds the emulator's x86-64 syscall number (emulator probe proc-syscall), so no loop is ever seen idle and each is pinged ten times a second, never reported. Checked on x86-64 (hang-harness srv-loop-idle, nio-harness nio-idle)"
  [srv-pool]="$SIGBLK. The pool's workers are then read from /proc/<tid>/syscall, whose sp and pc are the emulator's (emulator probe proc-syscall): no swift_job_run in their stacks, so none is counted. The record itself (kind concurrency_pool, width) is made here; the workers are checked on x86-64 (hang-harness srv-pool, nio-harness nio-pool)"
  [srv-pool-busy]="$SIGBLK. The pool's workers are then read from /proc/<tid>/syscall, whose sp and pc are the emulator's (emulator probe proc-syscall): no swift_job_run in their stacks, so none is counted. Checked on x86-64 (hang-harness srv-pool-busy)"
  [hang-pool]="$SIGBLK. The pool's workers are then read from /proc/<tid>/syscall (no registers, no thread pointer), so their tasks' async callers are not read. Checked on x86-64 (async-harness hang-pool)"
  [srv-all-tracer]="$NOPTRACE, so no strace for arm64 can attach and none is in the root. Runs on x86-64 (hang-harness)"
  ["execv of its own binary"]="qemu-user emulates /proc/self/stat and /proc/<pid>/stat, and its start time field is the emulator's own start, new after an exec (the kernel's stays), so the exec is not recognised. Runs on x86-64 (exit-harness)"
)
# Checks of crash-harness rows that qemu-user cannot pass, by the text of the harness's failure
# line: a row whose every failure matches one is listed instead of counted.
declare -A CHECK_LIMIT=(
  ["swift bt: the backtracer could not pause"]="qemu-user's own host thread is listed in /proc/self/task and never runs a guest signal handler, so the Swift backtracer cannot pause it, without Aftermath too. The pause is checked on x86-64 (crash-harness)"
  ["record: exception.type is SIGILL (ILL_ILLOPN), expected SIGILL (ILL_ILLOPC)"]="qemu-user reports an undefined instruction as ILL_ILLOPN; the arm64 kernel says ILL_ILLOPC. The record carries what the signal said"
)
# 3. the three harnesses, each with its own table
run_harnesses "$ARM" "$BUILD" "$BIN" "" "" "arm64, qemu-user" emulated HARNESS_LIMIT CHECK_LIMIT

# 4. the same Swift natively on amd64 (native.sh; alone: --swift60-amd64)
say ""; say "== native amd64 run with Swift $SWIFT_VERSION"
native_amd64

print_table "arm64 (full): Swift $SWIFT_VERSION cross-built, run under qemu-user $(qemu-aarch64-static --version | head -1 | awk '{ print $3 }') in a trixie arm64 root; rows amd64: the same Swift natively on x86-64"
say "times: roots $roots_time (cached after the first run), total $(elapsed "$t_all"); runs are emulated"
[ "$FAILED" = 0 ]
