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
void CWI_xxh3_128_sse2(const void *bytes, size_t count, uint64_t seed, uint64_t *low, uint64_t *high);
void CWI_xxh3_128_sse2(const void *bytes, size_t count, uint64_t seed, uint64_t *low, uint64_t *high) {
    XXH128_hash_t hash = XXH3_128bits_withSeed(bytes, count, seed);
    *low = hash.low64;
    *high = hash.high64;
}
#endif
