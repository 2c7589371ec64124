// The DC decoder and the DC-only copy (see include/CJPEGTurboOps.h). A C target of its own, not a
// header of the system-library module, so that SwiftPM builds it as C (-O2 in
// release) and rebuilds it when it changes.
#include "CJPEGTurboOps.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/// Bits of lookahead in the Huffman lookup tables.
#define CJT_DC_LOOKAHEAD 11

typedef struct {
    int defined;
    unsigned char values[256];
    int32_t maxcode[18];
    int32_t offset[18];
    /// For codes of at most CJT_DC_LOOKAHEAD bits, indexed by the next that many
    /// bits: length << 8 | symbol; 0 for longer codes.
    uint16_t lookup[1 << CJT_DC_LOOKAHEAD];
} CJT_dc_huffman;

typedef struct {
    int id, h, v, quantTable;
    /// The quantiser of the DC coefficient, latched at the component's first scan
    /// (libjpeg does the same), or -1.
    int32_t q0;
    /// Blocks across and down in the array (whole MCUs), and those a scan of this
    /// component alone covers.
    size_t paddedWidth, paddedHeight, width, height;
    int16_t *coefficients;
    uint32_t predictor;
    /// The successive-approximation bit the DC is known down to; -1 before the first scan.
    int al;
} CJT_dc_component;

typedef struct {
    const unsigned char *p, *end;
    uint64_t buffer;
    int count;
    /// Zero bits made up after a marker ended the data; consuming them is an error.
    int fake;
    int failed;
} CJT_dc_bits;

/// As many whole bytes from `p` as fit beside `count` buffered bits (4 to 7
/// when fewer than 32 are), as one big-endian value in `taken`, when at least 8
/// bytes remain and none of those is 0xFF (no stuffing, no marker). Returns how
/// many, or 0: the caller then goes byte by byte.
static inline __attribute__((always_inline)) int CJT_take(const unsigned char *p, const unsigned char *end, int count, uint64_t *taken) {
    int n = (63 - count) >> 3;
    if (n <= 0 || end - p < 8) return 0;
    uint64_t word;
    memcpy(&word, p, 8);
    uint64_t value = __builtin_bswap64(word) >> (64 - 8 * n);
    uint64_t ones = 0x0101010101010101ull >> (64 - 8 * n);
    uint64_t inverted = ~value & (ones * 0xFF);  // 0xFF bytes become zero bytes
    if (((inverted - ones) & ~inverted & (ones << 7)) != 0) return 0;
    *taken = value;
    return n;
}

static inline void CJT_dc_fill(CJT_dc_bits *bits) {
    uint64_t taken;
    int n = bits->fake == 0 ? CJT_take(bits->p, bits->end, bits->count, &taken) : 0;
    if (n) {
        bits->buffer = bits->buffer << (8 * n) | taken;
        bits->p += n;
        bits->count += 8 * n;
        return;
    }
    while (bits->count <= 56) {
        unsigned int byte = 0;
        if (bits->fake == 0 && bits->p < bits->end) {
            byte = *bits->p;
            if (byte == 0xFF) {
                if (bits->p + 1 < bits->end && bits->p[1] == 0x00) {
                    bits->p += 2;
                } else {
                    byte = 0;  // a marker: the scan's data ends here
                    bits->fake += 8;
                }
            } else {
                bits->p++;
            }
        } else {
            bits->fake += 8;
        }
        bits->buffer = bits->buffer << 8 | byte;
        bits->count += 8;
    }
}

static inline __attribute__((always_inline)) uint32_t CJT_dc_get(CJT_dc_bits *bits, int n) {
    if (n == 0) return 0;
    if (bits->count < n) CJT_dc_fill(bits);
    if (bits->count - bits->fake < n) { bits->failed = 1; return 0; }
    uint32_t value = (uint32_t) (bits->buffer >> (bits->count - n)) & ((1u << n) - 1);
    bits->count -= n;
    return value;
}

static inline __attribute__((always_inline)) int CJT_dc_symbol(CJT_dc_bits *bits, const CJT_dc_huffman *table) {
    if (bits->count < CJT_DC_LOOKAHEAD) CJT_dc_fill(bits);
    unsigned int entry = table->lookup[(bits->buffer >> (bits->count - CJT_DC_LOOKAHEAD)) & ((1 << CJT_DC_LOOKAHEAD) - 1)];
    if (entry) {
        int length = (int) (entry >> 8);
        if (bits->count - bits->fake < length) { bits->failed = 1; return 0; }
        bits->count -= length;
        return (int) (entry & 255);
    }
    // A longer code: the next 16 bits, cut at each length until a canonical code fits.
    if (bits->count < 16) CJT_dc_fill(bits);
    int32_t next = (int32_t) ((bits->buffer >> (bits->count - 16)) & 0xFFFF), code = 0;
    int length = CJT_DC_LOOKAHEAD;
    do {
        if (++length > 16) { bits->failed = 1; return 0; }
        code = next >> (16 - length);
    } while (code > table->maxcode[length]);
    if (bits->count - bits->fake < length) { bits->failed = 1; return 0; }
    bits->count -= length;
    int index = table->offset[length] + code;
    if (index < 0 || index > 255) { bits->failed = 1; return 0; }
    return table->values[index];
}

/// Whether a DHT's 16 counts make a code libjpeg accepts: at each length, the
/// codes so far fit in that many bits with the all-ones code unused
/// (jpeg_make_d_derived_tbl, JPEG C.2).
static int CJT_huffman_counts_valid(const unsigned char *counts) {
    int32_t code = 0;
    for (int length = 1; length <= 16; length++) {
        code += counts[length - 1];
        if (counts[length - 1] && code >= (1 << length)) return 0;
        code <<= 1;
    }
    return 1;
}

