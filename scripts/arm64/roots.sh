# The Debian trixie roots and what the full run and --swift60-amd64 share (sourced by
# scripts/arm64.sh after its helpers).
#
# Two Debian trixie roots in $CACHE, made once and reused:
#   trixie-amd64  swiftlang 6.0.3 for amd64: the cross compiler (native speed)
#   trixie-amd64-native  the same and the test suite's libraries and tools: the package built and
#                 run natively with that same Swift (native.sh)
#   trixie-arm64  swiftlang, libc6-dev, libunwind-dev, binutils, python3, openssl, script(1) for arm64, extracted
#                 (mmdebstrap --variant=extract, no emulation needed): the sysroot the compiler
#                 builds against, and the root the arm64 binaries then run in (binfmt_misc).
# Inside the amd64 root the arm64 root is /sysroot; inside the arm64 root /sysroot is a link to
# /, so the runtime path the compiler writes (/sysroot/usr/libexec/swift/...) resolves in both.
# The repository is mounted at /src in both, in a private mount namespace: nothing is mounted on
# the host. The arm64 build goes to $CACHE/build, the native amd64 one to $CACHE/build-amd64,
# each mounted over /src/.build, so neither clobbers the other.
# Swift 6.0's linker writes no build-id note unless asked: -Xlinker --build-id=sha1.

AMD=$CACHE/trixie-amd64
AMD_NATIVE=$CACHE/trixie-amd64-native
ARM=$CACHE/trixie-arm64
BUILD=$CACHE/build
AMD_BUILD=$CACHE/build-amd64
AMD_PACKAGES=swiftlang,libc6-dev,libunwind-dev,binutils,python3
ARM_PACKAGES=swiftlang,libc6-dev,libstdc++-14-dev,libunwind-dev,libdw-dev,libdebuginfod-dev,debuginfod,libcurl4-openssl-dev,zlib1g-dev,binutils,python3,bash,bsdutils,coreutils,dash,grep,sed,findutils,util-linux,procps,openssl
TRIPLE=aarch64-unknown-linux-gnu
# swift build for arm64 in the amd64 root, the arm64 root mounted as /sysroot.
CROSS="--triple $TRIPLE --sdk /sysroot -Xswiftc -sdk -Xswiftc /sysroot -Xswiftc -resource-dir -Xswiftc /sysroot/usr/libexec/swift/lib/swift \
  -Xswiftc -use-ld=lld -Xlinker --build-id=sha1"

# What the roots need beside their packages: the sysroot mount point, the arm64 root's own
# /sysroot, and cc, as update-alternatives would make it (an extracted root runs no package
# scripts): the text-hash fixtures are built with it.
link_roots() {
  mkdir -p "$AMD/sysroot"
  [ -L "$ARM/sysroot" ] || { rmdir "$ARM/sysroot" 2>/dev/null; ln -s / "$ARM/sysroot"; }
  [ -e "$ARM/usr/bin/cc" ] || ln -s gcc "$ARM/usr/bin/cc"
}

make_root() { # name arch variant packages
  local dir=$CACHE/$1 arch=$2 variant=$3 packages=$4 mirror
  [ "$(cat "$dir/.complete" 2>/dev/null)" = "$packages" ] && return 0
  if [ "$apt_updated" = 0 ]; then $SUDO apt-get update -qq || die "apt-get update failed"; apt_updated=1; fi
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no Debian mirror found in this machine's apt sources"
  rm -rf "$dir.tmp"
  mkdir -p "$CACHE" # mmdebstrap needs the target's parent directory
  say "making $1 (trixie, $arch, $variant: $packages)..."
  $SUDO mmdebstrap --quiet --variant="$variant" --architectures="$arch" --include="$packages" trixie "$dir.tmp" \
    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" \
    || die "mmdebstrap $1 failed"
  # An extracted root lacks what package scripts would make: the merged-/usr links and mount points.
  for d in lib bin sbin; do [ -e "$dir.tmp/$d" ] || ln -s "usr/$d" "$dir.tmp/$d"; done
  mkdir -p "$dir.tmp/proc" "$dir.tmp/sys" "$dir.tmp/dev" "$dir.tmp/tmp" "$dir.tmp/root" "$dir.tmp/src"
  chmod 1777 "$dir.tmp/tmp"
  [ -e "$dir.tmp/etc/passwd" ] || echo "root:x:0:0:root:/root:/bin/bash" > "$dir.tmp/etc/passwd"
  [ -e "$dir.tmp/etc/group" ] || echo "root:x:0:" > "$dir.tmp/etc/group"
  [ -e "$dir.tmp/usr/bin/sh" ] || ln -s dash "$dir.tmp/usr/bin/sh"
  mkdir -p "$dir.tmp/opt/python-arm64"
  echo "$packages" > "$dir.tmp/.complete"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
}

