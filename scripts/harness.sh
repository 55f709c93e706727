#!/usr/bin/env bash
# Sets up, builds, then runs the crash harness: real child processes fault, the next launch
# reports them, and a table shows what was checked. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build --product crash-harness
swift build --product aftermath  # aftermath show, for the thread rows
# The handler detector: preloaded into every crashing child, it fails a row when the crash
# handler calls malloc, free, a mutex or dl_iterate_phdr on the signal stack.
mkdir -p .build
cc=${CC:-cc}
"$cc" -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC -o .build/handler-detector.so \
  Harness/Detector/handler_detector.c -ldl
.build/debug/crash-harness --detector .build/handler-detector.so "$@"
