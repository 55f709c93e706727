#!/usr/bin/env bash
# Sets up, then runs the test suite (Swift Testing).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build --build-tests
swift test --skip-build "$@"
