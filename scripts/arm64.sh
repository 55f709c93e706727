#!/usr/bin/env bash
# Aftermath on arm64, under qemu-user on an x86-64 Debian machine (run as root; installs what it
# needs). Prints a table and one closing line `N passed, N failed`; exits non-zero on a failure.
#
#   bash scripts/arm64.sh --quick   CSignalShim's C, cross-compiled with gcc-aarch64-linux-gnu
#                                   (-std=c11 -Wall -Wextra -Werror), its crash-time objects
#                                   checked against the contract in CSignalShim/README.md, then a C
#                                   crash driver (scripts/arm64/crash_driver.c) killed six ways,
#                                   one of them with a second thread parked in a known state,
#                                   and hung once under qemu; each file it leaves is decoded by
#                                   this machine's Swift decoder (the aftermath CLI) and checked,
#                                   a crash's every-thread capture (THREADS sections, read by
#                                   scripts/arm64/check_report.py) too. About a minute.
#   bash scripts/arm64.sh           the whole package: Debian trixie roots (amd64 with swiftlang
#                                   6.0.3 as the cross compiler, arm64 as the sysroot), the test
#                                   suite and the three harnesses run on arm64 under qemu,
#                                   then the same natively on amd64 (below).
#                                   See scripts/arm64/full.sh.
#   bash scripts/arm64.sh --async   async-harness (Swift async callers) built for arm64 at -Onone
#                                   and -O and run under qemu, in the same roots. See
#                                   scripts/arm64/async.sh.
#   bash scripts/arm64.sh --swift60-amd64
#                                   only the native step: the package built with the same Swift
#                                   6.0.3 for amd64 in the trixie-amd64 root, its test suite and
#                                   the three harnesses at native speed (no emulator), to tell
#                                   Swift 6.0.3 differences from qemu ones. A few minutes once the
#                                   root is made. See scripts/arm64/native.sh.
#
# Roots and downloads are kept in $AFTERMATH_ARM64_CACHE (default /var/cache/aftermath-arm64)
# and reused. Times printed are emulated (qemu-user), not those of an arm64 machine.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
MODE=full
case "${1:-}" in
  --quick) MODE=quick ;;
  --swift60-amd64) MODE=swift60-amd64 ;;
  --async) MODE=async ;;
  "") ;;
  *) echo "usage: scripts/arm64.sh [--quick | --swift60-amd64 | --async]" >&2; exit 2 ;;
esac
CACHE=${AFTERMATH_ARM64_CACHE:-/var/cache/aftermath-arm64}
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
ulimit -c 0 # qemu writes guest core files into the current directory otherwise

say() { printf '%s\n' "$*"; }
# A step that cannot go on: a FAIL row, and the table with its closing line (from finish).
die() { printf 'arm64.sh: %s\n' "$*" >&2; row "setup" FAIL "$*"; DIED=1; exit 1; }

# The closing line comes whatever ends the script: an error, a step killed, a signal. print_table
# sets CLOSED; finish (on EXIT) prints the table with a FAIL row when nothing printed it yet.
CLOSED=0; DIED=0
CLEANUP=""
PASSED=0; FAILED=0; SKIPPED=0; LIMITS=(); ROWS=()
finish() {
  local rc=$?
  trap - EXIT
  if [ "$CLOSED" = 0 ]; then
    [ "$rc" = 0 ] && rc=1
    [ "$DIED" = 1 ] || row "arm64.sh" FAIL "ended before its table (exit $rc): the step after the last row above died"
    print_table "arm64.sh ($MODE): ended early"
  fi
  [ -z "$CLEANUP" ] || eval "$CLEANUP"
  exit "$rc"
}
trap finish EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- host packages ----------------------------------------------------------------------
apt_updated=0
need_packages() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} = 0 ] && return 0
  if [ "$apt_updated" = 0 ]; then $SUDO apt-get update -qq || die "apt-get update failed"; apt_updated=1; fi
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

# The Debian mirror and suite this machine's apt uses (no host is written here).
debian_mirror() {
  local codename
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  apt-cache policy 2>/dev/null | awk -v s="$codename/main" '$3 == s { print $2; exit }'
}