# Runs a command in a root: root, then the command as one string, run by bash -c; optionally the
# build directory mounted over /src/.build (default $BUILD, the arm64 one).
in_root() {
  local root=$1 cmd=$2 build=${3:-$BUILD} extra="" self=""
  [ "$root" = "$AMD" ] && [ -d "$ARM" ] && extra="mkdir -p '$AMD/sysroot'; mount --bind '$ARM' '$AMD/sysroot';"
  if [ "$root" = "$AMD_NATIVE" ]; then
    # The root a mount point of its own, so that in the chroot / is one: unshare --mount-proc (the
    # crash harness's pid1-abort row) makes / private first, which fails on a plain directory.
    self="mount --bind '$root' '$root'"
    [ -d "$CACHE/python-amd64" ] && extra="mkdir -p '$root/opt/python-amd64'; mount --bind '$CACHE/python-amd64' '$root/opt/python-amd64';"
  fi
  [ "$root" = "$ARM" ] && [ -d "$CACHE/python-arm64" ] && extra="mount --bind '$CACHE/python-arm64' '$ARM/opt/python-arm64';"
  mkdir -p "$build"
  $SUDO unshare --mount --propagation private bash -c "
    set -e
    ${self:-:}
    mount --bind '$REPO' '$root/src'
    mkdir -p '$REPO/.build' && mount --bind '$build' '$root/src/.build'
    mount -t proc proc '$root/proc'
    mount --rbind /dev '$root/dev'
    mount --rbind /sys '$root/sys'
    mount -t tmpfs -o mode=1777 tmpfs '$root/tmp'
    $extra
    exec chroot '$root' env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb \
      CI=\"\${CI:-}\" bash -c 'cd /src && $cmd'
  "
}

# The schema tests' Python package (opentelemetry-proto, with protobuf's wheel for the root's
# architecture) for a root's Python, from PyPI, kept in the cache: directory, root, pip platform.
python_deps() {
  local dir=$1 root=$2 platform=$3 py
  [ -e "$dir/.complete" ] && return 0
  py=$(ls "$root/usr/bin" | sed -n 's/^python\(3\.[0-9]*\)$/\1/p' | head -1)
  rm -rf "$dir" && mkdir -p "$dir"
  if python3 -m pip install -q --disable-pip-version-check --target "$dir" --platform "$platform" \
       --python-version "$py" --only-binary=:all: opentelemetry-proto >/dev/null 2>&1; then
    touch "$dir/.complete"
  fi
}

# Tests that cannot run under Swift 6.0.3 at all (they end the test process), by Swift Testing
# function name, with the reason; listed in the table, on arm64 and on amd64 alike.
declare -A TEST_SKIP=(
  [newestValidSlotWinsAndATornSlotIsIgnored]="Swift 6.0.3 limit: at -Onone this test function gets a 27 MiB stack frame (the aft_run_file C struct's fields mutated in place; 34 KB with 6.3.1), which overflows its thread's stack and ends the test process. Runs on x86-64 with Swift 6.3.1"
  [blocksCountOnlyWithTheirCheck]="Swift 6.0.3 limit: a 14 MiB stack frame at -Onone, as above. Runs on x86-64 with Swift 6.3.1"
  [otlpJSON]="Swift 6.0.3 limit: FoundationEssentials' JSONDecoder traps (a try! at JSONDecoder.swift:1193) on a string with an unescaped control character instead of throwing, ending the test process; fixed in later Foundation. Affects JSON decoding in the CLI and harnesses on 6.0 toolchains, not the app. Runs on x86-64 with Swift 6.3.1"
)
skip_args=""
for name in "${!TEST_SKIP[@]}"; do skip_args+="${skip_args:+|}$name"; done
# One pattern (a second --skip replaces the first), and with a --filter: Swift Testing 6.0
# applies --skip only together with one.
[ -n "$skip_args" ] && skip_args=" --filter . --skip \"$skip_args\""

# Known limits: a test or harness row of this name that fails is listed with the reason instead
# of counted as a failure (filled by the arm64 run for the emulator; empty for native runs).
declare -A LIMIT_REASON=()
limit_reason() { # name -> reason, or nothing
  local name=$1 key
  for key in "${!LIMIT_REASON[@]}"; do
    [[ "$name" == *"$key"* ]] && { echo "${LIMIT_REASON[$key]}"; return; }
  done
}
skip_row() { ROWS+=("$(printf '%-22s %-6s %s' "$1" "LIMIT" "$2")"); SKIPPED=$((SKIPPED + 1)); }

