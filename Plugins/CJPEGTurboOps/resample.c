// The direct thumbnail path's pixel work (see include/CJPEGTurboOps.h, part 3):
// one separable Lanczos-3 resample, the EXIF orientation, a crop. The resample's
// row loop is C in GCC/Clang vector types, built twice: SSE2 for any x86-64 (and
// plain C elsewhere), and AVX2 with FMA, chosen at run time where the processor
// has them. The vertical pass runs along whole rows, so its inner loop is a
// multiply-add over contiguous floats.
#include "CJPEGTurboOps.h"
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/// Lanczos-3 weights at `x0, x0 + step, x0 + 2 step...` (`count` of them), in
/// units of source pixels divided by the stretch. sin(pi x) and sin(pi x / 3)
/// advance by the angle-addition rule, so a kernel row costs four sin/cos calls
/// instead of two sin calls per tap (libm's sin was 1.2 % of a thumbnail).
static void CJT_lanczos3_row(double x0, double step, int count, double *w) {
    double a = M_PI * x0, da = M_PI * step;
    double sa = sin(a), ca = cos(a), sda = sin(da), cda = cos(da);
    double b = a / 3, db = da / 3;
    double sb = sin(b), cb = cos(b), sdb = sin(db), cdb = cos(db);
    for (int t = 0; t < count; t++) {
        double x = x0 + t * step;
        if (x > -3 && x < 3) {
            // sinc(x) sinc(x / 3) = sin(pi x) sin(pi x / 3) / ((pi x) (pi x / 3)), 1 at 0.
            double px = M_PI * x;
            w[t] = fabs(px) < 1e-9 ? 1 : (sa * sb) / (px * px / 3);
        } else {
            w[t] = 0;
        }
        double nsa = sa * cda + ca * sda, nca = ca * cda - sa * sda;
        double nsb = sb * cdb + cb * sdb, ncb = cb * cdb - sb * sdb;
        sa = nsa; ca = nca; sb = nsb; cb = ncb;
    }
}

/// Per output index: `taps` source indices (clamped to the edge, which repeats
/// edge pixels as libvips' reduce does) and their weights, normalised to 1.
typedef struct {
    int taps;
    int *index;
    float *weight;
} CJT_kernel;

static int CJT_kernel_make(CJT_kernel *kernel, int in, int out) {
    double scale = (double) in / out;
    // Reducing: the kernel widens with the factor, so it filters out what the
    // smaller grid cannot hold. Enlarging: plain Lanczos-3 interpolation.
    double stretch = scale > 1 ? scale : 1;
    double support = 3 * stretch;
    // The weights are non-zero on the open interval (centre - support, centre +
    // support): fewer than 2 support + 1 whole source indices, so ceil(2 support)
    // taps hold every one (11 at a 1.75 reduction, where 2 ceil(support) + 1 held
    // 13, two of them always zero: 15 % of both passes' multiply-adds).
    int taps = (int) ceil(2 * support);
    kernel->taps = taps;
    kernel->index = malloc(sizeof(int) * (size_t) taps * (size_t) out);
    kernel->weight = malloc(sizeof(float) * (size_t) taps * (size_t) out);
    double *scratch = malloc(sizeof(double) * (size_t) taps);
    if (!kernel->index || !kernel->weight || !scratch) { free(scratch); return -1; }
    for (int i = 0; i < out; i++) {
        // Pixel centres line up: output i covers source [i * scale, (i + 1) * scale).
        double centre = (i + 0.5) * scale - 0.5;
        int first = (int) floor(centre - support) + 1;
        double sum = 0;
        double *w = scratch;
        CJT_lanczos3_row((first - centre) / stretch, 1 / stretch, taps, w);
        for (int t = 0; t < taps; t++) sum += w[t];
        for (int t = 0; t < taps; t++) {
            int j = first + t;
            kernel->index[(size_t) i * (size_t) taps + (size_t) t] = j < 0 ? 0 : (j >= in ? in - 1 : j);
            kernel->weight[(size_t) i * (size_t) taps + (size_t) t] = (float) (sum != 0 ? w[t] / sum : (t == taps / 2));
        }
    }
    free(scratch);
    return 0;
}