/// Builds the canonical code from a DHT's 16 counts and its symbols (JPEG F.2.2.3).
static inline int CJT_dc_build(CJT_dc_huffman *table, const unsigned char *counts, const unsigned char *symbols, int total) {
    memset(table, 0, sizeof *table);
    memcpy(table->values, symbols, (size_t) total);
    int32_t code = 0, k = 0;
    for (int length = 1; length <= 16; length++) {
        int n = counts[length - 1];
        if (n) {
            table->offset[length] = k - code;
            code += n;
            k += n;
            table->maxcode[length] = code - 1;
            // libjpeg (jpeg_make_d_derived_tbl) refuses a length's last code being all ones.
            if (code >= (1 << length)) return -1;
        } else {
            table->maxcode[length] = -1;
        }
        if (n && length <= CJT_DC_LOOKAHEAD) {
            for (int32_t c = code - n; c < code; c++) {
                int32_t first = c << (CJT_DC_LOOKAHEAD - length), count = 1 << (CJT_DC_LOOKAHEAD - length);
                for (int32_t j = 0; j < count; j++)
                    table->lookup[first + j] = (uint16_t) (length << 8 | table->values[table->offset[length] + c]);
            }
        }
        code <<= 1;
    }
    table->maxcode[17] = INT32_MAX;
    table->defined = 1;
    return 0;
}

/// The tables of one component of a sequential scan. For each
/// CJT_DC_LOOKAHEAD-bit lookahead that starts with a whole code, `dc` holds the
/// DC difference's bits (code and magnitude) << 8 | magnitude size. `ac` holds
/// the AC coefficients, which are skipped, not stored: the first whole
/// coefficient's bits (code and magnitude) << 8 | the zigzag positions it
/// advances (the run plus one, 16 for ZRL, 64 for end-of-block) in the low 16
/// bits, and in the high 16 the same for it and the next coefficient together
/// when that one's code is inside the lookahead too (else the first's again):
/// two coefficients per lookup. A magnitude need not be inside the lookahead:
/// the scan keeps at least 32 bits buffered, and the codes here take at most
/// CJT_DC_LOOKAHEAD bits with at most 15 of magnitude after the last. The
/// flag CJT_LONG_CODE: a longer code, decoded by CJT_dc_symbol.
#define CJT_LONG_CODE 0x8000u
typedef struct {
    const CJT_dc_huffman *dcCodes;
    CJT_dc_huffman acCodes;
    uint16_t dc[1 << CJT_DC_LOOKAHEAD];
    uint32_t ac[1 << CJT_DC_LOOKAHEAD];
} CJT_sequential_table;

/// One AC lookup entry's coefficient: its bits << 8 | its advance, or 0 for a
/// code longer than the lookahead.
static inline unsigned int CJT_ac_single(const CJT_dc_huffman *codes, unsigned int index) {
    unsigned int entry = codes->lookup[index];
    if (!entry) return 0;
    int length = (int) (entry >> 8), symbol = (int) (entry & 255), run = symbol >> 4, size = symbol & 15;
    // libjpeg ends the block on a zero size with any run but 15.
    int advance = size ? run + 1 : run == 15 ? 16 : 64;
    return (unsigned int) ((length + size) << 8 | advance);
}

static int CJT_sequential_build(CJT_sequential_table *table, const CJT_dc_huffman *dcCodes, const unsigned char *acSpec, int acTotal) {
    if (CJT_dc_build(&table->acCodes, acSpec, acSpec + 16, acTotal) != 0) return -1;
    table->dcCodes = dcCodes;
    const unsigned int mask = (1u << CJT_DC_LOOKAHEAD) - 1;
    for (unsigned int index = 0; index <= mask; index++) {
        unsigned int entry = dcCodes->lookup[index];
        int length = (int) (entry >> 8), size = (int) (entry & 255);
        table->dc[index] = (uint16_t) (entry && size <= 15 ? (length + size) << 8 | size : CJT_LONG_CODE);
        unsigned int first = CJT_ac_single(&table->acCodes, index);
        if (!first) { table->ac[index] = CJT_LONG_CODE; continue; }
        unsigned int pair = first;
        int used = (int) (first >> 8), advance = (int) (first & 255);
        // A second coefficient after any but end-of-block, when its whole code
        // is in the bits of the lookahead left after the first (the bits
        // shifted in from below are zeros, so a code that reaches them is not known).
        if (advance < 64 && used < CJT_DC_LOOKAHEAD) {
            unsigned int next = (index << used) & mask, second = CJT_ac_single(&table->acCodes, next);
            int codeLength = (int) (table->acCodes.lookup[next] >> 8);
            if (second && codeLength <= CJT_DC_LOOKAHEAD - used)
                pair = (unsigned int) ((used + (int) (second >> 8)) << 8 | (advance + (int) (second & 255)));
        }
        table->ac[index] = pair << 16 | first;
    }
    return 0;
}

