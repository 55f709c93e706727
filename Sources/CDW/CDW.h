// elfutils (Debian: libdw-dev, libdebuginfod-dev): libdwfl and libdw read DWARF, libdwelf the
// build id and .gnu_debuglink, libdebuginfod fetches debug files by build id. libstdc++'s
// __cxa_demangle demangles C++ names. Tools only: never linked into apps.
#include <elfutils/libdwfl.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/debuginfod.h>
#include <dwarf.h>
#include <gelf.h>
#include <stddef.h>

char *__cxa_demangle(const char *mangled_name, char *output_buffer, size_t *length, int *status);
