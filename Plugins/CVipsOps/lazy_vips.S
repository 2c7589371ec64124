// libvips and libavif loaded on their first call, not at every start
// (CWILazyLibrary.h; x86-64 Linux, where Package.swift defines
// CVIPSOPS_LAZY_LOADING and links neither). Their file names are in lazy_vips.c.
#if defined(CVIPSOPS_LAZY_LOADING)
#if !defined(__x86_64__) || !defined(__linux__)
#error "lazy loading has x86-64 Linux code only; Package.swift links the libraries directly elsewhere"
#endif
#include <CWILazyLibrary.h>
#define LAZY(SYM) CWI_LAZY_FUNCTION(CWI_LAZY_LIBRARY_VIPS, cwi_lazy_file_vips, SYM)
#include "lazy_vips_symbols.h"
#undef LAZY
#define LAZY(SYM) CWI_LAZY_FUNCTION(CWI_LAZY_LIBRARY_AVIF, cwi_lazy_file_avif, SYM)
#include "lazy_avif_symbols.h"
#endif

#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack, "", @progbits
#endif
