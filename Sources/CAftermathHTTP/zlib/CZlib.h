/* The system's zlib (Debian: zlib1g-dev), as a system library target of the package. */
#include <zlib.h>
