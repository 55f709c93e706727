#!/usr/bin/env bash
# Installs what Aftermath needs beyond the Swift toolchain, on Debian: libunwind-dev (the crash
# handler's unwinder), binutils (nm, for the async-signal-safety test), strace (a tracer for
# the hang harness), and the official OTLP protobuf definitions for the schema tests.
set -euo pipefail
need_apt=0
for pkg in libunwind-dev binutils strace; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt=1
done
if [ "$need_apt" = 1 ] || [ "${CI:-}" = true ]; then
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq libunwind-dev binutils strace >/dev/null
fi
if ! python3 -c "import opentelemetry.proto.collector.logs.v1.logs_service_pb2" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check opentelemetry-proto
fi
