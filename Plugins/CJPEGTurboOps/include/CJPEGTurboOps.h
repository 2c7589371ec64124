#ifndef CJPEGTURBOOPS_H
#define CJPEGTURBOOPS_H
// C code of ours for the turbojpeg coder. Every symbol has the CJT_ prefix.
//
// 1. The DC decoder (dc_decode.c).
//
// A decoder for the 1/8-scale image of a Huffman JPEG from its DC coefficients
// alone. At 1/8 every 8x8 block becomes one pixel, and that pixel is the block's
// DC coefficient times its quantiser, divided by 8, plus 128: libjpeg's 1x1
// IDCT. It keeps one 16-bit value per block, where libjpeg keeps all 64
// coefficients of every block of a progressive image (a 12 MP photo: 1 MB
// against 36 MB).
//
// - A progressive file's DC coefficients sit in its first scans (and its DC
//   refinement scans): this reads the headers and those scans, and skips the AC
//   scans without decoding them (a memchr for the next marker).
// - A sequential (baseline) file interleaves each block's AC codes with its DC
//   codes, so they are Huffman-decoded, but only to be skipped: one lookup per
//   coefficient gives its code and magnitude lengths together, nothing is
//   stored, and there is no IDCT, upsampling or per-row machinery. On 12 MP
//   photos this takes about 0.76x the CPU of libjpeg-turbo's own 1/8 decode,
//   on noise at quality 100 0.89x (docs/performance.md).
//
// The output is libjpeg-turbo's own 1/8 decode of the DC coefficients with block
// smoothing off, byte for byte: the same IDCT rounding, chroma that libjpeg
// scales up by IDCT (a 2x2 block from a DC-only 2x2 IDCT is four copies of one
// value, which is what is written here), and the same fixed-point YCbCr to RGB
// conversion. The tests check that equality. On the whole file libjpeg's 2x2
// chroma IDCT would also read the lowest AC coefficients, so 4:2:0 chroma here
// is softer than a full decode's; 4:4:4 and grey are the same byte for byte.
//
// Only what that equality holds for is decoded: 8-bit Huffman files, sequential
// (SOF0, SOF1) or progressive (SOF2), with 1 or 3 components, each component
// subsampled by the same power of two across and down (4:4:4, 4:2:0, grey).
// Anything else, and anything unusual (a missing table, a restart marker out of
// place, a scan that runs out of data, a component scanned twice, no EOI, a
// DNL), returns -1 and the caller decodes the file with libjpeg, which then
// reports real errors in its words. Every read is bounds-checked.
#include <stddef.h>

/// Decodes the DC coefficients of a Huffman JPEG into 1/8-scale pixels, malloc'd
/// (free with free()): 1 band for grey, 3 for colour. `ycc` says the 3 components
/// are YCbCr (libjpeg's reading of the JFIF/Adobe markers) rather than RGB.
/// Returns 0, or -1 when the file is not one this decoder handles exactly.
int CJT_dc_decode(const unsigned char *in, size_t length, int ycc, int maxScans, unsigned char **pixels, int *outWidth, int *outHeight, int *outBands);

/// The decoder's marker loop over the whole file without decoding any scan:
/// 0 when every segment and scan header passes the checks libjpeg-turbo makes
/// fatal (and a few stricter ones of the DC decoder's), there is an EOI, and
/// there are at most `maxScans` scans; else -1.
int CJT_jpeg_check(const unsigned char *in, size_t length, int maxScans);

/// Copies a progressive Huffman JPEG into `out` (at least `length` bytes) without
/// its AC scans, for libjpeg to decode at 1/8 when `CJT_dc_decode` does not take
/// the file (4:2:2, say): every segment but the scans is kept, and of the scans
/// only those with Ss = 0 (DC first and DC refinement scans, wherever they sit).
/// Entropy-coded bytes are skipped with the DC decoder's marker scan, never
/// Huffman-decoded. Returns the new length, or 0 when the file is not a
/// progressive Huffman JPEG or is unusual (no EOI, a DNL, a scan header that does
/// not parse): the caller then decodes the original.
size_t CJT_dc_only(const unsigned char *in, size_t length, int maxScans, unsigned char *out);

/// `CJT_dc_only` with `keepFirstAC` 0; with 1 it also keeps every AC scan that
/// is a first pass over its band (Ah = 0) and drops only the AC refinement scans
/// (Ah > 0), which carry the low bits of AC coefficients. libjpeg decodes the copy
/// as a file whose progression stopped early: every coefficient is there, the AC
/// ones rounded towards zero by the first scans' point transform. For the 1/4 and
/// 1/2 scale decodes of progressive files (docs/coder.md gives the quality).
size_t CJT_scan_filter(const unsigned char *in, size_t length, int maxScans, unsigned char *out, int keepFirstAC);

// 2. libjpeg calls (libjpeg_calls.c). Functions return 0 on success and -1 on
// failure, with the reason in the context's message.

/// A decode in progress: libjpeg's state and its error handler (opaque to Swift).
typedef struct CJT_context CJT_context;

/// What the header says.
typedef struct {
    int width, height;
    /// 1 grey, 3 YCbCr or RGB, 4 CMYK or YCCK.
    int components;
    /// libjpeg's J_COLOR_SPACE of the file.
    int colorSpace;
    int progressive;
    int arithmetic;
    int precision;
    /// An ICC profile (APP2 "ICC_PROFILE") is present.
    int hasICC;
    /// EXIF orientation 1...8 (1 when absent or unreadable).
    int orientation;
} CJT_header;

