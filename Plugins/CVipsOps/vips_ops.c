// See include/CVipsOps.h. A C target rather than `static inline` code in the
// system module's header, so that SwiftPM compiles it as C (optimised in release)
// and rebuilds it when it changes.
#include "CVipsOps.h"
#include <string.h>

/// Opens encoded bytes lazily (pixels are decoded when first read). The bytes
/// are not copied: they must outlive every image made from them.
/// `pages`: 0 leaves the loader's default, -1 every page, n the first n pages.
/// `shrink`: JPEG shrink-on-load factor (2, 4, 8); <= 1 leaves it unset.
/// `jpeg`: the bytes are a JPEG; its loader gets `unlimited`, which there only
/// lifts its rule that 100 libjpeg warnings (corrupt data it decoded past) fail
/// the file: a warning never refuses a JPEG in this package (docs/coder.md).
VipsImage *CVips_new_from_buffer(const void *buf, size_t len, int pages, int fail_on, int shrink, double scale, int jpeg) {
    if (jpeg && shrink > 1)
        return vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_RANDOM, "fail_on", fail_on, "unlimited", TRUE, "shrink", shrink, NULL);
    if (jpeg)
        return vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_RANDOM, "fail_on", fail_on, "unlimited", TRUE, NULL);
    if (pages != 0)
        return vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_RANDOM, "fail_on", fail_on, "n", pages, NULL);
    if (shrink > 1)
        return vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_RANDOM, "fail_on", fail_on, "shrink", shrink, NULL);
    if (scale > 0)
        return vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_RANDOM, "fail_on", fail_on, "scale", scale, NULL);
    return vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_RANDOM, "fail_on", fail_on, NULL);
}

/// Whether the named operation is marked untrusted (SVG, PDF, ...).
int CVips_is_untrusted(const char *name) {
    VipsOperation *op = vips_operation_new(name);
    if (!op) { vips_error_clear(); return 0; }
    int flags = vips_operation_get_flags(op);
    g_object_unref(op);
    return (flags & VIPS_OPERATION_UNTRUSTED) != 0;
}

/// `crop`: 0 for none (fit), else a VipsInteresting (centre, entropy, attention).
int CVips_thumbnail_buffer(void *buf, size_t len, VipsImage **out, int width, int height, int crop, int no_rotate, const char *option_string) {
    return vips_thumbnail_buffer(buf, len, out, width, "height", height, "size", VIPS_SIZE_DOWN,
                                 "crop", crop ? crop : VIPS_INTERESTING_NONE,
                                 "no_rotate", no_rotate, "option_string", option_string, NULL);
}

