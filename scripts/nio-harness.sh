#!/usr/bin/env bash
# The SwiftNIO rows of the hang harness (Harness/NIO/drive.py): builds a real SwiftNIO HTTP
# server with Aftermath (Harness/NIO) without network, from copies of the vendored SwiftNIO
# sources (../shared/deps, or AFTERMATH_NIO_SOURCES) in .build/nio-deps, then stalls and crashes
# it through HTTP and checks the records it wrote. Arguments: --release first, for the server
# built optimized (as it ships: merged and inlined functions, a trap's reason in its debug
# info), then row names, to run only those.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
configuration=debug
if [ "${1:-}" = --release ]; then
    configuration=release
    shift
fi
sources=${AFTERMATH_NIO_SOURCES:-$root/../shared/deps}
if [ ! -d "$sources/swift-nio" ]; then
    echo "nio-harness: SKIPPED: no SwiftNIO sources in $sources (set AFTERMATH_NIO_SOURCES to a" \
        "folder holding swift-nio, swift-atomics, swift-collections and swift-system)"
    exit 0
fi
scratch=$root/.build/nio-deps
mkdir -p "$scratch"
for d in swift-nio swift-atomics swift-collections swift-system; do
    [ -d "$scratch/$d" ] || cp -r "$sources/$d" "$scratch/"
done
swift build --product aftermath
export AFTERMATH_ROOT=$root AFTERMATH_NIO_DEPS=$scratch SWIFTCI_USE_LOCAL_DEPS=1
swift build -c "$configuration" --package-path Harness/NIO --disable-automatic-resolution
bin=$(swift build -c "$configuration" --package-path Harness/NIO --disable-automatic-resolution --show-bin-path)
# The crash row reads its minidump with rust-minidump's minidump-stackwalk and LLDB.
readers=$(bash scripts/minidump-readers.sh) || true
AFTERMATH_STACKWALK=$(sed -n 's/^minidump-stackwalk=//p' <<<"$readers")
AFTERMATH_LLDB=$(sed -n 's/^lldb=//p' <<<"$readers")
export AFTERMATH_STACKWALK AFTERMATH_LLDB
python3 Harness/NIO/drive.py "$bin/NIOServer" .build/debug/aftermath "$@"