// The bit buffer of the sequential scan, in the locals `buffer` (left-aligned),
// `count` and `p` of the function using these, beside `bits` (right-aligned).
#define CJT_SAVE() (bits->buffer = count ? buffer >> (64 - count) : 0, bits->count = count, bits->p = p)
#define CJT_LOAD() (count = bits->count, buffer = count ? bits->buffer << (64 - count) : 0, p = bits->p)
#define CJT_PEEK() ((unsigned int) (buffer >> (64 - CJT_DC_LOOKAHEAD)))
#define CJT_DROP(n) (buffer <<= (n), count -= (n))
// At least 32 bits in the buffer: whole bytes at once, else byte by byte.
#define CJT_FILL() do { \
        if (count < 32) { \
            uint64_t taken; \
            int n = bits->fake == 0 ? CJT_take(p, bits->end, count, &taken) : 0; \
            if (n) { buffer |= taken << (64 - count - 8 * n); p += n; count += 8 * n; } \
            else { CJT_SAVE(); CJT_dc_fill(bits); CJT_LOAD(); } \
        } \
    } while (0)

/// One block of a sequential scan: its DC difference added to `predictor` and
/// stored, its AC codes decoded to be skipped. The caller's buffer is passed by
/// address and, inlined, stays in registers. Returns 0, or -1.
static inline __attribute__((always_inline)) int CJT_sequential_block(CJT_dc_bits *bits, const CJT_sequential_table *table, uint32_t *predictor,
                                                                      int16_t *coefficient, uint64_t *bufferp, int *countp, const unsigned char **pp) {
    uint64_t buffer = *bufferp;
    int count = *countp;
    const unsigned char *p = *pp;
    CJT_FILL();
    unsigned int entry = table->dc[CJT_PEEK()];
    int size;
    uint32_t raw;
    if (!(entry & CJT_LONG_CODE)) {
        int used = (int) (entry >> 8);
        size = (int) (entry & 15);
        raw = (uint32_t) (buffer >> (64 - used)) & ((1u << size) - 1);
        CJT_DROP(used);
    } else {
        CJT_SAVE();
        size = CJT_dc_symbol(bits, table->dcCodes);
        if (size > 15) return -1;
        raw = CJT_dc_get(bits, size);
        if (bits->failed) return -1;
        CJT_LOAD();
    }
    // JPEG F.12: a value whose top bit is 0 is negative.
    int32_t diff = size && raw < (1u << (size - 1)) ? (int32_t) raw - (int32_t) ((1u << size) - 1) : (int32_t) raw;
    *predictor += (uint32_t) diff;
    *coefficient = (int16_t) *predictor;
    for (int k = 1; k < 64;) {
        CJT_FILL();
        uint32_t ac = table->ac[CJT_PEEK()];
        if (!(ac & CJT_LONG_CODE)) {
            // Both coefficients, unless the first ends the block at position 63
            // without an end-of-block code: the next code is then the next block's.
            if (k + (int) (ac & 255) < 64) ac >>= 16;
            CJT_DROP((int) ((ac >> 8) & 255));
            k += (int) (ac & 255);
            continue;
        }
        CJT_SAVE();
        int symbol = CJT_dc_symbol(bits, &table->acCodes);
        if (bits->failed) return -1;
        CJT_LOAD();
        int run = symbol >> 4;
        size = symbol & 15;
        if (size) {
            k += run + 1;
            CJT_DROP(size);  // the buffer holds at least 32 - 16 bits here (a code is at most 16)
        } else if (run == 15) {
            k += 16;
        } else {
            break;
        }
    }
    *bufferp = buffer;
    *countp = count;
    *pp = p;
    return 0;
}

/// Decodes a sequential (baseline) scan: each block's DC into its component's
/// array, its AC codes decoded only to be skipped. `columns` and `rows` count
/// MCUs, or the blocks of the one component of a non-interleaved scan. The bit
/// buffer lives in locals (this is the hot loop of a baseline decode), kept
/// left-aligned: the next bits are the top ones, so a lookup shifts by a constant
/// and a code is consumed by one shift, which shortens the chain from one code
/// to the next. The rare cases go through the CJT_dc_bits functions, whose
/// buffer is right-aligned. Returns 0, or -1 on anything unusual, as the
/// caller's loop does.
// Not inlined: in a caller with more live values, the bit buffer's registers
// spill (callgrind: 28% more instructions over baseline files).
__attribute__((noinline)) static int CJT_sequential_scan(CJT_dc_bits *bits, CJT_dc_component **scan, int scanCount, CJT_sequential_table *const *tables,
                                                         size_t rows, size_t columns, unsigned int restartInterval, const unsigned char *fileEnd) {
    uint64_t buffer;
    int count;
    const unsigned char *p;
    CJT_LOAD();
    unsigned int restarts = 0, untilRestart = restartInterval;
    uint32_t predictors[3] = {0, 0, 0};
    for (size_t row = 0; row < rows; row++) {
        for (size_t column = 0; column < columns; column++) {
            if (restartInterval) {
                if (untilRestart == 0) {
                    // The rest of the byte is padding; then RSTn, in sequence.
                    if (count - bits->fake >= 8) return -1;
                    if (p + 1 >= fileEnd || p[0] != 0xFF || p[1] != (0xD0 | (restarts & 7))) return -1;
                    restarts++;
                    p += 2;
                    buffer = 0; count = 0; bits->fake = 0;
                    predictors[0] = predictors[1] = predictors[2] = 0;
                    untilRestart = restartInterval;
                }
                untilRestart--;
            }
            for (int c = 0; c < scanCount; c++) {
                CJT_dc_component *component = scan[c];
                int across = scanCount == 1 ? 1 : component->h, down = scanCount == 1 ? 1 : component->v;
                int16_t *first = component->coefficients + row * (size_t) down * component->paddedWidth + column * (size_t) across;
                for (int by = 0; by < down; by++) {
                    int16_t *coefficient = first + (size_t) by * component->paddedWidth;
                    for (int bx = 0; bx < across; bx++, coefficient++)
                        if (CJT_sequential_block(bits, tables[c], &predictors[c], coefficient, &buffer, &count, &p) != 0) return -1;
                }
                // Made-up bits after the end of the data were used: the scan ran short.
                if (count < bits->fake) return -1;
            }
        }
    }
    CJT_SAVE();
    return 0;
}
#undef CJT_DROP
#undef CJT_PEEK
#undef CJT_FILL
#undef CJT_LOAD
#undef CJT_SAVE

