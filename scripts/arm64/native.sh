# The package built and run NATIVELY on x86-64 with the arm64 run's compiler, Debian's Swift 6.0.3
# (trixie's swiftlang, the package the trixie-amd64 root has), in a root of its own (sourced by scripts/arm64.sh: the full run's last step, and alone with
# --swift60-amd64): the test suite and the three harnesses at native speed, no emulator, so what
# differs from Swift 6.3.1 is told apart from what differs under qemu-user. The build goes to
# $CACHE/build-amd64, mounted over /src/.build, apart from the arm64 cross build in $CACHE/build.
# Tests 6.0.3 cannot run are those of TEST_SKIP (roots.sh); the exit tests are compiled out there
# (#if compiler(>=6.2)).

# The root it runs in, trixie-amd64-native: the compiler root's packages and what the tests and
# harnesses use beyond them: elfutils, libcurl and zlib headers, the C++ library the text-hash
# fixtures link, openssl (the HTTPS tests), script(1), strace (the hang harness's tracer row). A
# root of its own: libcurl4-openssl-dev brings pkg-config, and with it in trixie-amd64 the arm64
# cross build takes the amd64 root's include paths from the .pc files and fails.
AMD_NATIVE_PACKAGES="$AMD_PACKAGES,libstdc++-14-dev,libdw-dev,libdebuginfod-dev,debuginfod,libcurl4-openssl-dev,zlib1g-dev,bsdutils,procps,openssl,strace"

# No harness row is a limit natively.
declare -A NATIVE_ROW_LIMIT=()
# Failure lines of a crash-harness row that are Swift 6.0.3's, not Aftermath's: the row is listed
# with the reason instead of counted (failure text -> reason).
declare -A NATIVE_CHECK_LIMIT=(
  ["with Aftermath the child ended with SIGSYS, expected SIGSEGV"]="Swift 6.0.3 limit: the harness child runs with Swift's runtime backtracer enabled (swift bt column), and 6.0.3's backtracer reads the crashed process's memory with process_vm_readv, which this row's seccomp filter kills on: the child ends with SIGSYS after about 5 s, without Aftermath too; Aftermath's record is the expected SIGSEGV (SEGV_MAPERR), written before it chains. Passes with Swift 6.3.1 (crash-harness)"
)

native_amd64() {
  local t t_native test_status test_time version
  t_native=$(now)
  t=$(now)
  make_root trixie-amd64-native amd64 apt "$AMD_NATIVE_PACKAGES"
  python_deps "$CACHE/python-amd64" "$AMD_NATIVE" manylinux2014_x86_64
  say "amd64 root ready ($(elapsed "$t"))"
  version=$(in_root "$AMD_NATIVE" "swift --version 2>&1" "$AMD_BUILD" | sed -n 's/.*Swift version \([0-9.]*\).*/\1/p' | head -1)

  # 1. build everything for x86-64
  t=$(now)
  if in_root "$AMD_NATIVE" "nice -n 10 swift build --build-tests -Xlinker --build-id=sha1" "$AMD_BUILD" >"$CACHE/build-amd64.log" 2>&1; then
    row "amd64 build ($version)" PASS "library, CLI, harnesses, bench, tests, native ($(elapsed "$t"))"
  else
    grep -E "error:" "$CACHE/build-amd64.log" | sort -u | head -30
    row "amd64 build ($version)" FAIL "swift build --build-tests failed ($(elapsed "$t")); log: $CACHE/build-amd64.log"
    return 1
  fi

  # 2. the test suite (without the minidump readers, which the root lacks: see full.sh)
  t=$(now)
  in_root "$AMD_NATIVE" "PYTHONPATH=/opt/python-amd64 SWIFT_BACKTRACE=enable=no AFTERMATH_NO_READERS=1 timeout 1800 .build/debug/AftermathPackageTests.xctest --testing-library swift-testing$skip_args" \
    "$AMD_BUILD" >"$CACHE/tests-amd64.log" 2>&1
  test_status=$?
  test_time=$(elapsed "$t")
  test_rows "amd64 " "$CACHE/tests-amd64.log" "$test_status" "$test_time native"

  # 3. the three harnesses, each with its own table
  run_harnesses "$AMD_NATIVE" "$AMD_BUILD" .build/debug "amd64 " -amd64 "amd64, Swift $version" native \
    NATIVE_ROW_LIMIT NATIVE_CHECK_LIMIT
  say "times: native amd64 run $(elapsed "$t_native")"
}