static void CJT_kernel_free(CJT_kernel *kernel) {
    free(kernel->index);
    free(kernel->weight);
}

static inline unsigned char CJT_clamp_byte(float value) {
    // Integer comparisons compile to conditional moves: no branch per sample.
    int rounded = (int) (value + 0.5f);
    rounded = rounded < 0 ? 0 : rounded;
    return (unsigned char) (rounded > 255 ? 255 : rounded);
}

/// Four floats in one SSE register (GCC and Clang vector extensions): one RGB
/// pixel plus a lane that is computed and never stored.
typedef float CJT_v4 __attribute__((vector_size(16)));

/// Source rows converted to float once each: the windows of successive output
/// rows overlap and move down, so a ring of `slots` rows holds every window.
/// Points `lines` at output row `y`'s source rows.
static inline void CJT_window(const unsigned char *src, size_t row, const CJT_kernel *vertical, int y,
                              float *ring, int *ringRow, int slots, const float **lines) {
    const int *rows = vertical->index + (size_t) y * (size_t) vertical->taps;
    for (int t = 0; t < vertical->taps; t++) {
        int r = rows[t];
        float *line = ring + row * (size_t) (r % slots);
        if (ringRow[r % slots] != r) {
            const unsigned char *in = src + row * (size_t) r;
            for (size_t k = 0; k < row; k++) line[k] = (float) in[k];
            ringRow[r % slots] = r;
        }
        lines[t] = line;
    }
}

/// Vertical pass: the output row is a weighted sum of whole source rows,
/// sixteen floats at a time held in registers across the taps; four
/// independent sums of 4 floats, since one chain of adds would wait on each
/// add's latency, tap after tap.
static inline __attribute__((always_inline)) void CJT_vertical_row(const float **lines, const float *rowWeight, int taps, size_t from, size_t row, float *out) {
    size_t k = from;
    for (; k + 16 <= row; k += 16) {
        CJT_v4 a = {0, 0, 0, 0}, b = a, c = a, d = a;
        for (int t = 0; t < taps; t++) {
            CJT_v4 p, q, r, u;
            const float *line = lines[t] + k;
            memcpy(&p, line, sizeof p);
            memcpy(&q, line + 4, sizeof q);
            memcpy(&r, line + 8, sizeof r);
            memcpy(&u, line + 12, sizeof u);
            float w = rowWeight[t];
            a += p * w; b += q * w; c += r * w; d += u * w;
        }
        memcpy(out + k, &a, sizeof a);
        memcpy(out + k + 4, &b, sizeof b);
        memcpy(out + k + 8, &c, sizeof c);
        memcpy(out + k + 12, &d, sizeof d);
    }
    for (; k < row; k++) {
        float sum = 0;
        for (int t = 0; t < taps; t++) sum += rowWeight[t] * lines[t][k];
        out[k] = sum;
    }
}

/// Eight floats: one AVX register where the target has them (two SSE ones where not).
typedef float CJT_v8 __attribute__((vector_size(32)));

