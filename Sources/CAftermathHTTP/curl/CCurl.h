/* The system's libcurl (Debian: libcurl4-openssl-dev), as a system library target of the package. */
#include <curl/curl.h>
