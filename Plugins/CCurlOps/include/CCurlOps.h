#ifndef CCURLOPS_H
#define CCURLOPS_H
// libcurl loaded on its first call where the package can (lazy_curl.S).

/// Loads libcurl where the package calls it through lazy_curl.S (x86-64 Linux),
/// once: NULL when it is loaded, else the dynamic loader's reason. Elsewhere
/// libcurl is linked and this returns NULL.
const char *CCurl_load_library(void);

#endif