/// Thumbnail resampling for sources without shrink-on-load (PNG): a box shrink by
/// whole factors that leaves at most 2x, then one Lanczos reduce to exactly
/// `width` x `height`. Alpha is premultiplied around both, so transparent pixels
/// do not bleed colour into their neighbours; for 8-bit images the reduce runs on
/// 8-bit premultiplied values, where libvips' vector path is several times faster
/// than the float pass its own thumbnail makes.
int CVips_shrink_reduce(VipsImage *in, VipsImage **out, int width, int height) {
    int alpha = vips_image_hasalpha(in), narrow = in->BandFmt == VIPS_FORMAT_UCHAR;
    VipsBandFormat format = in->BandFmt;
    int hshrink = in->Xsize / width / 2, vshrink = in->Ysize / height / 2;
    if (hshrink < 1) hshrink = 1;
    if (vshrink < 1) vshrink = 1;
    VipsImage *steps[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    VipsImage *current = in;
    int status = 0;
    if (alpha && !status) { status = vips_premultiply(current, &steps[0], NULL); if (!status) current = steps[0]; }
    if ((hshrink > 1 || vshrink > 1) && !status) { status = vips_shrink(current, &steps[1], hshrink, vshrink, NULL); if (!status) current = steps[1]; }
    if (alpha && narrow && !status) { status = vips_cast(current, &steps[2], VIPS_FORMAT_UCHAR, NULL); if (!status) current = steps[2]; }
    if (!status && (current->Xsize != width || current->Ysize != height)) {
        status = vips_reduce(current, &steps[3], (double) current->Xsize / width, (double) current->Ysize / height,
                             "kernel", VIPS_KERNEL_LANCZOS3, NULL);
        if (!status) current = steps[3];
    }
    if (alpha && !status) { status = vips_unpremultiply(current, &steps[4], NULL); if (!status) current = steps[4]; }
    if (alpha && !status) { status = vips_cast(current, &steps[5], format, NULL); if (!status) current = steps[5]; }
    if (!status) {
        g_object_ref(current);
        *out = current;
    }
    for (int i = 0; i < 6; i++) if (steps[i]) g_object_unref(steps[i]);
    return status;
}

int CVips_rotate(VipsImage *in, VipsImage **out, double degrees) {
    double background[4] = {0, 0, 0, 0};
    VipsArrayDouble *bg = vips_array_double_new(background, in->Bands < 4 ? in->Bands : 4);
    int rc = vips_rotate(in, out, degrees, "background", bg, NULL);
    vips_area_unref(VIPS_AREA(bg));
    return rc;
}

VipsImage *CVips_from_memory(const void *data, size_t len, int width, int height, int bands) {
    VipsImage *raw = vips_image_new_from_memory_copy(data, len, width, height, bands, VIPS_FORMAT_UCHAR);
    if (!raw) return NULL;
    VipsImage *out = NULL;
    VipsInterpretation interpretation = bands >= 3 ? VIPS_INTERPRETATION_sRGB : VIPS_INTERPRETATION_B_W;
    int rc = vips_copy(raw, &out, "interpretation", interpretation, NULL);
    g_object_unref(raw);
    return rc ? NULL : out;
}

/// HEIF with AV1 (AVIF) or HEVC (HEIC), 8 bits per sample.
int CVips_heifsave(VipsImage *in, void **buf, size_t *len, int quality, int lossless, int strip, int avif, int effort, int subsample) {
    return vips_heifsave_buffer(in, buf, len, "Q", quality, "lossless", lossless, "strip", strip, "bitdepth", 8,
                                "compression", avif ? VIPS_FOREIGN_HEIF_COMPRESSION_AV1 : VIPS_FOREIGN_HEIF_COMPRESSION_HEVC,
                                "effort", effort, "subsample_mode", subsample, NULL);
}

int CVips_jxlsave(VipsImage *in, void **buf, size_t *len, int quality, int effort, int lossless, int strip) {
    return vips_jxlsave_buffer(in, buf, len, "Q", quality, "effort", effort, "lossless", lossless, "strip", strip, NULL);
}

/// Pixels as they leave the pipeline: 8-bit sRGB (3 bands, 4 with alpha) or
/// 8-bit grey (1 or 2 bands). An embedded profile is converted from (relative
/// colorimetric, as browsers do) and dropped; CMYK goes through its embedded
/// profile or libvips' built-in CMYK profile; 16-bit becomes 8-bit. With
/// `keep_profile`, RGB and grey pixels keep their values and their profile (only
/// 16-bit becomes 8-bit); CMYK is converted all the same, since no web format
/// but JPEG carries it. A profile that is corrupt or does not fit the image
/// (a grey profile on RGB, a Lab profile) is dropped and the pixels are taken as
/// sRGB, as browsers take them; `*ignored` says so.
int CVips_output_colour(VipsImage *in, VipsImage **out, int keep_profile, int *ignored) {
    *ignored = 0;
    VipsInterpretation space = vips_image_guess_interpretation(in);
    int cmyk = space == VIPS_INTERPRETATION_CMYK && in->Bands >= 4;
    int profile = vips_image_get_typeof(in, VIPS_META_ICC_NAME) != 0;
    if (profile) {
        const void *data = NULL; size_t length = 0;
        if (vips_image_get_blob(in, VIPS_META_ICC_NAME, &data, &length) || !vips_icc_is_compatible_profile(in, data, length)) {
            vips_error_clear();
            *ignored = 1;
            profile = 0;
        }
    }
    VipsImage *current = NULL;
    if (cmyk || (profile && !keep_profile)) {
        // `embedded` takes the file's profile; `input_profile` is for a CMYK file without one.
        if (vips_icc_transform(in, &current, "srgb", "embedded", profile, "input_profile", cmyk ? "cmyk" : "srgb",
                               "intent", VIPS_INTENT_RELATIVE, "depth", 8, NULL)) return -1;
    } else {
        int grey = space == VIPS_INTERPRETATION_B_W || space == VIPS_INTERPRETATION_GREY16;
        int plain = in->BandFmt == VIPS_FORMAT_UCHAR && (space == VIPS_INTERPRETATION_sRGB || space == VIPS_INTERPRETATION_B_W);
        if (plain) { current = in; g_object_ref(in); }
        else if (vips_colourspace(in, &current, grey ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB, NULL)) return -1;
        if (current->BandFmt != VIPS_FORMAT_UCHAR) {
            VipsImage *cast = NULL;
            int rc = vips_cast(current, &cast, VIPS_FORMAT_UCHAR, "shift", current->BandFmt == VIPS_FORMAT_USHORT, NULL);
            g_object_unref(current);
            if (rc) return -1;
            current = cast;
        }
    }
    // A fresh image to edit metadata on: the converted pixels have no profile
    // (sRGB is what an untagged file means); kept ones keep theirs.
    VipsImage *copy = NULL;
    int rc = vips_copy(current, &copy, NULL);
    g_object_unref(current);
    if (rc) return -1;
    if (!(keep_profile && profile && !cmyk)) vips_image_remove(copy, VIPS_META_ICC_NAME);
    *out = copy;
    return 0;
}

/// A copy without the metadata that `keepMetadata` would keep (EXIF, XMP, IPTC,
/// orientation), but with the ICC profile: for saving with strip off when only
/// the profile is wanted.
int CVips_profile_only(VipsImage *in, VipsImage **out) {
    if (vips_copy(in, out, NULL)) return -1;
    gchar **fields = vips_image_get_fields(*out);
    for (int i = 0; fields[i]; i++) {
        const char *f = fields[i];
        if (vips_isprefix("exif-", f) || vips_isprefix("xmp-", f) || vips_isprefix("iptc-", f) || !strcmp(f, "orientation"))
            vips_image_remove(*out, f);
    }
    g_strfreev(fields);
    return 0;
}

/// Flattens alpha onto an RGB (or grey) background, for formats without alpha.
int CVips_flatten(VipsImage *in, VipsImage **out, double r, double g, double b) {
    double rgb[3] = {r, g, b};
    int bands = in->Bands - 1 >= 3 ? 3 : 1;
    if (bands == 1) rgb[0] = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    VipsArrayDouble *background = vips_array_double_new(rgb, bands);
    VipsImage *flat = NULL;
    int rc = vips_flatten(in, &flat, "background", background, NULL);
    vips_area_unref(VIPS_AREA(background));
    if (rc) return rc;
    rc = vips_cast(flat, out, in->BandFmt, NULL);
    g_object_unref(flat);
    return rc;
}

/// Places the image on a `width` x `height` canvas at a compass direction
/// (VipsCompassDirection), the rest filled with `background` (one value per band).
int CVips_gravity(VipsImage *in, VipsImage **out, int direction, int width, int height, const double *background, int n) {
    VipsArrayDouble *bg = vips_array_double_new(background, n);
    int rc = vips_gravity(in, out, direction, width, height, "extend", VIPS_EXTEND_BACKGROUND, "background", bg, NULL);
    vips_area_unref(VIPS_AREA(bg));
    return rc;
}

/// The box of what differs from `background` by more than `threshold`.
int CVips_find_trim(VipsImage *in, int *left, int *top, int *width, int *height, double threshold, const double *background, int n) {
    VipsArrayDouble *bg = vips_array_double_new(background, n);
    int rc = vips_find_trim(in, left, top, width, height, "threshold", threshold, "background", bg, NULL);
    vips_area_unref(VIPS_AREA(bg));
    return rc;
}

/// The bands of one pixel, into `values` (at most `n`); returns the band count or -1.
int CVips_getpoint(VipsImage *in, int x, int y, double *values, int n) {
    double *vector = NULL; int count = 0;
    if (vips_getpoint(in, &vector, &count, x, y, NULL)) return -1;
    for (int i = 0; i < count && i < n; i++) values[i] = vector[i];
    g_free(vector);
    return count;
}

/// Multiplies the last band (alpha) by `factor`, leaving the others.
int CVips_scale_alpha(VipsImage *in, VipsImage **out, double factor) {
    int n = in->Bands;
    double a[8], b[8];
    if (n > 8) return -1;
    for (int i = 0; i < n; i++) { a[i] = i == n - 1 ? factor : 1.0; b[i] = 0; }
    return vips_linear(in, out, a, b, n, "uchar", TRUE, NULL);
}

/// The pixels as 8-bit bands, g_malloc'd (free with CVips_free).
void *CVips_write_uchar(VipsImage *in, size_t *len) {
    VipsImage *cast = NULL;
    if (vips_cast(in, &cast, VIPS_FORMAT_UCHAR, "shift", in->BandFmt == VIPS_FORMAT_USHORT, NULL)) return NULL;
    void *out = vips_image_write_to_memory(cast, len);
    g_object_unref(cast);
    return out;
}

/// Gaussian noise, for fixtures: a photo-like image with every band different.
int CVips_noise_rgb(VipsImage **out, int width, int height) {
    VipsImage *bands[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        if (vips_gaussnoise(&bands[i], width, height, "mean", 90.0 + 40 * i, "sigma", 30.0, NULL)) return -1;
    VipsImage *joined = NULL, *cast = NULL;
    int rc = vips_bandjoin(bands, &joined, 3, NULL);
    for (int i = 0; i < 3; i++) g_object_unref(bands[i]);
    if (rc) return rc;
    rc = vips_cast(joined, &cast, VIPS_FORMAT_UCHAR, NULL);
    g_object_unref(joined);
    if (rc) return rc;
    rc = vips_copy(cast, out, "interpretation", VIPS_INTERPRETATION_sRGB, NULL);
    g_object_unref(cast);
    return rc;
}

/// A CMYK copy of an RGB image, for fixtures: C, M, Y as 255 minus R, G, B and
/// K zero, labelled CMYK so that jpegsave writes a four-component (Adobe) JPEG.
int CVips_naive_cmyk(VipsImage *in, VipsImage **out) {
    VipsImage *inverted = NULL, *joined = NULL;
    if (vips_invert(in, &inverted, NULL)) return -1;
    int rc = vips_bandjoin_const1(inverted, &joined, 0.0, NULL);
    g_object_unref(inverted);
    if (rc) return rc;
    rc = vips_copy(joined, out, "interpretation", VIPS_INTERPRETATION_CMYK, NULL);
    g_object_unref(joined);
    return rc;
}

/// The ICC profile's bytes (owned by the image), or NULL.
const void *CVips_profile(VipsImage *image, size_t *len) {
    const void *data = NULL;
    if (!vips_image_get_typeof(image, VIPS_META_ICC_NAME) || vips_image_get_blob(image, VIPS_META_ICC_NAME, &data, len)) return NULL;
    return data;
}

/// Fixtures: 8-bit RGB or grey as 16-bit (x 257), labelled RGB16 or GREY16.
int CVips_to_16bit(VipsImage *in, VipsImage **out) {
    VipsImage *scaled = NULL;
    if (vips_linear1(in, &scaled, 257.0, 0.0, NULL)) return -1;
    VipsImage *cast = NULL;
    int rc = vips_cast(scaled, &cast, VIPS_FORMAT_USHORT, NULL);
    g_object_unref(scaled);
    if (rc) return rc;
    rc = vips_copy(cast, out, "interpretation", in->Bands >= 3 ? VIPS_INTERPRETATION_RGB16 : VIPS_INTERPRETATION_GREY16, NULL);
    g_object_unref(cast);
    return rc;
}

static CVips_log_handler cvips_log_handler;

static void cvips_glib_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)data;
    CVips_log_handler handler = cvips_log_handler;
    if (handler) handler(domain ? domain : "", (int)level, message ? message : "");
}

