#ifndef CVIPSOPS_H
#define CVIPSOPS_H
// C code of ours over libvips: the colour, resampling and alpha policy of the
// vips coder and transformers, and the fixtures the tests make. Every symbol has
// the CVips_ prefix. Each returns 0 on success and -1 on failure, with the reason
// in libvips' error buffer, unless it says otherwise. The thin typed wrappers of
// libvips' variadic calls stay in the CVips module's shim.h.
#include <stddef.h>
#include <stdint.h>
#include <vips/vips.h>

/// Loads libvips where the package calls it through lazy_vips.S (x86-64 Linux),
/// once: NULL when it is loaded, else the dynamic loader's reason. Elsewhere
/// libvips is linked and this returns NULL.
const char *CVips_load_library(void);

/// Opens encoded bytes lazily (pixels are decoded when first read). The bytes
/// are not copied: they must outlive every image made from them.
/// `pages`: 0 leaves the loader's default, -1 every page, n the first n pages.
/// `shrink`: JPEG shrink-on-load factor (2, 4, 8); <= 1 leaves it unset.
/// `jpeg`: the bytes are a JPEG (its loader is told `unlimited`: warnings never fail it).
VipsImage *CVips_new_from_buffer(const void *buf, size_t len, int pages, int fail_on, int shrink, double scale, int jpeg);

/// Whether the named operation is marked untrusted (SVG, PDF, ...).
int CVips_is_untrusted(const char *name);

/// `crop`: 0 for none (fit), else a VipsInteresting (centre, entropy, attention).
int CVips_thumbnail_buffer(void *buf, size_t len, VipsImage **out, int width, int height, int crop, int no_rotate, const char *option_string);

/// Thumbnail resampling for sources without shrink-on-load (PNG): a box shrink by
/// whole factors that leaves at most 2x, then one Lanczos reduce to exactly
/// `width` x `height`. Alpha is premultiplied around both, so transparent pixels
/// do not bleed colour into their neighbours; for 8-bit images the reduce runs on
/// 8-bit premultiplied values, where libvips' vector path is several times faster
/// than the float pass its own thumbnail makes.
int CVips_shrink_reduce(VipsImage *in, VipsImage **out, int width, int height);

int CVips_rotate(VipsImage *in, VipsImage **out, double degrees);

VipsImage *CVips_from_memory(const void *data, size_t len, int width, int height, int bands);

/// HEIF with AV1 (AVIF) or HEVC (HEIC), 8 bits per sample.
int CVips_heifsave(VipsImage *in, void **buf, size_t *len, int quality, int lossless, int strip, int avif, int effort, int subsample);
/// An AVIF decoded by libavif (avif_ops.c): displayed size (after clap, irot and
/// imir), frames of 8-bit RGBA stacked, durations in seconds, the ICC profile and
/// the CICP transfer and primaries. `message` says why a call returned -1.
typedef struct {
    int width, height, stored_width, stored_height;
    int frames, depth, has_alpha, transfer, primaries;
    double *durations;
    unsigned char *pixels;
    unsigned char *icc;
    size_t icc_len;
    char message[256];
} CAVIF_image;
/// Loads libavif where the package calls it through lazy_vips.S (x86-64 Linux),
/// once, and checks it has the ABI of the headers built against: NULL when it
/// is ready, else why not. CAVIF_decode and CAVIF_encode_sequence call it first.
const char *CAVIF_load_library(void);
int CAVIF_decode(const void *data, size_t len, uint32_t pixel_limit, uint32_t max_frames, int header_only, int first_frame_only, CAVIF_image *out);
void CAVIF_release(CAVIF_image *image);
/// An animation as an AVIF sequence (libavif): `frames` of 8-bit RGB or RGBA
/// stacked, durations in ms. `*out` is malloc'd (free()); -1 with `message` on failure.
int CAVIF_encode_sequence(const unsigned char *pixels, int width, int height, int frames, int channels, const int *durations,
                          int quality, int speed, unsigned char **out, size_t *out_len, char *message, size_t message_len);
void CAVIF_free(void *pointer);
/// Whether fontconfig has the font family `family` (compared without case): 1,
/// 0 when it would draw another family in its place, -1 when fontconfig cannot
/// be asked (fonts.c).
int CVips_font_family_installed(const char *family);

/// JPEG XL (libjxl through libvips' jxlsave): quality, effort 3...9, lossless, strip.
int CVips_jxlsave(VipsImage *in, void **buf, size_t *len, int quality, int effort, int lossless, int strip);

/// Pixels as they leave the pipeline: 8-bit sRGB (3 bands, 4 with alpha) or
/// 8-bit grey (1 or 2 bands). An embedded profile is converted from (relative
/// colorimetric, as browsers do) and dropped; CMYK goes through its embedded
/// profile or libvips' built-in CMYK profile; 16-bit becomes 8-bit. With
/// `keep_profile`, RGB and grey pixels keep their values and their profile (only
/// 16-bit becomes 8-bit); CMYK is converted all the same, since no web format
/// but JPEG carries it. A profile that is corrupt or does not fit the image
/// (a grey profile on RGB, a Lab profile) is dropped and the pixels are taken as
/// sRGB, as browsers take them; `*ignored` says so.
int CVips_output_colour(VipsImage *in, VipsImage **out, int keep_profile, int *ignored);