/// The next marker's offset at or after `i` that is not a stuffed 0xFF00 or a
/// restart marker, or `length` if there is none.
static inline size_t CJT_dc_next_marker(const unsigned char *in, size_t i, size_t length) {
    while (i + 1 < length) {
        const unsigned char *ff = (const unsigned char *) memchr(in + i, 0xFF, length - 1 - i);
        if (!ff) return length;
        i = (size_t) (ff - in);
        if (in[i + 1] != 0x00 && !(in[i + 1] >= 0xD0 && in[i + 1] <= 0xD7)) return i;
        i++;
    }
    return length;
}

static inline unsigned char CJT_dc_clamp(int32_t value) {
    return (unsigned char) (value < 0 ? 0 : value > 255 ? 255 : value);
}

/// What the marker loop has read so far: the frame, its components and their
/// coefficients, the tables, the restart interval.
typedef struct {
    CJT_dc_component components[3];
    CJT_dc_huffman tables[4];
    int32_t quant[4];
    /// A sequential file's AC tables, built when a scan uses them from the last
    /// DHT that defined them (progressive files never need them).
    const unsigned char *acSpecs[4];
    int acTotals[4];
    CJT_sequential_table *sequentialTables;
    int componentCount, width, height, maxH, maxV, frame, sequential;
    /// Walk and check the structure only (CJT_jpeg_check): no coefficients, any
    /// sampling, every scan's data skipped.
    int checkOnly;
    /// Scans so far, and the most a file may have (libjpeg's limit in CJT_decode).
    int scans, maxScans;
    size_t mcusAcross, mcusDown;
    unsigned int restartInterval;
} CJT_dc_state;

/// One scan's header: its components in order, their DC and AC tables, and the
/// spectral selection and successive approximation.
typedef struct {
    CJT_dc_component *scan[3];
    int huffman[3], acHuffman[3];
    int count, blocksPerMCU, ss, se, ah, al;
} CJT_dc_scan_info;

/// SOF0/1 (sequential Huffman) or SOF2 (progressive): the size, the components,
/// and their coefficient arrays. Returns 0, or -1 for a frame this decoder does not handle.
static int CJT_dc_frame(CJT_dc_state *st, int marker, const unsigned char *s, size_t n) {
    if (st->frame || n < 6) return -1;
    st->frame = 1;
    st->sequential = marker != 0xC2;
    if (s[0] != 8) return -1;
    st->height = s[1] << 8 | s[2];
    st->width = s[3] << 8 | s[4];
    st->componentCount = s[5];
    if (st->width == 0 || st->height == 0 || (st->componentCount != 1 && st->componentCount != 3) || n != 6 + 3 * (size_t) st->componentCount) return -1;
    for (int c = 0; c < st->componentCount; c++) {
        CJT_dc_component *component = &st->components[c];
        component->id = s[6 + 3 * c];
        component->h = s[7 + 3 * c] >> 4;
        component->v = s[7 + 3 * c] & 15;
        component->quantTable = s[8 + 3 * c];
        component->q0 = -1;
        component->al = -1;
        if (component->h < 1 || component->h > 4 || component->v < 1 || component->v > 4 || component->quantTable > 3) return -1;
        for (int d = 0; d < c; d++) if (st->components[d].id == component->id) return -1;
        if (component->h > st->maxH) st->maxH = component->h;
        if (component->v > st->maxV) st->maxV = component->v;
    }
    size_t maxH = (size_t) st->maxH, maxV = (size_t) st->maxV;
    st->mcusAcross = ((size_t) st->width + 8 * maxH - 1) / (8 * maxH);
    st->mcusDown = ((size_t) st->height + 8 * maxV - 1) / (8 * maxV);
    for (int c = 0; c < st->componentCount; c++) {
        CJT_dc_component *component = &st->components[c];
        // Only equal power-of-two factors across and down: libjpeg then
        // scales the component up by IDCT, which is a copy for DC-only blocks.
        int rh = st->maxH / component->h, rv = st->maxV / component->v;
        if (st->checkOnly) continue;
        if (st->maxH % component->h || st->maxV % component->v || rh != rv || (rh & (rh - 1))) return -1;
        size_t componentWidth = ((size_t) st->width * (size_t) component->h + maxH - 1) / maxH;
        size_t componentHeight = ((size_t) st->height * (size_t) component->v + maxV - 1) / maxV;
        component->width = (componentWidth + 7) / 8;
        component->height = (componentHeight + 7) / 8;
        component->paddedWidth = st->mcusAcross * (size_t) component->h;
        component->paddedHeight = st->mcusDown * (size_t) component->v;
        component->coefficients = (int16_t *) calloc(component->paddedWidth * component->paddedHeight, sizeof(int16_t));
        if (!component->coefficients) return -1;
    }
    return 0;
}