# ---- binfmt_misc: arm64 executables run transparently through qemu -----------------------
BINFMT=0
binfmt_reason=""
setup_binfmt() {
  if [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] && grep -q enabled /proc/sys/fs/binfmt_misc/qemu-aarch64; then
    BINFMT=1; return
  fi
  if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    if ! out=$($SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>&1); then
      binfmt_reason="binfmt_misc cannot be mounted here: ${out:-mount failed}"
      return
    fi
  fi
  # No systemd running here: register Debian's qemu-aarch64 entry by hand (flag F: the
  # interpreter is opened now, so it also works inside chroots).
  if ! out=$($SUDO /lib/systemd/systemd-binfmt /usr/lib/binfmt.d/qemu-aarch64.conf 2>&1); then
    if [ -w /proc/sys/fs/binfmt_misc/register ] || [ -n "$SUDO" ]; then
      line=$(grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf | head -1)
      printf '%s' "$line" | $SUDO tee /proc/sys/fs/binfmt_misc/register >/dev/null 2>&1 || true
    fi
  fi
  if [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then BINFMT=1
  else binfmt_reason="registering qemu-aarch64 in binfmt_misc failed: ${out:-}"; fi
}

# Runs an aarch64 program of the cross toolchain (its loader and libc from /usr/aarch64-linux-gnu).
run_arm64() {
  if [ "$BINFMT" = 1 ]; then QEMU_LD_PREFIX=/usr/aarch64-linux-gnu "$@"
  else QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64-static "$@"; fi
}

# ---- the table ----------------------------------------------------------------------------
row() { # name status detail...
  local name=$1 status=$2; shift 2
  ROWS+=("$(printf '%-22s %-6s %s' "$name" "$status" "$*")")
  case "$status" in PASS) PASSED=$((PASSED + 1)) ;; FAIL) FAILED=$((FAILED + 1)) ;; esac
}
print_table() {
  say ""
  say "$1"
  printf '%-22s %-6s %s\n' "row" "result" "checked"
  printf '%-22s %-6s %s\n' "----------------------" "------" "-------"
  for r in "${ROWS[@]}"; do say "$r"; done
  if [ ${#LIMITS[@]} -gt 0 ]; then
    say ""
    say "Known emulator limits (qemu-user, not defects; covered another way):"
    for l in "${LIMITS[@]}"; do say "  - $l"; done
  fi
  say ""
  if [ "$SKIPPED" -gt 0 ]; then say "$PASSED passed, $FAILED failed, $SKIPPED skipped"
  else say "$PASSED passed, $FAILED failed"; fi
  CLOSED=1
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f s", b - a }'; }

if [ "$MODE" != quick ]; then
  # shellcheck source=scripts/arm64/roots.sh
  . scripts/arm64/roots.sh
  # shellcheck source=scripts/arm64/native.sh
  . scripts/arm64/native.sh
fi
if [ "$MODE" = full ]; then
  # shellcheck source=scripts/arm64/full.sh
  . scripts/arm64/full.sh
  exit $?
fi
if [ "$MODE" = async ]; then
  # shellcheck source=scripts/arm64/async.sh
  . scripts/arm64/async.sh
  exit $?
fi
if [ "$MODE" = swift60-amd64 ]; then
  t0=$(now)
  need_packages mmdebstrap
  native_amd64
  print_table "swift60-amd64: the package built with Debian's Swift 6.0.3 and run natively on x86-64 in a trixie amd64 root"
  say "times: total $(elapsed "$t0")"
  [ "$FAILED" = 0 ]
  exit $?
fi

# =========================================================================================
# --quick
# =========================================================================================
t0=$(now)
need_packages qemu-user-static gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross \
  libunwind-dev python3
setup_binfmt
if [ "$BINFMT" = 1 ]; then run_via="binfmt_misc"
else run_via="qemu-aarch64-static directly ($binfmt_reason)"; fi

# libunwind for arm64: Debian's debs, fetched with a private apt state and unpacked into a
# private directory (no dpkg --add-architecture, nothing installed on the host).
SYSROOT=$CACHE/quick-sysroot
if [ ! -e "$SYSROOT/usr/include/aarch64-linux-gnu/libunwind.h" ] || [ ! -e "$SYSROOT/lib/aarch64-linux-gnu/liblzma.so.5" ]; then
  apt_dir=$CACHE/quick-apt
  rm -rf "$apt_dir" "$SYSROOT"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs" "$SYSROOT"
  if [ "$apt_updated" = 0 ]; then $SUDO apt-get update -qq || die "apt-get update failed"; apt_updated=1; fi
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no Debian mirror found in this machine's apt sources"
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $codename main" > "$apt_dir/sources.list"
  : > "$apt_dir/status"
  apt_private=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::State::status=$apt_dir/status"
    -o "Dir::Cache=$apt_dir/cache" -o APT::Architecture=arm64 -o APT::Architectures::=arm64
    -o APT::Sandbox::User=root -o Debug::NoLocking=1)
  apt-get "${apt_private[@]}" update -qq || die "private apt update (arm64) failed"
  (cd "$apt_dir/debs" && apt-get "${apt_private[@]}" download libunwind8 libunwind-dev liblzma5 >/dev/null) \
    || die "downloading libunwind for arm64 failed"
  for deb in "$apt_dir/debs"/*.deb; do dpkg-deb -x "$deb" "$SYSROOT"; done
fi
setup_time=$(elapsed "$t0")

WORK=$(mktemp -d /tmp/aftermath-arm64.XXXXXX)
CLEANUP='[ -n "${KEEP:-}" ] || rm -rf "$WORK"' # KEEP=1 keeps the files
OBJ=$WORK/obj; mkdir -p "$OBJ"
CC=aarch64-linux-gnu-gcc
CFLAGS=(-std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -O1 -g -fPIC -fno-optimize-sibling-calls
        -ICSignalShim/include -ICSignalShim/internal -IHarness/CFaults/include -isystem "$SYSROOT/usr/include/aarch64-linux-gnu")

# 1. every C file of CSignalShim, and the test faults (the brk the driver executes)
t=$(now); bad=()
mapfile -t sources < <(find CSignalShim -name '*.c' | sort)
sources+=(Harness/CFaults/*.c)
for f in "${sources[@]}"; do
  if ! $CC "${CFLAGS[@]}" -c "$f" -o "$OBJ/$(basename "$f").o" 2>"$WORK/cc.log"; then
    bad+=("$(basename "$f")"); sed 's/^/    /' "$WORK/cc.log" | head -20
  fi
done
if [ ${#bad[@]} = 0 ]; then row "compile CSignalShim" PASS "${#sources[@]} files (CSignalShim, Harness/CFaults), gcc $($CC -dumpversion) -std=c11 -Wall -Wextra -Werror ($(elapsed "$t"))"
else row "compile CSignalShim" FAIL "does not compile: ${bad[*]}"; fi

# 2. the crash-time objects call only what the contract in CSignalShim/README.md allows, read as
# AsyncSafetyTests reads it: every `code` span between the crash-time-allowed markers (a
# trailing * makes a prefix), and our own aft_async_* helpers and aft_g_* state.
mapfile -t allow < <(sed -n '/<!-- crash-time-allowed: begin -->/,/<!-- crash-time-allowed: end -->/p' CSignalShim/README.md |
  tr '\n' ' ' | awk -F'`' '{ for (i = 2; i <= NF; i += 2) print $i }')
allow+=('aft_async_*' 'aft_g_*')
allowed() {
  local s=$1 e
  for e in "${allow[@]}"; do
    case "$e" in *'*') [[ "$s" == "${e%\*}"* ]] && return 0 ;; *) [ "$s" = "$e" ] && return 0 ;; esac
  done
  return 1
}
bad=(); count=0
for o in "$OBJ"/*_async.c.o; do
  [ -e "$o" ] || continue
  count=$((count + 1))
  for s in $(aarch64-linux-gnu-nm -u "$o" | awk '{ print $NF }' | sed 's/@.*//'); do
    allowed "$s" || bad+=("$(basename "$o" .c.o): $s")
  done
done
if [ "$count" -gt 0 ] && [ ${#bad[@]} = 0 ]; then row "async-safety (nm -u)" PASS "$count *_async objects call only allowlisted symbols (outline atomics included)"
else row "async-safety (nm -u)" FAIL "${bad[*]:-no *_async objects}"; fi

# 3. the crash driver, linked with libunwind from the private directory
t=$(now)
LIBDIRS="$SYSROOT/usr/lib/aarch64-linux-gnu:$SYSROOT/lib/aarch64-linux-gnu"
DRIVER=$WORK/crash_driver
if $CC "${CFLAGS[@]}" -c scripts/arm64/crash_driver.c -o "$WORK/crash_driver.o" &&
   $CC -o "$DRIVER" "$WORK/crash_driver.o" "$OBJ"/*.o -L"$SYSROOT/usr/lib/aarch64-linux-gnu" \
     -Wl,-rpath-link,"$SYSROOT/lib/aarch64-linux-gnu" -Wl,--disable-new-dtags -Wl,-rpath,"$LIBDIRS" \
     -lunwind -lunwind-generic -lpthread; then
  row "link crash driver" PASS "aarch64 PIE with libunwind $(ls "$SYSROOT"/usr/lib/aarch64-linux-gnu/libunwind.so.8.* | sed 's/.*so\.8\./8./') ($(elapsed "$t"))"
else
  row "link crash driver" FAIL "see the compiler's output above"
  print_table "arm64 --quick"; exit 1
fi

# 4. the host's Swift decoder
t=$(now)
if ! swift build --product aftermath >"$WORK/swift-build.log" 2>&1; then
  tail -20 "$WORK/swift-build.log"
  row "host decoder" FAIL "swift build --product aftermath failed"
  print_table "arm64 --quick"; exit 1
fi
CLI=$(swift build --show-bin-path)/aftermath
decoder_time=$(elapsed "$t")

# The GNU build id of an ELF file on disk (what the report must say for that image).
build_id_of() { aarch64-linux-gnu-readelf -n "$1" 2>/dev/null | awk '/Build ID:/ { print $3; exit }'; }

# The aarch64 file a reported image name stands for.
path_of() {
  local d
  for d in "$WORK" /usr/aarch64-linux-gnu/lib "$SYSROOT/usr/lib/aarch64-linux-gnu" "$SYSROOT/lib/aarch64-linux-gnu"; do
    [ -e "$d/$1" ] && { echo "$d/$1"; return; }
  done
}
# Sets IMG_WHY (empty when fine) and IMAGES_DETAIL from the exported record (aftermath dump):
# apsio.crash.images (the images the frames are in, and the main one) lists each as arm64, each whose file has a GNU build id carries
# that id, the driver is in_app; app.build_id is the driver's.
check_images() {
  local dir=$1 name id arch in_app n=0 with=0 want driver_seen=0
  IMG_WHY=""
  "$CLI" dump --dir "$dir" > "$dir.json" 2>&1 || { IMG_WHY="aftermath dump failed; "; IMAGES_DETAIL=""; return; }
  while read -r name id arch in_app; do
    n=$((n + 1))
    if [ "$name" = "app.build_id" ]; then
      n=$((n - 1))
      want=$(build_id_of "$DRIVER")
      [ "$id" = "$want" ] || IMG_WHY+="app.build_id '${id#-}' != $want; "
      continue
    fi
    [ "$name" = crash_driver ] && driver_seen=1
    [ "$arch" = arm64 ] || IMG_WHY+="$name: arch $arch; "
    [ "$name" != crash_driver ] || [ "$in_app" = True ] || IMG_WHY+="crash_driver not in_app; "
    want=$(build_id_of "$(path_of "$name")")
    if [ -n "$want" ] && [ "$id" != "$want" ]; then IMG_WHY+="$name: build id '${id#-}' != $want; "
    elif [ -n "$want" ]; then with=$((with + 1)); fi
  done < <(python3 -c '
import json, sys
for rl in json.load(open(sys.argv[1]))["resourceLogs"]:
    for sl in rl["scopeLogs"]:
        for r in sl["logRecords"]:
            a = {x["key"]: x["value"] for x in r["attributes"]}
            print("app.build_id", a.get("app.build_id", {}).get("stringValue") or "-", "-", "-")
            for i in json.loads(a.get("apsio.crash.images", {}).get("stringValue", "[]")):
                print(i["name"], i.get("build_id") or "-", i.get("arch"), i.get("in_app"))
' "$dir.json")
  [ "$driver_seen" = 1 ] || IMG_WHY+="the driver is not among the images; "
  IMAGES_DETAIL="$n images, $with with the files' build ids"
}

declare -A expect_exit=([null]=139 [brk]=133 [abort]=134 [overflow-main]=139 [overflow-thread]=139 [threads]=139 [hang]=0)
declare -A expect_type=([null]="SIGSEGV (SEGV_MAPERR)" [threads]="SIGSEGV (SEGV_MAPERR)" [brk]="SIGTRAP (TRAP_BRKPT)" [abort]="SIGABRT (SI_TKILL)"
                        [overflow-main]="SIGSEGV (SEGV_" [overflow-thread]="SIGSEGV (SEGV_")
declare -A expect_chain=([null]="driver_null driver_level3 driver_level2 driver_level1 main"
                         [threads]="driver_null driver_level3 driver_level2 driver_level1 main"
                         [brk]="aft_test_breakpoint driver_level3 driver_level2 driver_level1 main"
                         [abort]="abort driver_level3 driver_level2 driver_level1 main"
                         [overflow-main]="driver_overflow driver_overflow driver_overflow"
                         [overflow-thread]="driver_overflow driver_overflow driver_overflow"
                         [hang]="driver_spin_ms driver_level3 driver_level2 driver_level1 main")
run_times=()
for mode in null brk abort overflow-main overflow-thread threads hang; do
  dir=$WORK/reports-$mode
  t=$(now)
  (cd "$WORK" && run_arm64 timeout 120 "$DRIVER" "$mode" "$dir" >"$WORK/$mode.out" 2>"$WORK/$mode.err")
  status=$?
  took=$(elapsed "$t")
  run_times+=("$mode $took")
  why=""
  [ "$status" = "${expect_exit[$mode]}" ] || why+="exit $status, expected ${expect_exit[$mode]}; "
  if [ "$mode" = hang ]; then
    files=("$dir"/hangs/*.hang)
  else # a .crash file, or the reserve its handler committed in place ("CMIT" at byte 28)
    files=()
    for f in "$dir"/crashes/*.crash "$dir"/crashes/*.crash.tmp; do
      [ -e "$f" ] && [ "$(dd if="$f" bs=1 skip=28 count=4 2>/dev/null)" = CMIT ] && files+=("$f")
    done
  fi
  if [ ${#files[@]} != 1 ] || [ ! -e "${files[0]}" ]; then
    row "$mode" FAIL "${why}expected one report file, found: $(ls -R "$dir" 2>/dev/null | tr '\n' ' ')"
    continue
  fi
  show=$WORK/$mode.json
  # The report names the C library as the emulated process saw it (/lib/libc.so.6, the loader's
  # name); on this x86-64 host that file is the arm64 sysroot's, so the decoder is told where to
  # look, as anyone symbolicating off the device would be (it checks the build id first).
  if ! "$CLI" show "$(basename "${files[0]}")" --dir "$dir" --debug-dir /usr/aarch64-linux-gnu/lib --json \
    >"$show" 2>"$WORK/$mode.show-err"; then
    row "$mode" FAIL "${why}not decoded: $(head -3 "$WORK/$mode.show-err" | tr '\n' ' ')"
    continue
  fi
  check_images "$dir"; why+=$IMG_WHY
  # A crash's every-thread capture too: the file's THREADS sections and apsio.threads.
  threads_args=()
  [ "$mode" = hang ] || threads_args=("${files[0]}" "$dir.json" "$DRIVER")
  verdict=$(python3 scripts/arm64/check_report.py "$mode" "$show" "${expect_type[$mode]:-}" "${expect_chain[$mode]}" \
    "${threads_args[@]}" 2>&1)
  case "$verdict" in
    ok\|*) detail=${verdict#ok|} ;;
    *) why+="${verdict#fail|}; "; detail="" ;;
  esac
  # The arm64 crash's minidump, made by the host's decoder from the file alone, read back by
  # rust-minidump's minidump-stackwalk (an x86-64 program that reads any architecture's dump).
  if [ "$mode" = threads ]; then
    stackwalk=$(bash scripts/minidump-readers.sh 2>/dev/null | sed -n 's/^minidump-stackwalk=//p')
    dump=$WORK/threads.dmp
    if [ -z "$stackwalk" ]; then
      why+="no minidump-stackwalk (scripts/minidump-readers.sh); "
    elif ! "$CLI" minidump "$(basename "${files[0]}" .crash)" --dir "$dir" -o "$dump" >/dev/null 2>&1; then
      why+="aftermath minidump failed; "
    else
      md=$("$stackwalk" --json --use-local-debuginfo "$dump" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
arch = d.get("system_info", {}).get("cpu_arch")
threads = d.get("threads", [])
crashed = d.get("crashing_thread") or {}
frames = [f.get("function") or "" for f in crashed.get("frames", [])]
kind = (d.get("crash_info") or {}).get("type", "")
ok = arch == "arm64" and len(threads) >= 2 and kind.startswith("SIGSEGV") and any("driver_null" in f for f in frames)
print(("ok" if ok else "fail") + "|minidump %s, %d threads, %s, crashing thread %s" % (arch, len(threads), kind, " < ".join(frames[:3])))
' 2>&1)
      case "$md" in
        ok\|*) detail+="; ${md#ok|}" ;;
        *) why+="${md#fail|}; " ;;
      esac
    fi
  fi
  if [ -z "$why" ]; then
    row "$mode" PASS "exit $status; $detail; $IMAGES_DETAIL; $took emulated"
  else
    row "$mode" FAIL "$why($took emulated)"
  fi
done

# 5. what qemu-user does differently from the kernel, looked for now (scripts/arm64/emulator_probe.c):
# the full run's rows these explain are listed there as limits, not counted as failures.
declare -A PROBE_EFFECT=(
  [ptrace]="no strace can attach: hang-harness tracer runs on x86-64 only"
  [seccomp]="no filter can be installed: crash-harness seccomp-kill and seccomp-eperm run on x86-64 only"
  [proc-syscall]="the emulator's x86-64 syscall and stack pointer: hang-harness sleep, dmsleep and asyncsleep (the watchdog's /proc capture) are checked on x86-64"
  [sigblk-numbering]="host signal numbers: the watchdog misreads the capture signal as blocked (hang-harness dispatchmain, dmbusy, asyncbusy, asyncblock); checked on x86-64"
  [extra-task]="the emulator's own thread, which runs no guest handler: the Swift backtracer cannot pause it (crash-harness swift bt column); checked on x86-64"
  [rt-signals]="the hang watchdog checks at start that its capture signal can be sent and skips these"
  [clone-exit-signal]="the unwinding helper is started as a copy of the process with SIGCHLD as exit signal here (unwinder libunwind checked above)"
  [clone-vm-process]="no resident unwinding helper can be started: each request starts a helper of its own (crash-harness helper-killed and exit-harness 'unwinding helper: exec, then SIGKILL' run on x86-64 only)"
  [sigill-code]="crash-harness illegal-instruction records ILL_ILLOPN, as the signal said"
  [proc-fsize]="qemu writes its emulated /proc files into a memory file, which RLIMIT_FSIZE limits: under ulimit -f 8 the maps are cut and SIGXFSZ ends the unwinding helper (crash-harness file-size-limit); checked on x86-64"
  [exec-start-time]="an exec is not recognised by its unchanged start time: exit-harness execv row runs on x86-64 only"
)
t=$(now)
if $CC -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -O1 -o "$WORK/emulator_probe" scripts/arm64/emulator_probe.c &&
   run_arm64 "$WORK/emulator_probe" >"$WORK/probe.out" 2>"$WORK/probe.err"; then
  seen=0; gone=()
  while IFS='|' read -r name holds evidence; do
    if [ "$holds" = 1 ]; then
      seen=$((seen + 1))
      LIMITS+=("$name: $evidence; ${PROBE_EFFECT[$name]:-}")
    else
      gone+=("$name")
    fi
  done <"$WORK/probe.out"
  row "emulator probe" PASS "$seen of ${#PROBE_EFFECT[@]} known differences from the kernel seen (listed below)${gone[*]:+; not seen: ${gone[*]}} ($(elapsed "$t"))"
else
  row "emulator probe" FAIL "did not build or run: $(head -3 "$WORK/probe.err" | tr '\n' ' ')"
fi

print_table "arm64 --quick: CSignalShim + crash driver under qemu-user ($(qemu-aarch64-static --version | head -1 | awk '{ print $3 }'), via $run_via); decoded by the host's Swift ($(swift --version 2>&1 | head -1 | sed 's/.*version \([0-9.]*\).*/\1/'))"
say "times: setup $setup_time, host decoder build $decoder_time, total $(elapsed "$t0"); runs (emulated): ${run_times[*]}"
[ "$FAILED" = 0 ]
