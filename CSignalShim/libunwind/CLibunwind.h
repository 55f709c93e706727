/* The system's libunwind headers (Debian: libunwind-dev), as a system library target of the
 * package. The library itself is loaded at its first use (dlopen), never linked. */
#include <libunwind.h>