/// DQT: the DC quantiser of each table.
static int CJT_dc_quantisers(CJT_dc_state *st, const unsigned char *s, size_t n) {
    size_t k = 0;
    while (k < n) {
        int precision = s[k] >> 4, id = s[k] & 15;
        size_t size = precision ? 128 : 64;
        if (precision > 1 || id > 3 || n - k - 1 < size) return -1;
        st->quant[id] = precision ? (s[k + 1] << 8 | s[k + 2]) : s[k + 1];
        k += 1 + size;
    }
    return 0;
}

/// DHT: DC tables (class 0) now; AC tables (class 1) when a sequential scan uses them.
static int CJT_dc_huffman_tables(CJT_dc_state *st, const unsigned char *s, size_t n) {
    size_t k = 0;
    while (k < n) {
        if (n - k < 17) return -1;
        int tableClass = s[k] >> 4, id = s[k] & 15;
        int total = 0;
        for (int b = 1; b <= 16; b++) total += s[k + b];
        if (tableClass > 1 || id > 3 || total > 256 || n - k - 17 < (size_t) total) return -1;
        if (tableClass == 0) {
            // libjpeg refuses a DC table with a symbol over 15 when a scan uses it; here, when it is defined.
            for (int j = 0; j < total; j++) if (s[k + 17 + j] > 15) return -1;
            if (CJT_dc_build(&st->tables[id], s + k + 1, s + k + 17, total) != 0) return -1;
        }
        if (tableClass == 1) {
            if (!CJT_huffman_counts_valid(s + k + 1)) return -1;
            st->acSpecs[id] = s + k + 1;
            st->acTotals[id] = total;
        }
        k += 17 + (size_t) total;
    }
    return 0;
}

/// SOS's header: the scan's components (each once, each the frame's) and tables.
static int CJT_dc_scan_header(const CJT_dc_state *st, const unsigned char *s, size_t n, CJT_dc_scan_info *info) {
    if (!st->frame || n < 1) return -1;
    info->count = s[0];
    if (info->count < 1 || info->count > st->componentCount || n != 4 + 2 * (size_t) info->count) return -1;
    info->blocksPerMCU = 0;
    for (int c = 0; c < info->count; c++) {
        info->scan[c] = NULL;
        // libjpeg-turbo (get_sos) takes the frame's component d for the scan's
        // c-th only when d >= c, so that (Cb, Y), say, is refused.
        for (int d = c; d < st->componentCount; d++)
            if (st->components[d].id == s[1 + 2 * c]) info->scan[c] = (CJT_dc_component *) &st->components[d];
        if (!info->scan[c]) return -1;
        for (int d = 0; d < c; d++) if (info->scan[d] == info->scan[c]) return -1;
        info->huffman[c] = s[2 + 2 * c] >> 4;
        info->acHuffman[c] = s[2 + 2 * c] & 15;
        if (info->huffman[c] > 3 || info->acHuffman[c] > 3) return -1;
        info->blocksPerMCU += info->scan[c]->h * info->scan[c]->v;
    }
    info->ss = s[1 + 2 * info->count];
    info->se = s[2 + 2 * info->count];
    info->ah = s[3 + 2 * info->count] >> 4;
    info->al = s[3 + 2 * info->count] & 15;
    return 0;
}

/// A sequential scan's combined tables: every coefficient of each component is
/// in the one scan, its AC codes between the DC codes, decoded to be skipped.
/// Components with the same tables share one copy (the chroma pair, usually).
static int CJT_dc_sequential_tables(CJT_dc_state *st, const CJT_dc_scan_info *info, CJT_sequential_table **tables) {
    if (info->ss != 0 || info->se != 63 || info->ah != 0 || info->al != 0) return -1;
    if (!st->sequentialTables && !(st->sequentialTables = (CJT_sequential_table *) malloc(3 * sizeof *st->sequentialTables))) return -1;
    for (int c = 0; c < info->count; c++) {
        int dc = info->huffman[c], ac = info->acHuffman[c];
        // A component scanned twice, a missing table.
        if (info->scan[c]->al != -1 || !st->acSpecs[ac] || !st->tables[dc].defined) return -1;
        tables[c] = NULL;
        for (int d = 0; d < c; d++)
            if (info->huffman[d] == dc && info->acHuffman[d] == ac) tables[c] = tables[d];
        if (tables[c]) continue;
        tables[c] = &st->sequentialTables[c];
        if (CJT_sequential_build(tables[c], &st->tables[dc], st->acSpecs[ac], st->acTotals[ac]) != 0) return -1;
    }
    return 0;
}

/// The checks every DC scan passes before its data: the approximation follows
/// the component's last scan, its quantiser and tables are there. Resets the predictors.
static int CJT_dc_scan_check(const CJT_dc_state *st, const CJT_dc_scan_info *info) {
    if ((!st->sequential && info->se != 0) || info->al > 13 || (info->ah != 0 && info->ah != info->al + 1)
        || (info->count > 1 && info->blocksPerMCU > 10)) return -1;
    for (int c = 0; c < info->count; c++) {
        CJT_dc_component *component = info->scan[c];
        if (info->ah == 0 ? component->al != -1 : component->al != info->ah) return -1;
        if (component->q0 < 0) {
            if (st->quant[component->quantTable] < 0) return -1;
            component->q0 = st->quant[component->quantTable];
        }
        if (info->ah == 0 && !st->tables[info->huffman[c]].defined) return -1;
        component->predictor = 0;
    }
    return 0;
}

