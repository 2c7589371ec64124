#ifndef CVIPS_SHIM_H
#define CVIPS_SHIM_H
// Typed wrappers over libvips' variadic calls, which Swift cannot make. Every
// symbol carries the CVips_ prefix. Each returns 0 on success and -1 on failure,
// with the reason in libvips' error buffer (taken with vips_error_buffer_copy).
#include <string.h>
#include <vips/vips.h>
#include <vips/vector.h>

static inline int CVips_init(void) { return VIPS_INIT("webimage"); }
/// libvips' SIMD code generator (liborc): on or off, process-wide.
static inline void CVips_vector_set_enabled(int enabled) { vips_vector_set_enabled(enabled); }
static inline int CVips_vector_enabled(void) { return vips_vector_isenabled(); }


/// The loader libvips would pick for these bytes (for example "jpegload_buffer"), or NULL.
static inline const char *CVips_find_loader(const void *buf, size_t len) { return vips_foreign_find_load_buffer(buf, len); }



static inline int CVips_autorot(VipsImage *in, VipsImage **out) { return vips_autorot(in, out, NULL); }
static inline int CVips_copy(VipsImage *in, VipsImage **out) { return vips_copy(in, out, NULL); }
static inline VipsImage *CVips_copy_memory(VipsImage *in) { return vips_image_copy_memory(in); }
/// An empty memory image to write into, and the write: `vips_image_copy_memory`
/// in two steps, so that the destination exists before the work starts and can
/// be killed (`CVips_kill`) from another thread while it runs.
static inline VipsImage *CVips_new_memory(void) { return vips_image_new_memory(); }
static inline int CVips_write(VipsImage *in, VipsImage *out) { return vips_image_write(in, out); }
/// Stops the computation writing into `image` at its next tile (libvips checks
/// the flag between tiles); the write then fails.
static inline void CVips_kill(VipsImage *image) { vips_image_set_kill(image, TRUE); }
static inline int CVips_resize(VipsImage *in, VipsImage **out, double hscale, double vscale) {
    return vips_resize(in, out, hscale, "vscale", vscale, "kernel", VIPS_KERNEL_LANCZOS3, NULL);
}
static inline int CVips_extract_area(VipsImage *in, VipsImage **out, int left, int top, int width, int height) {
    return vips_extract_area(in, out, left, top, width, height, NULL);
}
static inline int CVips_rot(VipsImage *in, VipsImage **out, int quarter_turns) {
    VipsAngle angle = quarter_turns == 1 ? VIPS_ANGLE_D90 : quarter_turns == 2 ? VIPS_ANGLE_D180 : quarter_turns == 3 ? VIPS_ANGLE_D270 : VIPS_ANGLE_D0;
    return vips_rot(in, out, angle, NULL);
}
static inline int CVips_flip(VipsImage *in, VipsImage **out, int vertical) {
    return vips_flip(in, out, vertical ? VIPS_DIRECTION_VERTICAL : VIPS_DIRECTION_HORIZONTAL, NULL);
}
static inline int CVips_gaussblur(VipsImage *in, VipsImage **out, double sigma) { return vips_gaussblur(in, out, sigma, NULL); }
static inline int CVips_linear(VipsImage *in, VipsImage **out, const double *a, const double *b, int n) {
    return vips_linear(in, out, (double *) a, (double *) b, n, "uchar", TRUE, NULL);
}
static inline int CVips_srgb(VipsImage *in, VipsImage **out) { return vips_colourspace(in, out, VIPS_INTERPRETATION_sRGB, NULL); }
static inline int CVips_cast_uchar(VipsImage *in, VipsImage **out) { return vips_cast(in, out, VIPS_FORMAT_UCHAR, NULL); }
static inline int CVips_bandjoin2(VipsImage *a, VipsImage *b, VipsImage **out) { return vips_bandjoin2(a, b, out, NULL); }
static inline int CVips_extract_band(VipsImage *in, VipsImage **out, int band, int n) { return vips_extract_band(in, out, band, "n", n, NULL); }
static inline int CVips_multiply(VipsImage *a, VipsImage *b, VipsImage **out) { return vips_multiply(a, b, out, NULL); }
static inline int CVips_linear1(VipsImage *in, VipsImage **out, double a, double b) { return vips_linear1(in, out, a, b, NULL); }
static inline int CVips_arrayjoin(VipsImage **in, VipsImage **out, int n) { return vips_arrayjoin(in, out, n, "across", 1, NULL); }
static inline int CVips_addalpha(VipsImage *in, VipsImage **out) { return vips_addalpha(in, out, NULL); }


