// Whether a font family is installed, asked of fontconfig (see include/CVipsOps.h).
// Loaded with dlopen: libvips' text rendering (Pango) loads libfontconfig.so.1 on
// every machine libvips runs on, while its headers and link name come only with
// a -dev package.
#include "CVipsOps.h"
#include <dlfcn.h>
#include <pthread.h>
#include <strings.h>

typedef void *(*CVips_pattern_create)(void);
typedef int (*CVips_pattern_add_string)(void *, const char *, const unsigned char *);
typedef int (*CVips_config_substitute)(void *, void *, int);
typedef void (*CVips_default_substitute)(void *);
typedef void *(*CVips_font_match)(void *, void *, int *);
typedef int (*CVips_pattern_get_string)(const void *, const char *, int, unsigned char **);
typedef void (*CVips_pattern_destroy)(void *);

static pthread_mutex_t CVips_fonts_lock = PTHREAD_MUTEX_INITIALIZER;

int CVips_font_family_installed(const char *family) {
    void *library = dlopen("libfontconfig.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) return -1;
    CVips_pattern_create create = (CVips_pattern_create) dlsym(library, "FcPatternCreate");
    CVips_pattern_add_string add = (CVips_pattern_add_string) dlsym(library, "FcPatternAddString");
    CVips_config_substitute substitute = (CVips_config_substitute) dlsym(library, "FcConfigSubstitute");
    CVips_default_substitute defaults = (CVips_default_substitute) dlsym(library, "FcDefaultSubstitute");
    CVips_font_match match = (CVips_font_match) dlsym(library, "FcFontMatch");
    CVips_pattern_get_string get = (CVips_pattern_get_string) dlsym(library, "FcPatternGetString");
    CVips_pattern_destroy destroy = (CVips_pattern_destroy) dlsym(library, "FcPatternDestroy");
    int installed = -1;
    if (create && add && substitute && defaults && match && get && destroy) {
        pthread_mutex_lock(&CVips_fonts_lock);
        // The family as a value, not parsed as a pattern name (where "Name-12" is a size).
        void *pattern = create();
        if (pattern && add(pattern, "family", (const unsigned char *) family)) {
            substitute(NULL, pattern, 0 /* FcMatchPattern */);
            defaults(pattern);
            int result = 0;
            void *found = match(NULL, pattern, &result);
            if (found) {
                installed = 0;
                unsigned char *name = NULL;
                // FcResultMatch is 0; a font may have several family names (localised ones).
                for (int index = 0; get(found, "family", index, &name) == 0; index++) {
                    if (name && strcasecmp((const char *) name, family) == 0) { installed = 1; break; }
                }
                destroy(found);
            }
        }
        if (pattern) destroy(pattern);
        pthread_mutex_unlock(&CVips_fonts_lock);
    }
    dlclose(library);
    return installed;
}