/// RSTn where a restart interval ends: the rest of the byte is padding, then
/// the marker, in sequence. The predictors start again.
static inline int CJT_dc_restart(CJT_dc_bits *bits, const CJT_dc_scan_info *info, unsigned int *restarts, const unsigned char *fileEnd) {
    if (bits->count - bits->fake >= 8) return -1;
    const unsigned char *p = bits->p;
    if (p + 1 >= fileEnd || p[0] != 0xFF || p[1] != (0xD0 | (*restarts & 7))) return -1;
    (*restarts)++;
    bits->p = p + 2;
    bits->buffer = 0; bits->count = 0; bits->fake = 0;
    for (int c = 0; c < info->count; c++) info->scan[c]->predictor = 0;
    return 0;
}

/// One unit (an MCU, or a block of a one-component scan) of a progressive DC
/// scan: the first (ah 0) decodes each block's difference, a refinement adds one bit.
static inline int CJT_dc_progressive_unit(const CJT_dc_state *st, const CJT_dc_scan_info *info, CJT_dc_bits *bits, size_t row, size_t column) {
    int ah = info->ah, al = info->al;
    for (int c = 0; c < info->count; c++) {
        CJT_dc_component *component = info->scan[c];
        int across = info->count == 1 ? 1 : component->h, down = info->count == 1 ? 1 : component->v;
        int16_t *first = component->coefficients + row * (size_t) down * component->paddedWidth + column * (size_t) across;
        const CJT_dc_huffman *table = &st->tables[info->huffman[c]];
        for (int by = 0; by < down; by++) {
            int16_t *coefficient = first + (size_t) by * component->paddedWidth;
            for (int bx = 0; bx < across; bx++, coefficient++) {
                if (ah == 0) {
                    int size = CJT_dc_symbol(bits, table);
                    if (size > 15) return -1;
                    uint32_t raw = CJT_dc_get(bits, size);
                    // JPEG F.12: a value whose top bit is 0 is negative.
                    int32_t diff = size && raw < (1u << (size - 1)) ? (int32_t) raw - (int32_t) ((1u << size) - 1) : (int32_t) raw;
                    component->predictor += (uint32_t) diff;
                    *coefficient = (int16_t) (component->predictor << al);
                } else if (CJT_dc_get(bits, 1)) {
                    *coefficient = (int16_t) ((uint16_t) *coefficient | (uint16_t) (1u << al));
                }
            }
        }
        if (bits->failed) return -1;
    }
    return 0;
}

/// SOS with its data. Sets `next` to the offset of the marker after the scan.
static int CJT_dc_scan(CJT_dc_state *st, const unsigned char *in, size_t length, size_t data, const unsigned char *s, size_t n, size_t *next) {
    CJT_dc_scan_info info;
    if (++st->scans > st->maxScans) return -1;
    if (CJT_dc_scan_header(st, s, n, &info) != 0) return -1;
    CJT_sequential_table *sequentialTable[3];
    if (st->sequential) {
        if (st->checkOnly) {
            // libjpeg builds both tables of each component of a sequential scan.
            for (int c = 0; c < info.count; c++)
                if (!st->tables[info.huffman[c]].defined || !st->acSpecs[info.acHuffman[c]]) return -1;
        } else if (CJT_dc_sequential_tables(st, &info, sequentialTable) != 0) {
            return -1;
        }
    } else if (info.ss != 0) {
        // An AC scan, skipped unread; but what libjpeg refuses in its header
        // (start_pass_phuff_decoder, latch_quant_tables) is refused here too.
        CJT_dc_component *component = info.scan[0];
        if (info.count != 1 || info.ss > info.se || info.se > 63 || (info.ah != 0 && info.al != info.ah - 1) || info.al > 13
            || !st->acSpecs[info.acHuffman[0]]) return -1;
        if (component->q0 < 0) {
            if (st->quant[component->quantTable] < 0) return -1;
            component->q0 = st->quant[component->quantTable];
        }
        *next = CJT_dc_next_marker(in, data, length);
        return 0;
    }
    if (CJT_dc_scan_check(st, &info) != 0) return -1;
    if (st->checkOnly) {
        for (int c = 0; c < info.count; c++) info.scan[c]->al = info.al;
        *next = CJT_dc_next_marker(in, data, length);
        return 0;
    }
    CJT_dc_bits bits = { in + data, in + length, 0, 0, 0, 0 };
    // Units: blocks of the one component of a non-interleaved scan, or MCUs.
    size_t rows = info.count == 1 ? info.scan[0]->height : st->mcusDown;
    size_t columns = info.count == 1 ? info.scan[0]->width : st->mcusAcross;
    if (st->sequential) {
        if (CJT_sequential_scan(&bits, info.scan, info.count, sequentialTable, rows, columns, st->restartInterval, in + length) != 0) return -1;
    } else {
        unsigned int restarts = 0, untilRestart = st->restartInterval;
        for (size_t row = 0; row < rows; row++) {
            for (size_t column = 0; column < columns; column++) {
                if (st->restartInterval) {
                    if (untilRestart == 0) {
                        if (CJT_dc_restart(&bits, &info, &restarts, in + length) != 0) return -1;
                        untilRestart = st->restartInterval;
                    }
                    untilRestart--;
                }
                if (CJT_dc_progressive_unit(st, &info, &bits, row, column) != 0) return -1;
            }
        }
    }
    for (int c = 0; c < info.count; c++) info.scan[c]->al = info.al;
    *next = CJT_dc_next_marker(in, (size_t) (bits.p - in), length);
    return 0;
}

