#!/usr/bin/env bash
# The check a new user does: a package outside this repository depends on Aftermath by URL and
# version (a tagged clone), builds, starts Aftermath and crashes once; its next launch must
# report the crash. Also prints what the minimal app links (shared libraries and their size).
#   scripts/consumer-check.sh            by URL and version (the real check; CI runs it)
#   scripts/consumer-check.sh --path DIR by path, for comparing with another checkout
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/aftermath-consumer.XXXXXX)
trap 'rm -rf "$work"' EXIT
mode=url
if [ "${1:-}" = "--path" ]; then mode=path; repo=$(cd "$2" && pwd); fi

if [ "$mode" = url ]; then
  # A clone of the committed main, tagged as a release, reached by a file:// URL as any
  # remote repository would be.
  git clone -q --no-local "$repo" "$work/aftermath"
  git -C "$work/aftermath" tag -l | xargs -r git -C "$work/aftermath" tag -d >/dev/null
  git -C "$work/aftermath" tag 0.1.0
  dependency=".package(url: \"file://$work/aftermath\", from: \"0.1.0\")"
  identity=aftermath
else
  dependency=".package(path: \"$repo\")"
  identity=$(basename "$repo" | tr '[:upper:]' '[:lower:]')
fi

mkdir -p "$work/shop/Sources/Shop"
cat > "$work/shop/Package.swift" <<SWIFT
// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "Shop",
    dependencies: [$dependency],
    targets: [.executableTarget(name: "Shop", dependencies: [.product(name: "Aftermath", package: "$identity")])]
)
SWIFT
cat > "$work/shop/Sources/Shop/main.swift" <<'SWIFT'
import Aftermath
import Foundation

let arguments = CommandLine.arguments
let directory = arguments[2]
var configuration = Aftermath.Configuration(
    serviceName: "shop", serviceVersion: "4.12.0",
    exporter: FileExporter(directory: directory + "/outbox"),
    reportsDirectory: directory + "/reports", deliverPendingReportsSynchronously: true)
configuration.hangHeartbeat = .off
do {
    try Aftermath.start(configuration)
} catch {
    print("start failed: \(error)")
    exit(3)
}
if arguments[1] == "crash" {
    let pointer = UnsafeMutablePointer<Int>(bitPattern: 8)!
    pointer.pointee = 42
}
print("delivered")
SWIFT

cd "$work/shop"
swift build -q 2>&1 | tail -20
exe=$(swift build --show-bin-path)/Shop
set +e
SWIFT_BACKTRACE=enable=no "$exe" crash "$work/data" >/dev/null 2>&1
status=$?
set -e
"$exe" next "$work/data" >/dev/null
libs=$(ldd "$exe" | awk '$3 ~ /^\// {print $3}' | sort -u)
count=$(echo "$libs" | wc -l)
bytes=$(echo "$libs" | xargs -r stat -L -c %s | awk '{s += $1} END {print s}')
echo "consumer ($mode): shared libraries: $count, $((bytes / 1024)) KiB; FoundationNetworking linked: $(echo "$libs" | grep -c FoundationNetworking || true)"
# What Aftermath's buffers add to the app's file and its start: they are zero-initialized
# (.bss, no bytes on disk), so its initialized data stays small.
data_kib=$(size -A "$exe" | awk '$1 == ".data" {print int($2 / 1024)}')
echo "consumer ($mode): executable $(($(stat -c %s "$exe") / 1024)) KiB, initialized data (.data) $data_kib KiB"
if [ "${data_kib:-0}" -gt 512 ]; then
  echo "consumer ($mode): FAIL: .data is $data_kib KiB: a large buffer has an initializer (it belongs in .bss)"
  exit 1
fi
if [ "$status" != 139 ]; then
  echo "consumer ($mode): FAIL: the crash ended with status $status, expected 139 (SIGSEGV)"
  exit 1
fi
if grep -rqs '"app.crash"' "$work/data/outbox"; then
  echo "consumer ($mode): PASS: built by $([ "$mode" = url ] && echo 'URL and version' || echo path), crashed with SIGSEGV, the next launch reported app.crash"
else
  echo "consumer ($mode): FAIL: no app.crash record in the outbox"
  exit 1
fi
