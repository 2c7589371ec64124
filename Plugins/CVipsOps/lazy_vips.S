// libvips loaded on its first call, not at every start (CWILazyLibrary.h; x86-64
// Linux, where Package.swift defines CVIPSOPS_LAZY_VIPS and does not link it).
#if defined(CVIPSOPS_LAZY_VIPS)
#if !defined(__x86_64__) || !defined(__linux__)
#error "lazy loading has x86-64 Linux code only; Package.swift links libvips directly elsewhere"
#endif
#include <CWILazyLibrary.h>
#define LAZY(SYM) CWI_LAZY_FUNCTION(CWI_LAZY_LIBRARY_VIPS, SYM)
#include "lazy_vips_symbols.h"
#endif

#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack, "", @progbits
#endif