/// ``CJT_vertical_row`` 32 floats at a time, for a target with AVX2 and FMA:
/// half the vector operations, and the multiply-add fused into one.
static inline __attribute__((always_inline)) void CJT_vertical_row8(const float **lines, const float *rowWeight, int taps, size_t row, float *out) {
    size_t k = 0;
    for (; k + 32 <= row; k += 32) {
        CJT_v8 a = {0, 0, 0, 0, 0, 0, 0, 0}, b = a, c = a, d = a;
        for (int t = 0; t < taps; t++) {
            CJT_v8 p, q, r, u;
            const float *line = lines[t] + k;
            memcpy(&p, line, sizeof p);
            memcpy(&q, line + 8, sizeof q);
            memcpy(&r, line + 16, sizeof r);
            memcpy(&u, line + 24, sizeof u);
            float w = rowWeight[t];
            a += p * w; b += q * w; c += r * w; d += u * w;
        }
        memcpy(out + k, &a, sizeof a);
        memcpy(out + k + 8, &b, sizeof b);
        memcpy(out + k + 16, &c, sizeof c);
        memcpy(out + k + 24, &d, sizeof d);
    }
    // The rest (fewer than 32 floats) as the 4-wide pass does it.
    CJT_vertical_row(lines, rowWeight, taps, k, row, out);
}

/// Horizontal pass of one row, from floats to bytes. RGB takes one vector per
/// pixel, with two sums (even and odd taps) to halve the chain of dependent adds.
static inline __attribute__((always_inline)) void CJT_horizontal_row(const float *in, const CJT_kernel *horizontal, int bands, int dw, unsigned char *row_out) {
    int taps = horizontal->taps;
    for (int x = 0; x < dw; x++) {
        const int *index = horizontal->index + (size_t) x * (size_t) taps;
        const float *weight = horizontal->weight + (size_t) x * (size_t) taps;
        if (bands == 3) {
            CJT_v4 even = {0, 0, 0, 0}, odd = {0, 0, 0, 0};
            int t = 0;
            for (; t + 2 <= taps; t += 2) {
                CJT_v4 p, q;
                memcpy(&p, in + (size_t) index[t] * 3, sizeof p);
                memcpy(&q, in + (size_t) index[t + 1] * 3, sizeof q);
                even += p * weight[t];
                odd += q * weight[t + 1];
            }
            if (t < taps) {
                CJT_v4 p;
                memcpy(&p, in + (size_t) index[t] * 3, sizeof p);
                even += p * weight[t];
            }
            CJT_v4 sum = even + odd;
            row_out[x * 3] = CJT_clamp_byte(sum[0]);
            row_out[x * 3 + 1] = CJT_clamp_byte(sum[1]);
            row_out[x * 3 + 2] = CJT_clamp_byte(sum[2]);
        } else {
            for (int c = 0; c < bands; c++) {
                float sum = 0;
                for (int t = 0; t < taps; t++) sum += weight[t] * in[(size_t) index[t] * (size_t) bands + (size_t) c];
                row_out[x * bands + c] = CJT_clamp_byte(sum);
            }
        }
    }
}

/// What both passes need, for the row loop below.
typedef struct {
    const unsigned char *src;
    size_t row;
    int bands, dw, dh;
    const CJT_kernel *vertical, *horizontal;
    float *ring;
    int *ringRow;
    int slots;
    const float **lines;
    float *middle;
    unsigned char *dst;
    /// For the AVX2 loop's RGB horizontal pass (NULL otherwise): per output
    /// pixel, its taps in pairs, each pair's two source offsets in floats (3 per
    /// pixel; past the last tap, the last again) and eight weights (the first tap's
    /// four times, then the second's, or zeros).
    int pairs;
    const int *pairIndex;
    const float *pairWeight;
} CJT_passes;

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__)) && !defined(CJT_NO_AVX2)
#include <immintrin.h>
#define CJT_HAVE_AVX2_LOOP 1

