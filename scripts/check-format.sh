#!/usr/bin/env bash
# Checks the formatting of every Swift file (swift-format, from the toolchain, .swift-format)
# and every C file (clang-format from Debian, .clang-format). Run by CI. To fix:
#   swift format -i -r Sources Harness Tests Package.swift (Harness/NIO: its Sources and Package.swift)
#   clang-format -i <the C files listed below>
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-format >/dev/null
fi
# Harness/NIO's .build is another package's build: its sources and manifest only.
harness=$(ls -d Harness/*/ | grep -v '^Harness/NIO/$')
swift format lint --strict -r Sources $harness Harness/NIO/Sources Harness/NIO/Package.swift Tests Package.swift
c_files=$( (find CSignalShim -path CSignalShim/libunwind -prune -o \( -name '*.c' -o -name '*.h' \) -print | sort; ls Harness/CFaults/*.c \
  Harness/CFaults/include/*.h Harness/Detector/*.c Harness/Peer/*.c Harness/Peer/CPeer/*.c Harness/Peer/CPeer/include/*.h Sources/*/*.c Sources/*/include/*.h scripts/arm64/*.c 2>/dev/null) |
  grep -v crc32_tables.h)
clang-format --dry-run --Werror $c_files
echo "check-format: Swift and C files are formatted ($(echo "$c_files" | wc -l) C files)"