void CVips_route_log(CVips_log_handler handler) {
    cvips_log_handler = handler;
    GLogLevelFlags levels = (GLogLevelFlags)(G_LOG_LEVEL_MASK | G_LOG_FLAG_FATAL | G_LOG_FLAG_RECURSION);
    const char *domains[] = { "VIPS", "GLib", "GLib-GObject", "GModule" };
    for (size_t i = 0; i < sizeof(domains) / sizeof(domains[0]); i++) {
        g_log_set_handler(domains[i], levels, cvips_glib_log, NULL);
    }
}

/// See CVipsOps.h.
int CVips_maplut_uchar(VipsImage *in, VipsImage **out, const unsigned char *lut, int bands) {
    VipsImage *table = vips_image_new_from_memory_copy(lut, 256 * (size_t) bands, 256, 1, bands, VIPS_FORMAT_UCHAR);
    if (!table) return -1;
    // maplut takes the table's interpretation (multiband), which would make a
    // fourth band no longer alpha: the input's is put back.
    VipsImage *mapped = NULL;
    int result = vips_maplut(in, &mapped, table, NULL) || vips_copy(mapped, out, "interpretation", vips_image_get_interpretation(in), NULL);
    g_object_unref(table);
    if (mapped) g_object_unref(mapped);
    return result ? -1 : 0;
}

