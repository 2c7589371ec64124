// The libjpeg calls of the turbojpeg coder (see include/CJPEGTurboOps.h): header,
// scaled decode, ICC profile, EXIF orientation and the encoder. libjpeg reports
// errors by calling error_exit, which must not return; Swift cannot catch a
// longjmp, so every libjpeg call is made here, inside a setjmp. A C target rather
// than `static inline` code in the system module's header, so that SwiftPM
// compiles it as C (optimised in release) and rebuilds it when it changes.
#include "CJPEGTurboOps.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    /// A premature end of data is an error (it is only a warning to libjpeg).
    int strict;
    /// Set when libjpeg warned that the data ended early.
    int truncated;
    char message[JMSG_LENGTH_MAX + 64];
} CJT_error;

struct CJT_context {
    struct jpeg_decompress_struct info;
    CJT_error error;
    struct jpeg_progress_mgr progress;
    int started;
    int maxScans;
};

/// Called by libjpeg between scans (and rows): a file with more scans than the
/// limit is refused before the next one is decoded. Each scan of a progressive
/// file is a pass over the whole image, so scans, not bytes, bound its cost.
static void CJT_progress(j_common_ptr common) {
    if (!common->is_decompressor) return;
    j_decompress_ptr info = (j_decompress_ptr) common;
    CJT_context *context = (CJT_context *) info->client_data;
    if (context->maxScans > 0 && info->input_scan_number > context->maxScans) {
        CJT_error *error = (CJT_error *) common->err;
        snprintf(error->message, sizeof error->message, "the JPEG has more than %d scans", context->maxScans);
        longjmp(error->jump, 1);
    }
}

static void CJT_error_exit(j_common_ptr common) {
    CJT_error *error = (CJT_error *) common->err;
    (*common->err->format_message)(common, error->message);
    longjmp(error->jump, 1);
}

static void CJT_emit_message(j_common_ptr common, int level) {
    CJT_error *error = (CJT_error *) common->err;
    if (level >= 0) return;  // trace messages
    if (common->err->msg_code == JWRN_JPEG_EOF) {
        error->truncated = 1;
        if (error->strict) {
            snprintf(error->message, sizeof error->message, "the JPEG data is truncated (its end is missing)");
            longjmp(error->jump, 1);
        }
    }
    common->err->num_warnings++;
}

static void CJT_output_message(j_common_ptr common) { (void) common; }

/// Reads an EXIF orientation from an APP1 payload ("Exif\0\0" then TIFF); 1 if
/// there is none or the structure is broken. Every offset is bounds-checked.
/// As libvips reads it (through libexif, which converts the tag to SHORT):
/// one value of any integer type (BYTE, SHORT, LONG and their signed kinds),
/// held in the entry itself; another count is no orientation.
static int CJT_exif_orientation(const unsigned char *data, unsigned int length) {
    if (length < 14 || memcmp(data, "Exif\0\0", 6) != 0) return 1;
    const unsigned char *tiff = data + 6;
    unsigned int size = length - 6;
    int little;
    if (tiff[0] == 'I' && tiff[1] == 'I') little = 1;
    else if (tiff[0] == 'M' && tiff[1] == 'M') little = 0;
    else return 1;
#define CJT_U16(p) (little ? (unsigned int) ((p)[0] | (p)[1] << 8) : (unsigned int) ((p)[0] << 8 | (p)[1]))
#define CJT_U32(p) (little ? ((unsigned int) (p)[0] | (unsigned int) (p)[1] << 8 | (unsigned int) (p)[2] << 16 | (unsigned int) (p)[3] << 24) \
                           : ((unsigned int) (p)[0] << 24 | (unsigned int) (p)[1] << 16 | (unsigned int) (p)[2] << 8 | (unsigned int) (p)[3]))
    if (CJT_U16(tiff + 2) != 42) return 1;
    unsigned int ifd = CJT_U32(tiff + 4);
    if (ifd > size || size - ifd < 2) return 1;
    unsigned int count = CJT_U16(tiff + ifd);
    if ((size - ifd - 2) / 12 < count) return 1;
    for (unsigned int i = 0; i < count; i++) {
        const unsigned char *entry = tiff + ifd + 2 + 12 * i;
        if (CJT_U16(entry) == 0x0112) {
            unsigned int type = CJT_U16(entry + 2), count = CJT_U32(entry + 4), value = 0;
            if (count != 1) return 1;
            if (type == 1 || type == 6) value = entry[8];                      // BYTE, SBYTE
            else if (type == 3 || type == 8) value = CJT_U16(entry + 8);       // SHORT, SSHORT
            else if (type == 4 || type == 9) value = CJT_U32(entry + 8);       // LONG, SLONG
            return value >= 1 && value <= 8 ? (int) value : 1;
        }
    }
