#!/usr/bin/env bash
# Compiles CSignalShim's C for aarch64 (syntax and warnings only: there is no arm64 machine
# here), so the #if __aarch64__ paths (ucontext registers, brk traps) keep building.
# libunwind's arm64 headers are not installable without multiarch; a stand-in declares the
# few functions CSignalShim calls, with the same signatures.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d /usr/aarch64-linux-gnu/include ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libc6-dev-arm64-cross >/dev/null
fi
stand_in=$(mktemp -d)
trap 'rm -rf "$stand_in"' EXIT
cat > "$stand_in/libunwind.h" <<'H'
#include <ucontext.h>
typedef ucontext_t unw_context_t;
typedef struct { unsigned long opaque[256]; } unw_cursor_t;
typedef unsigned long unw_word_t;
#define UNW_REG_IP 30
#define UNW_INIT_SIGNAL_FRAME 1
int unw_init_local2(unw_cursor_t *, unw_context_t *, int);
int unw_init_local(unw_cursor_t *, unw_context_t *);
int unw_getcontext(unw_context_t *);
int unw_get_reg(unw_cursor_t *, int, unw_word_t *);
int unw_step(unw_cursor_t *);
int unw_backtrace(void **, int);
H
status=0
for f in CSignalShim/*.c; do
  if ! clang --target=aarch64-linux-gnu --sysroot=/usr/aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include \
      -I"$stand_in" -ICSignalShim/include -ICSignalShim -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -fsyntax-only "$f"; then
    status=1
  fi
done
[ "$status" = 0 ] && echo "arm64: CSignalShim compiles cleanly ($(ls CSignalShim/*.c | wc -l) files)"
exit "$status"