# The rows of a test run from its log (Swift Testing's per-test lines: "✔ Test name passed",
# "✘ Test name failed", "➜ Test name skipped"): row prefix, log, exit status, time text.
test_rows() {
  local prefix=$1 log=$2 test_status=$3 test_time=$4 t_pass t_total t_fail=0 name reason issue
  local -a failed_tests
  t_pass=$(grep -v '^✔ Test run with' "$log" | grep -c '^✔ Test .* passed after')
  t_total=$(sed -n 's/^[✔✘] Test run with \([0-9]*\) tests\{0,1\} .*/\1/p' "$log" | tail -1)
  mapfile -t failed_tests < <(grep -v '^✘ Test run with' "$log" | sed -n 's/^✘ Test \(.*\) failed after.*/\1/p')
  for name in "${failed_tests[@]}"; do
    reason=$(limit_reason "$name")
    if [ -n "$reason" ]; then skip_row "${prefix}test $name" "$reason"
    else
      issue=$(grep -m1 -F "✘ Test $name recorded an issue" "$log" | sed 's/.*recorded an issue//' | cut -c1-160)
      row "${prefix}test $name" FAIL "$issue"
      t_fail=$((t_fail + 1))
    fi
  done
  PASSED=$((PASSED + t_pass))
  for name in "${!TEST_SKIP[@]}"; do skip_row "${prefix}test $name" "${TEST_SKIP[$name]}"; done
  if [ -z "$t_total" ]; then
    row "${prefix}test suite" FAIL "no closing line (exit $test_status; the test process died?): $(tail -3 "$log" | tr '\n' ' ' | cut -c1-200)"
  else
    ROWS+=("$(printf '%-22s %-6s %s' "${prefix}test suite" "$([ "$t_fail" = 0 ] && echo ok || echo FAIL)" \
      "$t_total tests run: $t_pass passed, $t_fail failed, ${#TEST_SKIP[@]} not run (limits above); $test_time")")
  fi
}

# A harness's closing line `N passed, N failed` from its log: sets line, hp and hf. (Each number
# is taken as a whole: a greedy `.*` before an optional digit run would leave it empty.)
harness_line() {
  line=$(grep -E '^[A-Za-z-]*:? ?[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
  hp=$(grep -oE '[0-9]+ passed' <<<"$line" | cut -d' ' -f1); hf=$(grep -oE '[0-9]+ failed' <<<"$line" | cut -d' ' -f1)
}

# The limit reasons of a crash-harness row, when each of its failure lines (the harness's
# `Failures:` block) matches a key of the named table (failure text -> reason): log, scenario,
# table name. Prints nothing when a failure is not one.
check_limits() {
  local log=$1 scenario=$2 line key found reasons=""
  local -n limits=$3
  while IFS= read -r line; do
    found=""
    for key in "${!limits[@]}"; do
      [[ "$line" == *"$key"* ]] && found=$key
    done
    [ -n "$found" ] || return 0
    [[ "$reasons" == *"${limits[$found]}"* ]] || reasons+="${reasons:+; }$found: ${limits[$found]}"
  done < <(sed -n '/^Failures:/,/^$/p' "$log" | grep -F "  $scenario: ")
  echo "$reasons"
}

# Runs the three harnesses in a root and adds their rows, each harness's table printed: root,
# build directory, binary directory, row prefix, log name suffix, heading, how times are taken
# (emulated or native), the table of harness rows that are limits (row name -> reason), the
# table of crash-harness failure lines that are (for check_limits).
run_harnesses() {
  local root=$1 build=$2 bin=$3 prefix=$4 suffix=$5 heading=$6 how=$7 checks=$9
  local harness log t took status key scenario reasons
  local -n row_limits=$8
  for harness in crash-harness hang-harness exit-harness async-harness; do
    log=$CACHE/$harness$suffix.log
    t=$(now)
    # The roots have no minidump readers (no pip, no Python 3.10 for the toolchain's LLDB):
    # the crash harness's minidump column is checked by the host's own run (scripts/harness.sh).
    in_root "$root" "SWIFT_BACKTRACE=enable=no AFTERMATH_NO_READERS=1 timeout 1800 $bin/$harness" "$build" >"$log" 2>&1
    status=$?
    took=$(elapsed "$t")
    say ""; say "== $harness ($heading, $took $how)"; cat "$log"
    harness_line "$log"
    if [ -z "$line" ]; then
      row "$prefix$harness" FAIL "no closing line (exit $status, $took $how)"; continue
    fi
    for key in "${!row_limits[@]}"; do
      if grep -qE "^${key}[[:space:]:|].*FAIL" "$log"; then
        skip_row "$prefix$harness $key" "${row_limits[$key]}"
        hf=$((hf - 1))
      fi
    done
    if [ "$harness" = crash-harness ]; then
      while read -r scenario; do
        [ -n "${row_limits[$scenario]:-}" ] && continue
        reasons=$(check_limits "$log" "$scenario" "$checks")
        [ -n "$reasons" ] || continue
        skip_row "$prefix$harness $scenario" "$reasons"
        hf=$((hf - 1))
      done < <(sed -n 's/^\([a-z0-9-]*\) *|.*| *FAIL$/\1/p' "$log")
    fi
    PASSED=$((PASSED + hp)); FAILED=$((FAILED + hf))
    ROWS+=("$(printf '%-22s %-6s %s' "$prefix$harness" "$([ "$hf" = 0 ] && echo ok || echo FAIL)" "its own line: $line; $hf failed that are not limits ($took $how)")")
  done
}
