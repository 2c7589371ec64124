// libcurl loaded on its first call, not at every start (CWILazyLibrary.h; x86-64
// Linux, where Package.swift defines CCURLOPS_LAZY_CURL and does not link it).
// Its file name is in lazy_curl.c.
#if defined(CCURLOPS_LAZY_CURL)
#if !defined(__x86_64__) || !defined(__linux__)
#error "lazy loading has x86-64 Linux code only; Package.swift links libcurl directly elsewhere"
#endif
#include <CWILazyLibrary.h>
#define LAZY(SYM) CWI_LAZY_FUNCTION(CWI_LAZY_LIBRARY_CURL, cwi_lazy_file_curl, SYM)
#include "lazy_curl_symbols.h"
#endif

#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack, "", @progbits
#endif