/// The horizontal pass of an RGB row with AVX2: two taps per fused multiply-add
/// (each pixel's three floats and the next one's first, in one half of the
/// register), two sums to overlap the adds. One pixel's four sums (the fourth
/// lane unused), before rounding.
__attribute__((target("avx2,fma"))) static inline __m128 CJT_horizontal_pixel3_avx2(const float *in, const CJT_passes *p, int x) {
    int pairs = p->pairs;
    const int *index = p->pairIndex + (size_t) x * (size_t) pairs * 2;
    const float *weight = p->pairWeight + (size_t) x * (size_t) pairs * 8;
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    int k = 0;
    for (; k + 2 <= pairs; k += 2) {
        __m256 u = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(in + (size_t) index[2 * k])),
                                        _mm_loadu_ps(in + (size_t) index[2 * k + 1]), 1);
        __m256 v = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(in + (size_t) index[2 * k + 2])),
                                        _mm_loadu_ps(in + (size_t) index[2 * k + 3]), 1);
        a = _mm256_fmadd_ps(u, _mm256_loadu_ps(weight + (size_t) k * 8), a);
        b = _mm256_fmadd_ps(v, _mm256_loadu_ps(weight + (size_t) k * 8 + 8), b);
    }
    if (k < pairs) {
        __m256 u = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(in + (size_t) index[2 * k])),
                                        _mm_loadu_ps(in + (size_t) index[2 * k + 1]), 1);
        a = _mm256_fmadd_ps(u, _mm256_loadu_ps(weight + (size_t) k * 8), a);
    }
    __m256 sum8 = _mm256_add_ps(a, b);
    return _mm_add_ps(_mm256_castps256_ps128(sum8), _mm256_extractf128_ps(sum8, 1));
}

/// The horizontal pass of an RGB row with AVX2: the sums of four pixels at a
/// time rounded to nearest, saturated to 0...255 by the packs and stored as 12
/// bytes in one go, then the last few one at a time. The same arithmetic per
/// pixel either way: only the packing is shared (it was a third of the pass,
/// done for each pixel).
__attribute__((target("avx2,fma"))) static void CJT_horizontal_row3_avx2(const float *in, const CJT_passes *p, unsigned char *row_out) {
    // Bytes 0-2, 4-6, 8-10 and 12-14 of the packed sums: four pixels' RGB.
    const __m128i compact = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    int x = 0;
    for (; x + 4 <= p->dw; x += 4) {
        __m128i first = _mm_packs_epi32(_mm_cvtps_epi32(CJT_horizontal_pixel3_avx2(in, p, x)),
                                        _mm_cvtps_epi32(CJT_horizontal_pixel3_avx2(in, p, x + 1)));
        __m128i second = _mm_packs_epi32(_mm_cvtps_epi32(CJT_horizontal_pixel3_avx2(in, p, x + 2)),
                                         _mm_cvtps_epi32(CJT_horizontal_pixel3_avx2(in, p, x + 3)));
        __m128i bytes = _mm_shuffle_epi8(_mm_packus_epi16(first, second), compact);
        unsigned char twelve[16];
        _mm_storeu_si128((__m128i *) twelve, bytes);
        memcpy(row_out + (size_t) x * 3, twelve, 12);
    }
    for (; x < p->dw; x++) {
        __m128i words = _mm_packs_epi32(_mm_cvtps_epi32(CJT_horizontal_pixel3_avx2(in, p, x)), _mm_setzero_si128());
        int bytes = _mm_cvtsi128_si32(_mm_packus_epi16(words, words));
        row_out[x * 3] = (unsigned char) bytes;
        row_out[x * 3 + 1] = (unsigned char) (bytes >> 8);
        row_out[x * 3 + 2] = (unsigned char) (bytes >> 16);
    }
}
#endif

/// Every output row: its source rows as floats, the vertical pass, the horizontal.
static inline __attribute__((always_inline)) void CJT_rows(const CJT_passes *p, int wide) {
    for (int y = 0; y < p->dh; y++) {
        CJT_window(p->src, p->row, p->vertical, y, p->ring, p->ringRow, p->slots, p->lines);
        const float *weights = p->vertical->weight + (size_t) y * (size_t) p->vertical->taps;
        if (wide) CJT_vertical_row8(p->lines, weights, p->vertical->taps, p->row, p->middle);
        else CJT_vertical_row(p->lines, weights, p->vertical->taps, 0, p->row, p->middle);
        unsigned char *out = p->dst + (size_t) y * (size_t) p->dw * (size_t) p->bands;
#ifdef CJT_HAVE_AVX2_LOOP
        if (wide && p->pairWeight) { CJT_horizontal_row3_avx2(p->middle, p, out); continue; }
#endif
        CJT_horizontal_row(p->middle, p->horizontal, p->bands, p->dw, out);
    }
}

