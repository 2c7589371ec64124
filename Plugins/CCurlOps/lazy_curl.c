// libcurl loaded on its first call (lazy_curl.S, CWILazyLibrary.h): its file name.
#include "CCurlOps.h"

#if defined(CCURLOPS_LAZY_CURL)
#include <curl/curlver.h>
#include <CWILazyLibrary.h>
#if LIBCURL_VERSION_MAJOR < 7 || LIBCURL_VERSION_MAJOR > 8
#error "add the soname of this libcurl (libcurl.so.4 is curl 7.16 to 8's)"
#endif
__attribute__((visibility("hidden"))) const char cwi_lazy_file_curl[] = "libcurl.so.4";
const char *CCurl_load_library(void) { return CWI_lazy_load(CWI_LAZY_LIBRARY_CURL, cwi_lazy_file_curl); }
#else
const char *CCurl_load_library(void) { return NULL; }
#endif
