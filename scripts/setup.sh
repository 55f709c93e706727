#!/usr/bin/env bash
# Installs what Aftermath needs beyond the Swift toolchain, on Debian: libunwind-dev (the crash
# handler's unwinder), libcurl4-openssl-dev and zlib1g-dev (the OTLP/HTTP exporter's transport
# and gzip), binutils (nm, for the async-signal-safety test; objcopy and strip for the
# symbolication tests), strace (a tracer for the hang harness), libdw-dev and libdebuginfod-dev
# (the `aftermath` command's DWARF and debuginfod client), debuginfod (a server the
# symbolication tests start), and the official OTLP protobuf definitions for the schema tests.
set -euo pipefail
need_apt=0
for pkg in libunwind-dev zlib1g-dev libcurl4-openssl-dev binutils strace libdw-dev libdebuginfod-dev debuginfod; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt=1
done
if [ "$need_apt" = 1 ] || [ "${CI:-}" = true ]; then
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq libunwind-dev zlib1g-dev libcurl4-openssl-dev binutils strace libdw-dev libdebuginfod-dev debuginfod >/dev/null
fi
if ! python3 -c "import opentelemetry.proto.collector.logs.v1.logs_service_pb2" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check opentelemetry-proto
fi
