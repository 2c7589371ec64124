// The loader behind CWILazyLibrary.h: each library opened once, on the first
// call of any of its functions (or by CWI_lazy_load), and all its functions
// looked up then.
#include "CWILazyLibrary.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static struct {
    pthread_mutex_t lock;
    int state;  // 0: not tried, 1: loaded, 2: failed (read with acquire once set)
    void *handle;
    char error[512];
} cwi_libraries[CWI_LAZY_LIBRARIES] = {
    { PTHREAD_MUTEX_INITIALIZER, 0, NULL, "" },
    { PTHREAD_MUTEX_INITIALIZER, 0, NULL, "" },
    { PTHREAD_MUTEX_INITIALIZER, 0, NULL, "" },
};

// As CWI_LAZY_FUNCTION lays out each function's descriptor.
struct cwi_lazy_symbol {
    void *target;      // the stub until resolved, then the library's function
    const char *name;
    long library;
    const char *file;
};

// Every descriptor of every library, in the order linked: the linker names the
// bounds of a section whose name is an identifier.
extern struct cwi_lazy_symbol __start_cwi_lazy_descriptors[] __attribute__((weak, visibility("hidden")));
extern struct cwi_lazy_symbol __stop_cwi_lazy_descriptors[] __attribute__((weak, visibility("hidden")));

// Fills the slots of `library`'s functions, or none: the name of the first
// function the file lacks (another library under the expected name), else NULL.
// A library that lacks one is refused whole, so that no stub is left to abort.
static const char *cwi_resolve_all(int library, void *handle) {
    for (struct cwi_lazy_symbol *symbol = __start_cwi_lazy_descriptors; symbol < __stop_cwi_lazy_descriptors; symbol++) {
        if (symbol->library == library && dlsym(handle, symbol->name) == NULL) { return symbol->name; }
    }
    for (struct cwi_lazy_symbol *symbol = __start_cwi_lazy_descriptors; symbol < __stop_cwi_lazy_descriptors; symbol++) {
        if (symbol->library == library) { __atomic_store_n(&symbol->target, dlsym(handle, symbol->name), __ATOMIC_RELEASE); }
    }
    return NULL;
}

const char *CWI_lazy_load(int library, const char *file) {
    if (library < 0 || library >= CWI_LAZY_LIBRARIES) { return "no such library"; }
    if (__atomic_load_n(&cwi_libraries[library].state, __ATOMIC_ACQUIRE) == 0) {
        pthread_mutex_lock(&cwi_libraries[library].lock);
        if (cwi_libraries[library].state == 0) {
            // RTLD_LAZY | RTLD_GLOBAL: as if linked (the modules libvips loads
            // itself link libvips and find it either way).
            void *handle = dlopen(file, RTLD_LAZY | RTLD_GLOBAL);
            if (handle == NULL) {
                const char *reason = dlerror();
                snprintf(cwi_libraries[library].error, sizeof cwi_libraries[library].error, "%s",
                         reason != NULL ? reason : "cannot be loaded");
            }
            const char *missing = handle != NULL ? cwi_resolve_all(library, handle) : NULL;
            if (missing != NULL) {
                // Left loaded (its initialisers have run; unloading is not safe), never called.
                snprintf(cwi_libraries[library].error, sizeof cwi_libraries[library].error,
                         "%s has no function %s: not the library this program was built for", file, missing);
                handle = NULL;
            }
            cwi_libraries[library].handle = handle;
            __atomic_store_n(&cwi_libraries[library].state, handle != NULL ? 1 : 2, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&cwi_libraries[library].lock);
    }
    return __atomic_load_n(&cwi_libraries[library].state, __ATOMIC_ACQUIRE) == 1 ? NULL : cwi_libraries[library].error;
}

// Called by cwi_lazy_entry on a function's first call (and by any thread that
// calls it before the slot is written; each finds the same address).
__attribute__((visibility("hidden"))) void *cwi_lazy_resolve(struct cwi_lazy_symbol *symbol) {
    const char *failure = CWI_lazy_load((int) symbol->library, symbol->file);
    void *function = failure == NULL ? dlsym(cwi_libraries[symbol->library].handle, symbol->name) : NULL;
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
