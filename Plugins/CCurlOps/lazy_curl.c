// libcurl loaded on its first call (lazy_curl.S, CWILazyLibrary.h).
#include "CCurlOps.h"

#if defined(CCURLOPS_LAZY_CURL)
#include <curl/curlver.h>
#include <CWILazyLibrary.h>
#if LIBCURL_VERSION_MAJOR < 7 || LIBCURL_VERSION_MAJOR > 8
#error "CWI_LAZY_LIBRARY_CURL loads libcurl.so.4, the soname of curl 7.16 to 8"
#endif
const char *CCurl_load_library(void) { return CWI_lazy_load(CWI_LAZY_LIBRARY_CURL); }
#else
const char *CCurl_load_library(void) { return NULL; }
#endif