/// Opens the bytes and reads the header. The bytes are not copied: they must
/// outlive the context. On failure returns NULL and writes the reason into
/// `message` (at least 256 bytes). `strict`: a premature end is an error.
CJT_context *CJT_open(const unsigned char *bytes, size_t length, int strict, CJT_header *header, char *message, size_t message_size);
void CJT_close(CJT_context *context);
/// The ICC profile assembled from its APP2 chunks (malloc'd, free with CJT_free), or NULL.
unsigned char *CJT_icc_profile(CJT_context *context, unsigned int *length);
/// The output size at scale `numerator`/8 (1...16), without decoding.
void CJT_scaled_size(CJT_context *context, int numerator, int *width, int *height);
/// Decodes at scale `numerator`/8 into a buffer it mallocs (free with CJT_free):
/// RGB for colour files, grey for grey ones; block smoothing off. A file with
/// more than `maxScans` scans (0: no limit) is refused. Reads what the rows
/// need: a single-scan file's tail after its last row is not read, as libvips'
/// loader does not read it; a multi-scan file is read to its EOI.
int CJT_decode(CJT_context *context, int numerator, int maxScans, unsigned char **pixels, int *width, int *height, int *bands, int *truncated);
/// The warnings libjpeg gave on this context (corrupt data it decoded past).
long CJT_warnings(CJT_context *context);
/// The reason for the last failure of a call on this context.
const char *CJT_message(CJT_context *context);
void CJT_free(void *pointer);

/// How `CJT_encode` writes.
typedef struct {
    int quality;
    int progressive;
    /// Chroma subsampling of colour images: 0 none (4:4:4), 1 4:2:2, 2 4:2:0.
    int subsampling;
    /// MCUs between restart markers; 0 for none.
    int restartInterval;
    /// With `progressive`: one DC scan per component (and DC refinement scans
    /// after the AC scans) instead of libjpeg's interleaved script, a layout
    /// some encoders write. Used to make test files.
    int separateDCScans;
    /// Optimal Huffman tables (a second pass; smaller files).
    int optimize;
} CJT_encode_options;

/// Encodes 8-bit grey (1 band) or RGB (3 bands) pixels as a JFIF JPEG into a
/// buffer it mallocs (free with CJT_free). Returns 0, or -1 with the reason in `message`.
int CJT_encode(const unsigned char *pixels, int width, int height, int bands, const CJT_encode_options *options,
               unsigned char **out, unsigned long *outLength, char *message, size_t messageSize);

// 3. The direct thumbnail path (resample.c, colour.c): what follows a scaled
// decode, without libvips.

/// Resamples 8-bit interleaved pixels (1 to 4 bands) from sw x sh to dw x dh into
/// `dst` (dw * dh * bands bytes) with one separable Lanczos-3 pass per axis. When
/// reducing, the kernel widens by the factor, so it averages what the smaller
/// grid cannot hold; edges repeat. Each output row: vertical first, into one row
/// of floats, then horizontal.
/// On x86-64 the row loop runs in AVX2 with fused multiply-adds when the
/// processor has them, else in SSE2 (see CJT_resample_variant).
/// Returns 0, or -1 for bad sizes or no memory.
int CJT_resample(const unsigned char *src, int sw, int sh, int bands, unsigned char *dst, int dw, int dh);

/// CJT_resample with its row loop chosen: `wide` 0 is the portable (SSE2) loop,
/// 1 the AVX2 and FMA one. Returns -2 for `wide` 1 where the processor or the
/// build has no such loop. For tests, which must cover the loop a processor
/// without AVX2 takes.
int CJT_resample_variant(const unsigned char *src, int sw, int sh, int bands, unsigned char *dst, int dw, int dh, int wide);

/// Writes the upright pixels of a w x h image stored with EXIF `orientation`
/// (1...8) into `dst`, which is h x w for 5...8 and w x h otherwise.
void CJT_orient(const unsigned char *src, int w, int h, int bands, int orientation, unsigned char *dst);

/// Copies the cw x ch rectangle at (left, top) of a w-wide image into `dst`.
void CJT_crop(const unsigned char *src, int w, int bands, int left, int top, int cw, int ch, unsigned char *dst);

/// An lcms2 transform from an RGB ICC profile to sRGB for 8-bit RGB pixels,
/// relative colorimetric (the vips path's intent); NULL when lcms2 cannot read
/// the profile or it is not an RGB input profile. Free with `CJT_icc_free`.
/// `CJT_icc_apply` keeps no state, so threads may share a transform.
void *CJT_icc_to_srgb(const unsigned char *profile, size_t length);
void CJT_icc_apply(void *transform, const unsigned char *in, unsigned char *out, size_t pixels);
void CJT_icc_free(void *transform);

// 4. WebP out (webp_encode.c): libwebp's encoder, configured as libvips' webpsave.

typedef struct {
    int quality;   // 0...100
    int lossless;  // 0 or 1
    int effort;    // libwebp's method, 0...6
    int sharpYUV;  // libvips' smart_subsample
} CJT_webp_options;

/// Encodes 8-bit interleaved grey (written as RGB, as libvips does), RGB or RGBA
/// pixels, rows packed, into a WebP file in a buffer libwebp allocates (free with
/// `CJT_webp_free`). Returns 0, or -1 with the reason in `message`.
int CJT_webp_encode(const unsigned char *pixels, int width, int height, int bands, const CJT_webp_options *options,
                    unsigned char **out, size_t *outLength, char *message, size_t messageSize);
void CJT_webp_free(unsigned char *bytes);

#endif