/// A copy without the metadata that `keepMetadata` would keep (EXIF, XMP, IPTC,
/// orientation), but with the ICC profile: for saving with strip off when only
/// the profile is wanted.
int CVips_profile_only(VipsImage *in, VipsImage **out);

/// Flattens alpha onto an RGB (or grey) background, for formats without alpha.
int CVips_flatten(VipsImage *in, VipsImage **out, double r, double g, double b);

/// Places the image on a `width` x `height` canvas at a compass direction
/// (VipsCompassDirection), the rest filled with `background` (one value per band).
int CVips_gravity(VipsImage *in, VipsImage **out, int direction, int width, int height, const double *background, int n);

/// The box of what differs from `background` by more than `threshold`.
int CVips_find_trim(VipsImage *in, int *left, int *top, int *width, int *height, double threshold, const double *background, int n);

/// The bands of one pixel, into `values` (at most `n`); returns the band count or -1.
int CVips_getpoint(VipsImage *in, int x, int y, double *values, int n);

/// Multiplies the last band (alpha) by `factor`, leaving the others.
int CVips_scale_alpha(VipsImage *in, VipsImage **out, double factor);

/// The pixels as 8-bit bands, g_malloc'd (free with CVips_free).
void *CVips_write_uchar(VipsImage *in, size_t *len);

/// Gaussian noise, for fixtures: a photo-like image with every band different.
int CVips_noise_rgb(VipsImage **out, int width, int height);

/// A CMYK copy of an RGB image, for fixtures: C, M, Y as 255 minus R, G, B and
/// K zero, labelled CMYK so that jpegsave writes a four-component (Adobe) JPEG.
int CVips_naive_cmyk(VipsImage *in, VipsImage **out);

/// The ICC profile's bytes (owned by the image), or NULL.
const void *CVips_profile(VipsImage *image, size_t *len);

/// Fixtures: 8-bit RGB or grey as 16-bit (x 257), labelled RGB16 or GREY16.
int CVips_to_16bit(VipsImage *in, VipsImage **out);

/// Receives one GLib log message: its domain ("VIPS", "GLib", ...), its level
/// (GLogLevelFlags bits) and its text.
typedef void (*CVips_log_handler)(const char *domain, int level, const char *message);

/// Routes the log messages of libvips and GLib (libvips' warnings, such as
/// "VipsJpeg: Corrupt JPEG data", which GLib would print to stderr as two lines
/// of their own) to `handler`, from whichever thread logs them.
void CVips_route_log(CVips_log_handler handler);

/// Maps each band of an 8-bit image through a table of its own: `lut` holds
/// 256 entries per band, interleaved (entry i of band b at i * bands + b).
int CVips_maplut_uchar(VipsImage *in, VipsImage **out, const unsigned char *lut, int bands);
/// Each pixel's bands times the n x n `matrix` (row-major; n is the image's
/// band count), rounded to the nearest and clamped to 8 bits.
int CVips_recomb_uchar(VipsImage *in, VipsImage **out, const double *matrix, int n);
/// Blocks of `size` x `size` pixels, each its mean (the image's last row and
/// column repeated to fill the partial blocks at its edges; a box shrink, then
/// a nearest-neighbour zoom), cut back to the input's size.
int CVips_pixelate(VipsImage *in, VipsImage **out, int size);
/// `markup` (Pango markup: escape what is plain text) drawn by vips_text in
/// `font` (a Pango description, "DejaVu Sans 24px") at 72 dpi, as 8-bit sRGB in
/// the colour with the glyphs' coverage as alpha.
int CVips_text_overlay(VipsImage **out, const char *markup, const char *font, double red, double green, double blue);

/// What `CVips_run_child` ended with.
enum {
    CVIPS_CHILD_OK = 0,                /// the child ran and closed its output (see `exit_status`)
    CVIPS_CHILD_FAILED_TO_START = 1,   /// no child (errno says why) or a failed poll
    CVIPS_CHILD_TIMED_OUT = 2,         /// killed at the deadline
    CVIPS_CHILD_OUTPUT_TOO_LARGE = 3,  /// killed when its output passed `max_output`
};

/// Runs `path` with `argv` (NULL-terminated), `input` as its stdin (from memory,
/// never a file on disk), until it exits or `timeout_ms` passes, when it is
/// killed (SIGKILL). Its stdout is returned in `*output` (malloc'd, the caller
/// frees it) when the result is CVIPS_CHILD_OK; more than `max_output` bytes
/// kills it. The last `error_cap - 1` bytes of its stderr land in `error_tail`.
/// `exit_status` is its exit code, or 128 + the signal that ended it (minus the
/// errno when no child started). Every
/// child is reaped before this returns. `envp`: its environment (NULL: ours).
/// Not a libvips call: no error buffer.
int CVips_run_child(const char *path, char *const argv[], const void *input, size_t input_len,
                    int timeout_ms, size_t max_output, unsigned char **output, size_t *output_len,
                    int *exit_status, char *error_tail, size_t error_cap, char *const envp[]);

#endif