/// The row loop compiled twice: for any x86-64 (SSE2), and for a processor with
/// AVX2 and FMA (every x86 server since 2013), chosen when the resample runs.
/// The second does the same sums in 8-wide registers with fused multiply-adds,
/// so its results may differ from the first's in the last bit of a float, which
/// the rounding to bytes hides but for rare ties.
static void CJT_rows_sse(const CJT_passes *p) { CJT_rows(p, 0); }

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__)) && !defined(CJT_NO_AVX2)
__attribute__((target("avx2,fma"))) static void CJT_rows_avx2(const CJT_passes *p) { CJT_rows(p, 1); }
static int CJT_has_avx2_fma(void) {
    // -1 until first asked; threads that ask at once all store the same answer.
    static int known = -1;
    int value = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (value < 0) {
        __builtin_cpu_init();
        value = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        __atomic_store_n(&known, value, __ATOMIC_RELAXED);
    }
    return value;
}
#else
static void CJT_rows_avx2(const CJT_passes *p) { CJT_rows(p, 0); }
static int CJT_has_avx2_fma(void) { return 0; }
#endif

int CJT_resample(const unsigned char *src, int sw, int sh, int bands, unsigned char *dst, int dw, int dh) {
    return CJT_resample_variant(src, sw, sh, bands, dst, dw, dh, CJT_has_avx2_fma());
}

int CJT_resample_variant(const unsigned char *src, int sw, int sh, int bands, unsigned char *dst, int dw, int dh, int wide) {
    if (wide && !CJT_has_avx2_fma()) return -2;
    if (sw < 1 || sh < 1 || dw < 1 || dh < 1 || bands < 1 || bands > 4) return -1;
    size_t row = (size_t) sw * (size_t) bands;
    CJT_kernel vertical = {0}, horizontal = {0};
    int status = -1;
    float *middle = NULL, *ring = NULL;
    int *ringRow = NULL, *pairIndex = NULL;
    float *pairWeight = NULL;
    const float **lines = NULL;
    if (CJT_kernel_make(&vertical, sh, dh) || CJT_kernel_make(&horizontal, sw, dw)) goto done;
    // One row between the passes, not the whole vertically resampled image (a
    // 505 x 562 RGB decode to a 256 px box needed 1.3 MB of floats): each output
    // row is resampled vertically, then horizontally at once. One spare float at
    // the end: the horizontal pass loads 4 floats per RGB pixel.
    middle = malloc(sizeof(float) * (row + 1));
    int slots = vertical.taps;
    ring = malloc(sizeof(float) * row * (size_t) slots);
    ringRow = malloc(sizeof(int) * (size_t) slots);
    lines = malloc(sizeof(float *) * (size_t) slots);
    if (!middle || !ring || !ringRow || !lines) goto done;
    for (int i = 0; i < slots; i++) ringRow[i] = -1;
    middle[row] = 0;
    CJT_passes passes = {src, row, bands, dw, dh, &vertical, &horizontal, ring, ringRow, slots, lines, middle, dst, 0, NULL, NULL};
    if (wide && bands == 3) {
        int taps = horizontal.taps, pairs = (taps + 1) / 2;
        pairIndex = malloc(sizeof(int) * (size_t) dw * (size_t) pairs * 2);
        pairWeight = malloc(sizeof(float) * (size_t) dw * (size_t) pairs * 8);
        if (!pairIndex || !pairWeight) goto done;
        for (int x = 0; x < dw; x++) {
            const int *index = horizontal.index + (size_t) x * (size_t) taps;
            const float *weight = horizontal.weight + (size_t) x * (size_t) taps;
            for (int t = 0; t < pairs * 2; t++) {
                size_t at = (size_t) x * (size_t) pairs * 2 + (size_t) t;
                pairIndex[at] = 3 * (t < taps ? index[t] : index[taps - 1]);
                float w = t < taps ? weight[t] : 0;
                for (int lane = 0; lane < 4; lane++) pairWeight[at * 4 + (size_t) lane] = w;
            }
        }
        passes.pairs = pairs;
        passes.pairIndex = pairIndex;
        passes.pairWeight = pairWeight;
    }
    if (wide) CJT_rows_avx2(&passes);
    else CJT_rows_sse(&passes);
    status = 0;
done:
    free(middle);
    free(ring);
    free(ringRow);
    free(lines);
    free(pairIndex);
    free(pairWeight);
    CJT_kernel_free(&vertical);
    CJT_kernel_free(&horizontal);
    return status;
}

