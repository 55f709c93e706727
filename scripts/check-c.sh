#!/usr/bin/env bash
# Compiles every C file of CSignalShim, Harness/CFaults, Harness/Detector, Harness/Peer (without
# sentry-native), Sources/CSymbolication and Sources/CAftermathHTTP with -std=c11 -Wall -Wextra -Werror
# (the package itself sets no warning flags: a product's target with unsafe flags cannot be
# depended on by version). Run by CI; the arm64 compile is part of scripts/arm64.sh --quick.
set -euo pipefail
cd "$(dirname "$0")/.."
cc=${CC:-clang}
command -v "$cc" >/dev/null || cc=gcc
status=0
count=0
for f in $(find CSignalShim -name '*.c' | sort) Harness/CFaults/*.c Harness/Detector/*.c Harness/Peer/*.c Harness/Peer/CPeer/*.c Sources/CSymbolication/*.c Sources/CAftermathHTTP/*.c; do
  count=$((count + 1))
  if ! "$cc" -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE $(pkg-config --cflags libunwind 2>/dev/null) \
      -ICSignalShim/include -ICSignalShim/internal -IHarness/CFaults/include -IHarness/Peer/CPeer/include -ISources/CSymbolication/include -ISources/CAftermathHTTP/include -fsyntax-only "$f"; then
    echo "check-c: $f has warnings or errors" >&2
    status=1
  fi
done
[ "$status" = 0 ] && echo "check-c: $count C files compile cleanly with -std=c11 -Wall -Wextra -Werror ($cc)"
exit "$status"
