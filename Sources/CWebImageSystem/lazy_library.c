// The loader behind CWILazyLibrary.h: each library opened once, on the first
// call of any of its functions (or by CWI_lazy_load), each function looked up once.
#include "CWILazyLibrary.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

// Sonames: libvips.so.42 for every 8.x release (Plugins/CVipsOps/lazy_vips.c
// checks the headers' major version), libcurl.so.4 since curl 7.16.
static const char *const cwi_files[2] = {
    [CWI_LAZY_LIBRARY_VIPS] = "libvips.so.42",
    [CWI_LAZY_LIBRARY_CURL] = "libcurl.so.4",
};
static void *cwi_handles[2];
static char cwi_errors[2][512];

static void cwi_open(int library) {
    // RTLD_LAZY | RTLD_GLOBAL: as if linked (the modules libvips loads itself
    // link libvips and find it either way).
    cwi_handles[library] = dlopen(cwi_files[library], RTLD_LAZY | RTLD_GLOBAL);
    if (cwi_handles[library] == NULL) {
        const char *reason = dlerror();
        snprintf(cwi_errors[library], sizeof cwi_errors[library], "%s", reason != NULL ? reason : "cannot be loaded");
    }
}
static void cwi_open_vips(void) { cwi_open(CWI_LAZY_LIBRARY_VIPS); }
static void cwi_open_curl(void) { cwi_open(CWI_LAZY_LIBRARY_CURL); }
static void (*const cwi_openers[2])(void) = { cwi_open_vips, cwi_open_curl };
static pthread_once_t cwi_once[2] = { PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT };

const char *CWI_lazy_load(int library) {
    if (library < 0 || library > CWI_LAZY_LIBRARY_CURL) { return "no such library"; }
    pthread_once(&cwi_once[library], cwi_openers[library]);
    return cwi_handles[library] != NULL ? NULL : cwi_errors[library];
}

// As CWI_LAZY_FUNCTION lays out each function's descriptor.
struct cwi_lazy_symbol {
    void *target;      // the stub until resolved, then the library's function
    const char *name;
    long library;
};

// Called by cwi_lazy_entry on a function's first call (and by any thread that
// calls it before the slot is written; each finds the same address).
__attribute__((visibility("hidden"))) void *cwi_lazy_resolve(struct cwi_lazy_symbol *symbol) {
    const char *failure = CWI_lazy_load((int) symbol->library);
    void *function = failure == NULL ? dlsym(cwi_handles[symbol->library], symbol->name) : NULL;
    if (function == NULL) {
        // Nothing to return to: the caller expects the function to run. Modules
        // call CWI_lazy_load first and fail with an error instead, so this is
        // reached only by a call before that, or a function the library lacks.
        fprintf(stderr, "webimage: %s: %s\n", symbol->name,
                failure != NULL ? failure : "not in the library loaded for it");
        abort();
    }
    __atomic_store_n(&symbol->target, function, __ATOMIC_RELEASE);
    return function;
}