/// The stored pixel shown at (x, y) once upright is src[sy][sx], with sx and sy
/// each x or y, counted from either end: a step of one output pixel moves the
/// source by `step`, along its row (orientations 1 to 4) or its column (5 to 8).
void CJT_orient(const unsigned char *src, int w, int h, int bands, int orientation, unsigned char *dst) {
    int swap = orientation >= 5 && orientation <= 8;
    int ow = swap ? h : w, oh = swap ? w : h;
    ptrdiff_t pixel = bands, line = (ptrdiff_t) w * bands;
    for (int y = 0; y < oh; y++) {
        // Where output row y starts in the source, and the step per output pixel.
        ptrdiff_t start, step;
        switch (orientation) {
        case 2: start = (ptrdiff_t) y * line + (ptrdiff_t) (w - 1) * pixel; step = -pixel; break;
        case 3: start = (ptrdiff_t) (h - 1 - y) * line + (ptrdiff_t) (w - 1) * pixel; step = -pixel; break;
        case 4: start = (ptrdiff_t) (h - 1 - y) * line; step = pixel; break;
        case 5: start = (ptrdiff_t) y * pixel; step = line; break;
        case 6: start = (ptrdiff_t) (h - 1) * line + (ptrdiff_t) y * pixel; step = -line; break;
        case 7: start = (ptrdiff_t) (h - 1) * line + (ptrdiff_t) (w - 1 - y) * pixel; step = -line; break;
        case 8: start = (ptrdiff_t) (w - 1 - y) * pixel; step = line; break;
        default: start = (ptrdiff_t) y * line; step = pixel; break;
        }
        const unsigned char *in = src + start;
        unsigned char *out = dst + (size_t) y * (size_t) ow * (size_t) bands;
        // A fixed pixel size lets the copy compile to moves, not a memcpy call each.
        switch (bands) {
        case 1: for (int x = 0; x < ow; x++, in += step) out[x] = in[0]; break;
        case 3: for (int x = 0; x < ow; x++, in += step) { out[3 * x] = in[0]; out[3 * x + 1] = in[1]; out[3 * x + 2] = in[2]; } break;
        case 4: for (int x = 0; x < ow; x++, in += step) memcpy(out + 4 * x, in, 4); break;
        default: for (int x = 0; x < ow; x++, in += step) memcpy(out + (size_t) x * (size_t) bands, in, (size_t) bands); break;
        }
    }
}

void CJT_crop(const unsigned char *src, int w, int bands, int left, int top, int cw, int ch, unsigned char *dst) {
    size_t line = (size_t) cw * (size_t) bands;
    for (int y = 0; y < ch; y++)
        memcpy(dst + (size_t) y * line, src + (((size_t) (top + y) * (size_t) w) + (size_t) left) * (size_t) bands, line);
}
