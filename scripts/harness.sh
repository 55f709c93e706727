#!/usr/bin/env bash
# Sets up, builds, then runs the crash harness: real child processes fault, the next launch
# reports them, and a table shows what was checked. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build --product crash-harness
.build/debug/crash-harness "$@"