#undef CJT_U16
#undef CJT_U32
    return 1;
}

void CJT_close(CJT_context *context) {
    if (!context) return;
    jpeg_destroy_decompress(&context->info);
    free(context);
}

/// Opens the bytes and reads the header. The bytes are not copied: they must
/// outlive the context. On failure returns NULL and writes the reason into
/// `message` (at least 256 bytes).
CJT_context *CJT_open(const unsigned char *bytes, size_t length, int strict, CJT_header *header, char *message, size_t message_size) {
    CJT_context *context = (CJT_context *) calloc(1, sizeof(CJT_context));
    if (!context) { snprintf(message, message_size, "out of memory"); return NULL; }
    context->info.err = jpeg_std_error(&context->error.pub);
    context->error.pub.error_exit = CJT_error_exit;
    context->error.pub.emit_message = CJT_emit_message;
    context->error.pub.output_message = CJT_output_message;
    context->error.strict = strict;
    if (setjmp(context->error.jump)) {
        snprintf(message, message_size, "%s", context->error.message);
        CJT_close(context);
        return NULL;
    }
    jpeg_create_decompress(&context->info);
    if (length > 0xFFFFFFFFu) { snprintf(message, message_size, "the JPEG data is larger than 4 GiB"); CJT_close(context); return NULL; }
    jpeg_mem_src(&context->info, bytes, (unsigned long) length);
    jpeg_save_markers(&context->info, JPEG_APP0 + 1, 0xFFFF);
    jpeg_save_markers(&context->info, JPEG_APP0 + 2, 0xFFFF);
    jpeg_read_header(&context->info, TRUE);
    memset(header, 0, sizeof *header);
    header->width = (int) context->info.image_width;
    header->height = (int) context->info.image_height;
    header->components = context->info.num_components;
    header->colorSpace = (int) context->info.jpeg_color_space;
    header->progressive = context->info.progressive_mode;
    header->arithmetic = context->info.arith_code;
    header->precision = context->info.data_precision;
    header->orientation = 1;
    for (jpeg_saved_marker_ptr marker = context->info.marker_list; marker; marker = marker->next) {
        if (marker->marker == JPEG_APP0 + 1 && header->orientation == 1)
            header->orientation = CJT_exif_orientation(marker->data, marker->data_length);
        if (marker->marker == JPEG_APP0 + 2 && marker->data_length >= 12 && memcmp(marker->data, "ICC_PROFILE\0", 12) == 0)
            header->hasICC = 1;
    }
    return context;
}

/// The ICC profile assembled from its APP2 chunks by libjpeg-turbo (malloc'd,
/// free with CJT_free), or NULL when there is none or its chunks do not fit
/// together (a missing or repeated sequence number: libjpeg warns and gives up).
unsigned char *CJT_icc_profile(CJT_context *context, unsigned int *length) {
    JOCTET *volatile data = NULL;
    *length = 0;
    if (setjmp(context->error.jump)) { free(data); return NULL; }
    JOCTET *out = NULL;
    unsigned int size = 0;
    if (!jpeg_read_icc_profile(&context->info, &out, &size)) return NULL;
    data = out;
    *length = size;
    return out;
}

/// The output size at scale `numerator`/8 (1...16), without decoding.
void CJT_scaled_size(CJT_context *context, int numerator, int *width, int *height) {
    context->info.scale_num = (unsigned int) numerator;
    context->info.scale_denom = 8;
    jpeg_calc_output_dimensions(&context->info);
    *width = (int) context->info.output_width;
    *height = (int) context->info.output_height;
}

