# scripts/arm64.sh --async (sourced by it): async-harness, built for arm64 with Debian's Swift
# 6.0.3 at -Onone and at -O (cross, in the full run's trixie roots, made or reused) and run under
# qemu-user. The Swift async callers on arm64 (context register x22) in both builds, in minutes
# rather than the full run's hour.

t_all=$(now)
need_packages qemu-user-static mmdebstrap
setup_binfmt
if [ "$BINFMT" != 1 ]; then
  say "SKIPPED: the async rows need binfmt_misc (they start arm64 child processes): $binfmt_reason"
  say "0 passed, 0 failed, 1 skipped"; CLOSED=1
  exit 0
fi
make_root trixie-amd64 amd64 apt "$AMD_PACKAGES"
make_root trixie-arm64 arm64 extract "$ARM_PACKAGES"
link_roots
declare -A ASYNC_LIMIT=(
  [hang-pool]="under qemu-user /proc/<tid>/status SigBlk holds host signal numbers, so the pool's capture finds its signal blocked and reads the workers from /proc/<tid>/syscall: no registers, no thread pointer, so their tasks' async callers are not read. Checked on x86-64 (async-harness hang-pool)"
)
for config in debug release; do
  t=$(now)
  if ! in_root "$AMD" "swift build -c $config --product async-harness $CROSS && swift build -c $config --product aftermath $CROSS" \
    >"$CACHE/async-build-$config.log" 2>&1; then
    grep -E "error:" "$CACHE/async-build-$config.log" | sort -u | head -20
    row "async-harness $config" FAIL "the $config build for $TRIPLE failed; log: $CACHE/async-build-$config.log"
    continue
  fi
  log=$CACHE/async-harness-$config.log
  in_root "$ARM" "SWIFT_BACKTRACE=enable=no timeout 1200 .build/$TRIPLE/$config/async-harness" >"$log" 2>&1
  status=$?
  say ""; say "== async-harness ($config, arm64, qemu-user, $(elapsed "$t"))"; cat "$log"
  harness_line "$log"
  if [ -z "$line" ]; then
    row "async-harness $config" FAIL "no closing line (exit $status)"; continue
  fi
  for key in "${!ASYNC_LIMIT[@]}"; do
    if grep -qE "^${key}[[:space:]:|].*FAIL" "$log"; then
      skip_row "async-harness $config $key" "${ASYNC_LIMIT[$key]}"
      hf=$((hf - 1))
    fi
  done
  PASSED=$((PASSED + hp)); FAILED=$((FAILED + hf))
  ROWS+=("$(printf '%-22s %-6s %s' "async-harness $config" "$([ "$hf" = 0 ] && echo ok || echo FAIL)" "its own line: $line; $hf failed that are not limits")")
done
print_table "arm64 (--async): async-harness at -Onone and -O, Swift 6.0.3 cross-built, run under qemu-user"
say "times: total $(elapsed "$t_all"); runs are emulated"
[ "$FAILED" = 0 ]