/// The markers from SOI to EOI, each segment to its reader. Returns 0 when the
/// file is whole and every component's DC is known to its last bit.
static int CJT_dc_markers(CJT_dc_state *st, const unsigned char *in, size_t length) {
    size_t i = 2;
    while (i + 1 < length) {
        if (in[i] != 0xFF) return -1;
        while (i + 1 < length && in[i + 1] == 0xFF) i++;  // fill bytes
        if (i + 1 >= length) return -1;
        unsigned char marker = in[i + 1];
        if (marker == 0xD9) break;  // EOI
        if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) return -1;
        if (i + 4 > length) return -1;
        size_t segment = (size_t) in[i + 2] << 8 | in[i + 3];
        if (segment < 2 || i + 2 + segment > length) return -1;
        const unsigned char *s = in + i + 4;
        size_t n = segment - 2;
        int failed = 0;
        if (marker == 0xC0 || marker == 0xC1 || marker == 0xC2) {
            failed = CJT_dc_frame(st, marker, s, n);
        } else if (!(marker == 0xC4 || marker == 0xDB || marker == 0xDD || marker == 0xDA || marker == 0xFE || (marker >= 0xE0 && marker <= 0xEF))) {
            // Another frame type, DAC, DNL, and the markers libjpeg refuses
            // (RESn, JPGn, DHP, EXP): declined. Only SOF0-2, DHT, DQT, DRI, SOS,
            // APPn and COM are read.
            return -1;
        } else if (marker == 0xDB) {
            failed = CJT_dc_quantisers(st, s, n);
        } else if (marker == 0xC4) {
            failed = CJT_dc_huffman_tables(st, s, n);
        } else if (marker == 0xDD) {  // DRI
            if (n != 2) return -1;
            st->restartInterval = (unsigned int) (s[0] << 8 | s[1]);
        } else if (marker == 0xDA) {
            if (CJT_dc_scan(st, in, length, i + 2 + segment, s, n, &i) != 0) return -1;
            continue;
        }
        if (failed) return -1;
        i += 2 + segment;  // APPn, COM and the rest: not needed
    }
    if (i + 1 >= length || !st->frame) return -1;  // no EOI: truncated, the caller reports it
    for (int c = 0; c < st->componentCount; c++) if (st->components[c].al != 0) return -1;
    return 0;
}

/// libjpeg's YCbCr to RGB (jdcolor.c), 16-bit fixed point: its tables' entries
/// computed inline, on rows with the chroma already repeated across, so that
/// the loop vectorises.
static int CJT_dc_ycc_to_rgb(const CJT_dc_state *st, const int *shift, size_t ow, size_t oh, unsigned char *out) {
    int16_t *spread = (int16_t *) malloc(3 * ow * sizeof(int16_t));
    if (!spread) return -1;
    for (size_t y = 0; y < oh; y++) {
        const int16_t *rows[3];
        for (int c = 0; c < 3; c++) {
            const int16_t *row = st->components[c].coefficients + (y >> shift[c]) * st->components[c].paddedWidth;
            if (shift[c] == 0) { rows[c] = row; continue; }
            int16_t *copy = spread + (size_t) c * ow;
            for (size_t x = 0; x < ow; x++) copy[x] = row[x >> shift[c]];
            rows[c] = copy;
        }
        const int16_t *rowY = rows[0], *rowCb = rows[1], *rowCr = rows[2];
        unsigned char *pixel = out + y * ow * 3;
        for (size_t x = 0; x < ow; x++) {
            int32_t luma = rowY[x], cb = rowCb[x] - 128, cr = rowCr[x] - 128;
            pixel[3 * x] = CJT_dc_clamp(luma + ((91881 * cr + 32768) >> 16));                    // FIX(1.40200)
            pixel[3 * x + 1] = CJT_dc_clamp(luma + ((-22554 * cb + 32768 - 46802 * cr) >> 16));  // -FIX(0.34414), -FIX(0.71414)
            pixel[3 * x + 2] = CJT_dc_clamp(luma + ((116130 * cb + 32768) >> 16));               // FIX(1.77200)
        }
    }
    free(spread);
    return 0;
}

/// The pixels, malloc'd: each block's sample (libjpeg's 1x1 IDCT,
/// DESCALE(DC * q, 3) + 128), in place, each component repeated up to full
/// size, then, for YCbCr, converted to RGB.
static int CJT_dc_output(const CJT_dc_state *st, int ycc, unsigned char **pixels, int *outWidth, int *outHeight, int *outBands) {
    size_t ow = ((size_t) st->width + 7) / 8, oh = ((size_t) st->height + 7) / 8;
    int bands = st->componentCount;
    unsigned char *out = (unsigned char *) malloc(ow * oh * (size_t) bands);
    if (!out) return -1;
    int shift[3] = {0, 0, 0};
    for (int c = 0; c < bands; c++) {
        const CJT_dc_component *component = &st->components[c];
        int16_t *coefficient = component->coefficients;
        size_t count = component->paddedWidth * component->paddedHeight;
        int32_t q0 = component->q0, low = 0, high = 0;  // locals, so that the loop vectorises
        for (size_t k = 0; k < count; k++) {
            int32_t value = ((int32_t) coefficient[k] * q0 + 4) >> 3;
            low = value < low ? value : low;
            high = value > high ? value : high;
            coefficient[k] = CJT_dc_clamp(value + 128);
        }
        // Past -512...511 libjpeg's IDCT output wraps rather than clamps (its
        // range limit, jdmaster.c), and its 2x2 IDCT of subsampled chroma
        // overflows in yet another way. No real block's DC is that far out
        // (corrupt tables or quantisers make it): handed back to libjpeg, so
        // that its garbage is the one answer.
        if (low < -512 || high > 511) {
            free(out);
            return -1;
        }
        while ((st->maxH / component->h) >> shift[c] > 1) shift[c]++;  // a power of two, checked at SOF
    }
    if (bands == 1 || !ycc) {
        for (size_t y = 0; y < oh; y++) {
            unsigned char *pixel = out + y * ow * (size_t) bands;
            for (int c = 0; c < bands; c++) {
                const int16_t *row = st->components[c].coefficients + (y >> shift[c]) * st->components[c].paddedWidth;
                for (size_t x = 0; x < ow; x++) pixel[x * (size_t) bands + (size_t) c] = (unsigned char) row[x >> shift[c]];
            }
        }
    } else if (CJT_dc_ycc_to_rgb(st, shift, ow, oh, out) != 0) {
        free(out);
        return -1;
    }
    *pixels = out;
    *outWidth = (int) ow;
    *outHeight = (int) oh;
    *outBands = bands;
    return 0;
}