/// `subsample`: 0 auto, 1 on, 2 off (VipsForeignSubsample's order).
static inline int CVips_jpegsave(VipsImage *in, void **buf, size_t *len, int quality, int progressive, int strip, int subsample) {
    return vips_jpegsave_buffer(in, buf, len, "Q", quality, "interlace", progressive, "strip", strip, "optimize_coding", TRUE,
                                "subsample_mode", subsample, NULL);
}
static inline int CVips_pngsave(VipsImage *in, void **buf, size_t *len, int interlace, int strip) {
    return vips_pngsave_buffer(in, buf, len, "interlace", interlace, "strip", strip, NULL);
}
static inline int CVips_webpsave(VipsImage *in, void **buf, size_t *len, int quality, int lossless, int strip, int effort, int smart_subsample) {
    return vips_webpsave_buffer(in, buf, len, "Q", quality, "lossless", lossless, "strip", strip, "effort", effort,
                                "smart_subsample", smart_subsample, NULL);
}
static inline int CVips_gifsave(VipsImage *in, void **buf, size_t *len, int interlace, int strip) {
    return vips_gifsave_buffer(in, buf, len, "interlace", interlace, "strip", strip, NULL);
}
static inline int CVips_tiffsave(VipsImage *in, void **buf, size_t *len, int strip) {
    return vips_tiffsave_buffer(in, buf, len, "strip", strip, NULL);
}

/// Whether the image carries an ICC profile.
static inline int CVips_has_profile(VipsImage *in) { return vips_image_get_typeof(in, VIPS_META_ICC_NAME) != 0; }




/// Smart crop to `width` x `height`: `interesting` 1 centre, 2 entropy, 3 attention (VipsInteresting).
static inline int CVips_smartcrop(VipsImage *in, VipsImage **out, int width, int height, int interesting) {
    return vips_smartcrop(in, out, width, height, "interesting", interesting, NULL);
}
/// Unsharp mask on the L channel (libvips converts to LabS and back).
static inline int CVips_sharpen(VipsImage *in, VipsImage **out, double sigma) {
    return vips_sharpen(in, out, "sigma", sigma, NULL);
}
static inline int CVips_grey(VipsImage *in, VipsImage **out) { return vips_colourspace(in, out, VIPS_INTERPRETATION_B_W, NULL); }
/// `overlay` over `base` at (x, y), blend mode OVER, in sRGB.
static inline int CVips_composite(VipsImage *base, VipsImage *overlay, VipsImage **out, int x, int y) {
    return vips_composite2(base, overlay, out, VIPS_BLEND_MODE_OVER, "x", x, "y", y, NULL);
}

/// Fixtures: the image converted from sRGB to a built-in profile ("p3", "cmyk")
/// or an ICC file, which it then carries.
static inline int CVips_to_profile(VipsImage *in, VipsImage **out, const char *profile) {
    return vips_icc_transform(in, out, profile, "input_profile", "srgb", "embedded", FALSE, "depth", 8, NULL);
}
/// Fixtures: attaches bytes as the ICC profile of an image the caller owns.
static inline void CVips_set_profile(VipsImage *image, const void *data, size_t len) {
    vips_image_set_blob_copy(image, VIPS_META_ICC_NAME, data, len);
}

/// Sets an int field on an image the caller owns and has not shared (fixtures).
static inline void CVips_set_int(VipsImage *image, const char *name, int value) { vips_image_set_int(image, name, value); }

static inline size_t CVips_sizeof_image(VipsImage *image) { return VIPS_IMAGE_SIZEOF_IMAGE(image); }
static inline int CVips_format(VipsImage *image) { return (int) image->BandFmt; }
static inline int CVips_width(VipsImage *image) { return image->Xsize; }
static inline int CVips_height(VipsImage *image) { return image->Ysize; }
static inline int CVips_bands(VipsImage *image) { return image->Bands; }
static inline int CVips_interpretation(VipsImage *image) { return (int) image->Type; }
/// 8-bit sRGB (3 bands) or 8-bit grey (1 band): pixels any JPEG encoder can take as they are.
static inline int CVips_is_plain_8bit(VipsImage *image) {
    return image->BandFmt == VIPS_FORMAT_UCHAR &&
        ((image->Bands == 3 && image->Type == VIPS_INTERPRETATION_sRGB) || (image->Bands == 1 && image->Type == VIPS_INTERPRETATION_B_W));
}
static inline void CVips_unref(VipsImage *image) { if (image) g_object_unref(image); }
static inline void CVips_free(void *p) { g_free(p); }
#endif
