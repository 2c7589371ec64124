// XXH3-64 for the baseline of the architecture (SSE2 on x86-64): the fallback
// of xxh3.c, in a file of its own because each build of xxhash.h needs its own
// translation unit.
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__) && defined(__clang__)
#define XXH_INLINE_ALL
#include <xxhash.h>
uint64_t CWI_xxh3_sse2(const void *bytes, size_t count);
uint64_t CWI_xxh3_sse2(const void *bytes, size_t count) { return XXH3_64bits(bytes, count); }
#endif
