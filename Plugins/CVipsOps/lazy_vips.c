// libvips loaded on its first call (lazy_vips.S, CWILazyLibrary.h).
#include "CVipsOps.h"

#if defined(CVIPSOPS_LAZY_VIPS)
#include <CWILazyLibrary.h>
#if VIPS_MAJOR_VERSION != 8
#error "CWI_LAZY_LIBRARY_VIPS loads libvips.so.42, the soname of libvips 8"
#endif
const char *CVips_load_library(void) { return CWI_lazy_load(CWI_LAZY_LIBRARY_VIPS); }
#else
const char *CVips_load_library(void) { return NULL; }
#endif
