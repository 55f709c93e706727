/* The system's libunwind (Debian: libunwind-dev), as a system library target of the package. */
#include <libunwind.h>