/// Decodes at scale `numerator`/8 into a buffer it mallocs (free with CJT_free):
/// RGB for colour files, grey for grey ones. Block smoothing (libjpeg's estimate
/// of missing AC coefficients in progressive files) is off: at the scales a
/// thumbnail uses it costs more than it changes.
int CJT_decode(CJT_context *context, int numerator, int maxScans, unsigned char **pixels, int *width, int *height, int *bands, int *truncated) {
    unsigned char *volatile buffer = NULL;
    *pixels = NULL;
    if (setjmp(context->error.jump)) {
        free(buffer);
        return -1;
    }
    struct jpeg_decompress_struct *info = &context->info;
    info->scale_num = (unsigned int) numerator;
    info->scale_denom = 8;
    info->do_block_smoothing = FALSE;
    info->out_color_space = info->jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
    context->maxScans = maxScans;
    context->progress.progress_monitor = CJT_progress;
    info->progress = &context->progress;
    info->client_data = context;
    CJT_progress((j_common_ptr) info);  // the header has read the first scan's
    jpeg_start_decompress(info);
    context->started = 1;
    size_t stride = (size_t) info->output_width * (size_t) info->output_components;
    buffer = (unsigned char *) malloc(stride * info->output_height);
    if (!buffer) { snprintf(context->error.message, sizeof context->error.message, "out of memory for %ux%u pixels", info->output_width, info->output_height); return -1; }
    while (info->output_scanline < info->output_height) {
        JSAMPROW rows[4];
        int count = 0;
        for (; count < 4 && info->output_scanline + count < info->output_height; count++)
            rows[count] = buffer + stride * (info->output_scanline + count);
        jpeg_read_scanlines(info, rows, (JDIMENSION) count);
    }
    // No jpeg_finish_decompress: it reads on to EOI, which libvips' loader never
    // does, and the two must agree on what a broken file is (docs/coder.md).
    // A multi-scan file was read to its EOI by jpeg_start_decompress.
    *pixels = buffer;
    *width = (int) info->output_width;
    *height = (int) info->output_height;
    *bands = info->output_components;
    *truncated = context->error.truncated;
    return 0;
}

/// Encodes 8-bit grey (1 band) or RGB (3 bands) pixels as a JFIF JPEG into a
/// buffer it mallocs (free with CJT_free). Returns 0, or -1 with the reason in
/// `message`.
int CJT_encode(const unsigned char *pixels, int width, int height, int bands, const CJT_encode_options *options,
                      unsigned char **out, unsigned long *outLength, char *message, size_t messageSize) {
    struct jpeg_compress_struct info;
    CJT_error error;
    unsigned char *volatile buffer = NULL;
    unsigned long length = 0;
    jpeg_scan_info scans[12];
    memset(&error, 0, sizeof error);
    *out = NULL;
    *outLength = 0;
    if (width < 1 || height < 1 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION || (bands != 1 && bands != 3)) {
        snprintf(message, messageSize, "cannot write %dx%d pixels with %d bands as JPEG", width, height, bands);
        return -1;
    }
    info.err = jpeg_std_error(&error.pub);
    error.pub.error_exit = CJT_error_exit;
    error.pub.output_message = CJT_output_message;
    if (setjmp(error.jump)) {
        snprintf(message, messageSize, "%s", error.message);
        jpeg_destroy_compress(&info);
        free(buffer);
        return -1;
    }
    jpeg_create_compress(&info);
    jpeg_mem_dest(&info, (unsigned char **) &buffer, &length);
    info.image_width = (JDIMENSION) width;
    info.image_height = (JDIMENSION) height;
    info.input_components = bands;
    info.in_color_space = bands == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, options->quality < 1 ? 1 : options->quality > 100 ? 100 : options->quality, TRUE);
    info.optimize_coding = options->optimize ? TRUE : FALSE;
    info.restart_interval = (unsigned int) (options->restartInterval < 0 ? 0 : options->restartInterval);
    if (bands == 3) {
        int h = options->subsampling >= 1 ? 2 : 1, v = options->subsampling >= 2 ? 2 : 1;
        info.comp_info[0].h_samp_factor = h;
        info.comp_info[0].v_samp_factor = v;
        info.comp_info[1].h_samp_factor = info.comp_info[1].v_samp_factor = 1;
        info.comp_info[2].h_samp_factor = info.comp_info[2].v_samp_factor = 1;
    }
    if (options->progressive && options->separateDCScans) {
        int n = 0;
        for (int c = 0; c < bands; c++) scans[n++] = (jpeg_scan_info) { 1, { c }, 0, 0, 0, 1 };
        for (int c = 0; c < bands; c++) scans[n++] = (jpeg_scan_info) { 1, { c }, 1, 63, 0, 0 };
        for (int c = 0; c < bands; c++) scans[n++] = (jpeg_scan_info) { 1, { c }, 0, 0, 1, 0 };
        info.scan_info = scans;
        info.num_scans = n;
    } else if (options->progressive) {
        jpeg_simple_progression(&info);
    }
    jpeg_start_compress(&info, TRUE);
    size_t stride = (size_t) width * (size_t) bands;
    while (info.next_scanline < info.image_height) {
        JSAMPROW row = (JSAMPROW) (pixels + stride * info.next_scanline);
        jpeg_write_scanlines(&info, &row, 1);
    }
    jpeg_finish_compress(&info);
    jpeg_destroy_compress(&info);
    *out = buffer;
    *outLength = length;
    return 0;
}

const char *CJT_message(CJT_context *context) { return context->error.message; }
long CJT_warnings(CJT_context *context) { return context->error.pub.num_warnings; }
void CJT_free(void *pointer) { free(pointer); }