/// The state before SOI's first marker: no quantiser, no frame.
static void CJT_dc_start(CJT_dc_state *st, int maxScans, int checkOnly) {
    memset(st, 0, sizeof *st);
    for (int q = 0; q < 4; q++) st->quant[q] = -1;
    st->maxH = st->maxV = 1;
    st->maxScans = maxScans;
    st->checkOnly = checkOnly;
}

/// Decodes the DC coefficients of a Huffman JPEG (sequential or progressive) into 1/8-scale pixels, malloc'd
/// (free with free()): 1 band for grey, 3 for colour. `ycc` says the 3 components
/// are YCbCr (libjpeg's reading of the JFIF/Adobe markers) rather than RGB.
/// Returns 0, or -1 when the file is not one this decoder handles exactly.
int CJT_dc_decode(const unsigned char *in, size_t length, int ycc, int maxScans, unsigned char **pixels, int *outWidth, int *outHeight, int *outBands) {
    *pixels = NULL;
    if (length < 4 || in[0] != 0xFF || in[1] != 0xD8) return -1;
    CJT_dc_state st;
    CJT_dc_start(&st, maxScans, 0);
    int result = CJT_dc_markers(&st, in, length) == 0 ? CJT_dc_output(&st, ycc, pixels, outWidth, outHeight, outBands) : -1;
    for (int c = 0; c < 3; c++) free(st.components[c].coefficients);
    free(st.sequentialTables);
    return result;
}

/// See CJPEGTurboOps.h: the decoder's marker loop, every scan's data skipped.
int CJT_jpeg_check(const unsigned char *in, size_t length, int maxScans) {
    if (length < 4 || in[0] != 0xFF || in[1] != 0xD8) return -1;
    CJT_dc_state st;
    CJT_dc_start(&st, maxScans, 1);
    return CJT_dc_markers(&st, in, length);
}

/// See CJPEGTurboOps.h.
size_t CJT_dc_only(const unsigned char *in, size_t length, int maxScans, unsigned char *out) { return CJT_scan_filter(in, length, maxScans, out, 0); }

/// See CJPEGTurboOps.h. The same marker scan as the decoder's skips the entropy-coded data.
size_t CJT_scan_filter(const unsigned char *in, size_t length, int maxScans, unsigned char *out, int keepFirstAC) {
    // What the copy leaves out, libjpeg never sees: it must pass libjpeg's checks here.
    if (CJT_jpeg_check(in, length, maxScans) != 0) return 0;
    size_t i = 2, o = 0;
    int progressive = 0, scans = 0;
    out[o++] = 0xFF; out[o++] = 0xD8;
    while (i + 1 < length) {
        if (in[i] != 0xFF) return 0;
        while (i + 1 < length && in[i + 1] == 0xFF) i++;  // fill bytes
        if (i + 1 >= length) return 0;
        unsigned char marker = in[i + 1];
        if (marker == 0xD9) {  // EOI
            if (!progressive || scans == 0) return 0;
            out[o++] = 0xFF; out[o++] = 0xD9;
            return o;
        }
        if (marker == 0x00 || (marker >= 0xD0 && marker <= 0xD8) || marker == 0x01) return 0;
        if (i + 4 > length) return 0;
        size_t segment = (size_t) in[i + 2] << 8 | in[i + 3];
        if (segment < 2 || i + 2 + segment > length) return 0;
        if (marker == 0xC2) progressive = 1;
        else if ((marker >= 0xC0 && marker <= 0xCF) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) return 0;  // not progressive Huffman
        if (marker == 0xDC) return 0;  // DNL
        if (marker != 0xDA) {
            memcpy(out + o, in + i, 2 + segment);
            o += 2 + segment;
            i += 2 + segment;
            continue;
        }
        // SOS: Ns, Ns x (id, tables), Ss, Se, Ah/Al.
        if (!progressive || segment < 6) return 0;
        unsigned int components = in[i + 4];
        if (components < 1 || components > 4 || segment != 6 + 2 * components) return 0;
        unsigned int ss = in[i + 5 + 2 * components];
        unsigned int ah = in[i + 7 + 2 * components] >> 4;
        size_t end = CJT_dc_next_marker(in, i + 2 + segment, length);
        if (end + 1 >= length) return 0;  // no marker after the scan: truncated
        if (ss == 0 || (keepFirstAC && ah == 0)) {
            memcpy(out + o, in + i, end - i);
            o += end - i;
            scans++;
        }
        i = end;
    }
    return 0;
}