/// See CVipsOps.h.
int CVips_recomb_uchar(VipsImage *in, VipsImage **out, const double *matrix, int n) {
    VipsImage *m = vips_image_new_matrix_from_array(n, n, matrix, n * n);
    if (!m) return -1;
    VipsImage *combined = NULL, *rounded = NULL;
    int result = vips_recomb(in, &combined, m, NULL) || vips_round(combined, &rounded, VIPS_OPERATION_ROUND_RINT, NULL)
        || vips_cast(rounded, out, VIPS_FORMAT_UCHAR, NULL);
    g_object_unref(m);
    if (combined) g_object_unref(combined);
    if (rounded) g_object_unref(rounded);
    return result ? -1 : 0;
}

/// See CVipsOps.h.
int CVips_pixelate(VipsImage *in, VipsImage **out, int size) {
    int width = in->Xsize, height = in->Ysize;
    int paddedWidth = (width + size - 1) / size * size, paddedHeight = (height + size - 1) / size * size;
    VipsImage *padded = NULL, *shrunk = NULL, *zoomed = NULL;
    int result = vips_embed(in, &padded, 0, 0, paddedWidth, paddedHeight, "extend", VIPS_EXTEND_COPY, NULL)
        || vips_shrink(padded, &shrunk, (double) size, (double) size, NULL) || vips_zoom(shrunk, &zoomed, size, size, NULL)
        || vips_extract_area(zoomed, out, 0, 0, width, height, NULL);
    if (padded) g_object_unref(padded);
    if (shrunk) g_object_unref(shrunk);
    if (zoomed) g_object_unref(zoomed);
    return result ? -1 : 0;
}

/// See CVipsOps.h.
int CVips_text_overlay(VipsImage **out, const char *markup, const char *font, double red, double green, double blue) {
    VipsImage *mask = NULL, *colour = NULL, *joined = NULL;
    double ink[3] = { red, green, blue };
    int result = vips_text(&mask, markup, "font", font, "dpi", 72, NULL);
    if (!result) result = (colour = vips_image_new_from_image(mask, ink, 3)) == NULL;
    if (!result) result = vips_bandjoin2(colour, mask, &joined, NULL);
    if (!result) result = vips_copy(joined, out, "interpretation", VIPS_INTERPRETATION_sRGB, NULL);
    if (mask) g_object_unref(mask);
    if (colour) g_object_unref(colour);
    if (joined) g_object_unref(joined);
    return result ? -1 : 0;
}
