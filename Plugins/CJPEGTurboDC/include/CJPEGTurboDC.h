#ifndef CJPEGTURBODC_H
#define CJPEGTURBODC_H
// A decoder for the 1/8-scale image of a progressive Huffman JPEG from its DC
// coefficients alone. At 1/8 every 8x8 block becomes one pixel, and that pixel
// is the block's DC coefficient times its quantiser, divided by 8, plus 128:
// libjpeg's 1x1 IDCT. A progressive file's DC coefficients sit in its first
// scans (and its DC refinement scans), so this reads the headers and those
// scans, skips the AC scans without decoding them (a memchr for the next
// marker), and keeps one 16-bit value per block, where libjpeg keeps all 64
// coefficients of every block of the whole image (a 12 MP photo: 1 MB against
// 36 MB).
//
// The output is libjpeg-turbo's own 1/8 decode of the DC scans with block
// smoothing off, byte for byte: the same IDCT rounding, chroma that libjpeg
// scales up by IDCT (a 2x2 block from a DC-only 2x2 IDCT is four copies of one
// value, which is what is written here), and the same fixed-point YCbCr to RGB
// conversion. The tests check that equality. On the whole file libjpeg's 2x2
// chroma IDCT would also read the lowest AC coefficients, so 4:2:0 chroma here
// is softer than a full decode's; 4:4:4 and grey are the same.
//
// Only what that equality holds for is decoded: 8-bit Huffman progressive files
// (SOF2) with 1 or 3 components, each component subsampled by the same power of
// two across and down (4:4:4, 4:2:0, grey). Anything else, and anything unusual
// (a missing table, a restart marker out of place, a scan that runs out of data,
// no EOI, a DNL), returns -1 and the caller decodes the file with libjpeg, which
// then reports real errors in its words. Every read is bounds-checked.
//
// Sequential (baseline) files are not taken: each block's AC codes sit between
// its DC codes and must all be Huffman-decoded to find the next block. A version
// that skipped them without storing anything was measured at about 6 % faster
// than libjpeg-turbo's 1/8 decode, no faster in the tool, and softer in 4:2:0
// chroma, so it was not kept (docs/performance.md).
#include <stddef.h>

/// Decodes the DC scans of a progressive JPEG into 1/8-scale pixels, malloc'd
/// (free with free()): 1 band for grey, 3 for colour. `ycc` says the 3 components
/// are YCbCr (libjpeg's reading of the JFIF/Adobe markers) rather than RGB.
/// Returns 0, or -1 when the file is not one this decoder handles exactly.
int CJT_dc_decode(const unsigned char *in, size_t length, int ycc, unsigned char **pixels, int *outWidth, int *outHeight, int *outBands);

#endif
