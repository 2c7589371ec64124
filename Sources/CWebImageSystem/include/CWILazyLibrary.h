#ifndef CWILAZYLIBRARY_H
#define CWILAZYLIBRARY_H
// Shared libraries loaded on their first call instead of at every start
// (x86-64 Linux; Package.swift, `librariesLoadedLazily`). Linked the usual way, libvips
// brings about a hundred libraries (ImageMagick, poppler, libheif, GDAL...) and
// libcurl thirty, which the dynamic loader maps and relocates at every start of
// every process, whether or not it ever decodes a PNG or downloads a URL: about
// 30 ms of CPU and 25 MiB resident (docs/performance.md, "How the tool is linked").
//
// A target that calls such a library lists the functions it calls in a header of
// LAZY lines and includes it from a .S file after defining LAZY with
// CWI_LAZY_FUNCTION (Plugins/CVipsOps/lazy_vips.S). Each function is then ours: a
// jump through a slot that first holds a stub, which saves the argument
// registers, loads the library once (dlopen), looks the function up (dlsym),
// stores it in the slot and jumps to it with the registers as the caller left
// them, so variadic calls forward too. The load fills every slot of the library
// at once, so the dynamic loader's lock is taken while the library loads, never
// by a later first call (a thread in dlopen of another library holds that lock
// until it is done). Later calls take one indirect jump, as a call through the
// PLT does. The functions are hidden: nothing outside the
// binary binds to them, so the library's calls among its own functions never
// come back here. Functions only: a variable cannot be forwarded this way.

/// The libraries, by number. Each one's file name (its soname, which depends on
/// its version) is a string its own C file defines from the library's headers:
/// `cwi_lazy_file_vips` (Plugins/CVipsOps/lazy_vips.c), `cwi_lazy_file_avif`
/// (lazy_vips.c too) and `cwi_lazy_file_curl` (Plugins/CCurlOps/lazy_curl.c).
#define CWI_LAZY_LIBRARY_VIPS 0
#define CWI_LAZY_LIBRARY_CURL 1
#define CWI_LAZY_LIBRARY_AVIF 2
#define CWI_LAZY_LIBRARIES 3

#if defined(__ASSEMBLER__)

/// One function `SYM` of library number `LIBRARY`, whose file name is the string
/// `FILE`: its descriptor (slot, name, library, file; lazy_library.c reads it as
/// `struct cwi_lazy_symbol`, and every library's descriptors as one array, the
/// section `cwi_lazy_descriptors`), its name, the jump and the first call's stub,
/// which passes the descriptor in %r11 to cwi_lazy_entry (lazy_library.S).
#define CWI_LAZY_FUNCTION(LIBRARY, FILE, SYM) \
    .pushsection cwi_lazy_descriptors, "aw", @progbits; .p2align 3; \
    cwi_lazy_desc_##SYM: .quad cwi_lazy_stub_##SYM; .quad cwi_lazy_name_##SYM; .quad LIBRARY; .quad FILE; \
    .popsection; \
    .pushsection .rodata.cwi_lazy, "a", @progbits; \
    cwi_lazy_name_##SYM: .asciz #SYM; \
    .popsection; \
    .text; .globl SYM; .hidden SYM; .type SYM, @function; .p2align 4; \
    SYM: endbr64; jmp *cwi_lazy_desc_##SYM(%rip); \
    cwi_lazy_stub_##SYM: endbr64; leaq cwi_lazy_desc_##SYM(%rip), %r11; jmp cwi_lazy_entry; \
    .size SYM, . - SYM;

#else

/// Loads library `library` (a `CWI_LAZY_LIBRARY_` number) from `file` once, if
/// it is not loaded yet: NULL when it is loaded, else the dynamic loader's
/// reason. A module calls it before the library's first function, to fail with
/// an error rather than in the stub, which can only abort.
const char *CWI_lazy_load(int library, const char *file);

#endif
#endif
