// libvips and libavif loaded on their first call (lazy_vips.S, which lists both,
// CWILazyLibrary.h): their file names, from their headers' versions.
#include "CVipsOps.h"

#if defined(CVIPSOPS_LAZY_LOADING)
#include <avif/avif.h>
#include <stdio.h>
#include <CWILazyLibrary.h>

#if VIPS_MAJOR_VERSION != 8
#error "add the soname of this libvips (libvips.so.42 is libvips 8's)"
#endif
__attribute__((visibility("hidden"))) const char cwi_lazy_file_vips[] = "libvips.so.42";

// libavif's soname follows its ABI, not its version: 14 for 0.10, 15 for 0.11,
// 16 from 1.0 on.
#if AVIF_VERSION_MAJOR == 1
__attribute__((visibility("hidden"))) const char cwi_lazy_file_avif[] = "libavif.so.16";
#elif AVIF_VERSION_MAJOR == 0 && AVIF_VERSION_MINOR == 11
__attribute__((visibility("hidden"))) const char cwi_lazy_file_avif[] = "libavif.so.15";
#elif AVIF_VERSION_MAJOR == 0 && AVIF_VERSION_MINOR == 10
__attribute__((visibility("hidden"))) const char cwi_lazy_file_avif[] = "libavif.so.14";
#else
#error "add the soname of this libavif"
#endif

const char *CVips_load_library(void) { return CWI_lazy_load(CWI_LAZY_LIBRARY_VIPS, cwi_lazy_file_vips); }

const char *CAVIF_load_library(void) {
    const char *failure = CWI_lazy_load(CWI_LAZY_LIBRARY_AVIF, cwi_lazy_file_avif);
    if (failure != NULL) { return failure; }
    // The file was chosen by the headers' version: a library of another ABI
    // under that name is refused before any of its functions runs on our structs.
    static char mismatch[160];
    static int checked;  // 1: same ABI, 2: not
    if (__atomic_load_n(&checked, __ATOMIC_ACQUIRE) == 0) {
        int major = -1, minor = -1;
        const char *version = avifVersion();
        int same = sscanf(version, "%d.%d", &major, &minor) == 2 && major == AVIF_VERSION_MAJOR
                   && (major >= 1 || minor == AVIF_VERSION_MINOR);
        if (!same) {
            snprintf(mismatch, sizeof mismatch, "%s is libavif %s, not the %d.%d this was built with",
                     cwi_lazy_file_avif, version, AVIF_VERSION_MAJOR, AVIF_VERSION_MINOR);
        }
        __atomic_store_n(&checked, same ? 1 : 2, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&checked, __ATOMIC_ACQUIRE) == 1 ? NULL : mismatch;
}
#else
const char *CVips_load_library(void) { return NULL; }
const char *CAVIF_load_library(void) { return NULL; }
#endif
