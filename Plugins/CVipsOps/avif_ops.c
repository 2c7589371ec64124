// AVIF through libavif: still images with their clean aperture (clap), rotation
// (irot) and mirror (imir) applied, and sequences frame by frame, as 8-bit RGBA.
// libvips 8.14's heif loader (libheif 1.15) refuses transformed files and never
// reads sequences; libavif 0.11 reads both but leaves the transforms to us.
#include "CVipsOps.h"
#include <avif/avif.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cavif_fail(CAVIF_image *out, avifDecoder *decoder, const char *what, avifResult result) {
    const char *detail = decoder && decoder->diag.error[0] ? decoder->diag.error : "";
    snprintf(out->message, sizeof out->message, "%s: %s%s%s", what, avifResultToString(result), detail[0] ? ": " : "", detail);
    if (decoder) avifDecoderDestroy(decoder);
    CAVIF_release(out);
    return -1;
}

// The clean aperture as a rectangle: a whole width and height, centred at the
// offsets from the image's centre. libavif's own conversion refuses an origin that
// falls between pixels (kimono.crop.avif's is 271.5), which the box allows; the
// origin is rounded half up (as link-u's reference crops are), and the rectangle
// must lie inside the image.
static int cavif_crop(const avifCleanApertureBox *clap, uint32_t width, uint32_t height, avifCropRect *crop) {
    if (!clap->widthD || !clap->heightD || !clap->horizOffD || !clap->vertOffD) return 0;
    if (clap->widthN % clap->widthD || clap->heightN % clap->heightD) return 0;
    double w = (double)(clap->widthN / clap->widthD), h = (double)(clap->heightN / clap->heightD);
    double offset_x = (double)(int32_t)clap->horizOffN / (double)(int32_t)clap->horizOffD;
    double offset_y = (double)(int32_t)clap->vertOffN / (double)(int32_t)clap->vertOffD;
    double left = floor(offset_x + (width - w) / 2.0 + 0.5), top = floor(offset_y + (height - h) / 2.0 + 0.5);
    if (w < 1 || h < 1 || left < 0 || top < 0 || left + w > width || top + h > height) return 0;
    crop->x = (uint32_t)left;
    crop->y = (uint32_t)top;
    crop->width = (uint32_t)w;
    crop->height = (uint32_t)h;
    return 1;
}

// The source pixel of output pixel (x, y): the mirror undone, then the rotation
// (anti-clockwise by 90 * angle), then the crop's origin added.
static void cavif_source(int x, int y, int width, int height, int crop_w, int crop_h, int angle, int mirror, int *sx, int *sy) {
    if (mirror == 0) y = height - 1 - y;       // top and bottom exchanged
    else if (mirror == 1) x = width - 1 - x;   // left and right exchanged
    switch (angle) {
    case 1: *sx = crop_w - 1 - y; *sy = x; break;
    case 2: *sx = crop_w - 1 - x; *sy = crop_h - 1 - y; break;
    case 3: *sx = y; *sy = crop_h - 1 - x; break;
    default: *sx = x; *sy = y;
    }
}

// The decoded frame, converted to RGBA8 and transformed into `frame`.
static avifResult cavif_frame(avifDecoder *decoder, const avifCropRect *crop, int angle, int mirror, int width, int height, uint8_t *frame) {
    avifRGBImage rgb;
    avifRGBImageSetDefaults(&rgb, decoder->image);
    rgb.format = AVIF_RGB_FORMAT_RGBA;
    rgb.depth = 8;
    avifRGBImageAllocatePixels(&rgb);
    avifResult result = avifImageYUVToRGB(decoder->image, &rgb);
    if (result == AVIF_RESULT_OK) {
        for (int y = 0; y < height; y++) {
            for (int x = 0; x < width; x++) {
                int sx, sy;
                cavif_source(x, y, width, height, (int)crop->width, (int)crop->height, angle, mirror, &sx, &sy);
                const uint8_t *from = rgb.pixels + (size_t)(crop->y + sy) * rgb.rowBytes + (size_t)(crop->x + sx) * 4;
                memcpy(frame + ((size_t)y * width + x) * 4, from, 4);
            }
        }
    }
    avifRGBImageFreePixels(&rgb);
    return result;
}

int CAVIF_decode(const void *data, size_t len, uint32_t pixel_limit, uint32_t max_frames, int header_only, int first_frame_only, CAVIF_image *out) {
    memset(out, 0, sizeof *out);
    const char *unavailable = CAVIF_load_library();
    if (unavailable) { snprintf(out->message, sizeof out->message, "libavif cannot be loaded: %s", unavailable); return -1; }
    avifDecoder *decoder = avifDecoderCreate();
    if (!decoder) return cavif_fail(out, NULL, "avifDecoderCreate", AVIF_RESULT_OUT_OF_MEMORY);
    decoder->imageSizeLimit = pixel_limit && pixel_limit < AVIF_DEFAULT_IMAGE_SIZE_LIMIT ? pixel_limit : AVIF_DEFAULT_IMAGE_SIZE_LIMIT;
    // No side longer than the pixel limit allows (a 1-pixel-high strip at most), nor libavif's own 32768.
    decoder->imageDimensionLimit = pixel_limit && pixel_limit < AVIF_DEFAULT_IMAGE_DIMENSION_LIMIT ? pixel_limit : AVIF_DEFAULT_IMAGE_DIMENSION_LIMIT;
    decoder->imageCountLimit = max_frames;
    decoder->ignoreExif = AVIF_TRUE;
    decoder->ignoreXMP = AVIF_TRUE;
    // Not strict, as browsers are not: files with two ipma boxes (link-u's
    // plum-blossom alpha samples) or a clean aperture whose origin falls between
    // pixels (cavif_crop checks it) decode. The limits below still hold.
    decoder->strictFlags = AVIF_STRICT_DISABLED;
    avifResult result = avifDecoderSetIOMemory(decoder, data, len);
    if (result != AVIF_RESULT_OK) return cavif_fail(out, decoder, "reading", result);
    result = avifDecoderParse(decoder);
    if (result != AVIF_RESULT_OK) return cavif_fail(out, decoder, "parsing", result);

    const avifImage *image = decoder->image;
    avifCropRect crop = { 0, 0, image->width, image->height };
    if ((image->transformFlags & AVIF_TRANSFORM_CLAP) && !cavif_crop(&image->clap, image->width, image->height, &crop)) {
        snprintf(out->message, sizeof out->message, "the clean aperture (clap) is not a rectangle inside the %ux%u image", image->width, image->height);
        avifDecoderDestroy(decoder);
        return -1;
    }
    int angle = (image->transformFlags & AVIF_TRANSFORM_IROT) ? (image->irot.angle & 3) : 0;
    int mirror = (image->transformFlags & AVIF_TRANSFORM_IMIR) ? image->imir.mode : -1;
    out->stored_width = (int)image->width;
    out->stored_height = (int)image->height;
    out->width = (int)(angle % 2 ? crop.height : crop.width);
    out->height = (int)(angle % 2 ? crop.width : crop.height);
    out->frames = first_frame_only ? 1 : decoder->imageCount;
    out->depth = (int)image->depth;
    out->has_alpha = decoder->alphaPresent ? 1 : 0;
    out->transfer = (int)image->transferCharacteristics;
    out->primaries = (int)image->colorPrimaries;
    out->durations = calloc((size_t)out->frames, sizeof(double));
    if (!out->durations) return cavif_fail(out, decoder, "allocating", AVIF_RESULT_OUT_OF_MEMORY);
    for (int i = 0; i < out->frames; i++) {
        avifImageTiming timing;
        if (avifDecoderNthImageTiming(decoder, (uint32_t)i, &timing) == AVIF_RESULT_OK) out->durations[i] = timing.duration;
    }
    if (image->icc.size > 0) {
        out->icc = malloc(image->icc.size);
        if (!out->icc) return cavif_fail(out, decoder, "allocating", AVIF_RESULT_OUT_OF_MEMORY);
        memcpy(out->icc, image->icc.data, image->icc.size);
        out->icc_len = image->icc.size;
    }
    if (header_only) {
        avifDecoderDestroy(decoder);
        return 0;
    }
    size_t frame_bytes = (size_t)out->width * (size_t)out->height * 4;
    out->pixels = malloc(frame_bytes * (size_t)out->frames);
    if (!out->pixels) return cavif_fail(out, decoder, "allocating", AVIF_RESULT_OUT_OF_MEMORY);
    for (int i = 0; i < out->frames; i++) {
        char what[48];
        snprintf(what, sizeof what, "frame %d", i);
        result = avifDecoderNextImage(decoder);
        if (result != AVIF_RESULT_OK) return cavif_fail(out, decoder, what, result);
        if (decoder->image->width != (uint32_t)out->stored_width || decoder->image->height != (uint32_t)out->stored_height) {
            return cavif_fail(out, decoder, what, AVIF_RESULT_INVALID_IMAGE_GRID);
        }
        result = cavif_frame(decoder, &crop, angle, mirror, out->width, out->height, out->pixels + frame_bytes * (size_t)i);
        if (result != AVIF_RESULT_OK) return cavif_fail(out, decoder, what, result);
    }
    avifDecoderDestroy(decoder);
    return 0;
}

void CAVIF_release(CAVIF_image *image) {
    free(image->pixels);
    free(image->durations);
    free(image->icc);
    image->pixels = NULL;
    image->durations = NULL;
    image->icc = NULL;
}

// An animation as an AVIF sequence: 8-bit RGB(A) frames stacked, each with its
// duration in milliseconds. libvips' heifsave (libheif 1.15) writes still images
// only; libavif writes sequences. Quality 1-100 maps onto AV1's quantizer 63-0;
// colour is labelled sRGB (BT.709 primaries, sRGB transfer, BT.601 matrix, full range).
int CAVIF_encode_sequence(const unsigned char *pixels, int width, int height, int frames, int channels, const int *durations,
                          int quality, int speed, unsigned char **out, size_t *out_len, char *message, size_t message_len) {
    *out = NULL;
    *out_len = 0;
    const char *unavailable = CAVIF_load_library();
    if (unavailable) { snprintf(message, message_len, "libavif cannot be loaded: %s", unavailable); return -1; }
    avifEncoder *encoder = avifEncoderCreate();
    if (!encoder) { snprintf(message, message_len, "avifEncoderCreate failed"); return -1; }
    int quantizer = (100 - (quality < 1 ? 1 : quality > 100 ? 100 : quality)) * 63 / 99;
    encoder->minQuantizer = encoder->maxQuantizer = quantizer;
    encoder->minQuantizerAlpha = encoder->maxQuantizerAlpha = quantizer;
    encoder->speed = speed < 0 ? 0 : speed > 10 ? 10 : speed;
    encoder->maxThreads = 1;
    encoder->timescale = 1000;
    size_t frame_bytes = (size_t)width * (size_t)height * (size_t)channels;
    avifResult result = AVIF_RESULT_OK;
    for (int i = 0; i < frames && result == AVIF_RESULT_OK; i++) {
        avifImage *image = avifImageCreate((uint32_t)width, (uint32_t)height, 8, AVIF_PIXEL_FORMAT_YUV420);
        if (!image) { result = AVIF_RESULT_OUT_OF_MEMORY; break; }
        image->colorPrimaries = AVIF_COLOR_PRIMARIES_BT709;
        image->transferCharacteristics = AVIF_TRANSFER_CHARACTERISTICS_SRGB;
        image->matrixCoefficients = AVIF_MATRIX_COEFFICIENTS_BT601;
        image->yuvRange = AVIF_RANGE_FULL;
        avifRGBImage rgb;
        avifRGBImageSetDefaults(&rgb, image);
        rgb.format = channels == 4 ? AVIF_RGB_FORMAT_RGBA : AVIF_RGB_FORMAT_RGB;
        rgb.depth = 8;
        rgb.pixels = (uint8_t *)(pixels + frame_bytes * (size_t)i);
        rgb.rowBytes = (uint32_t)(width * channels);
        result = avifImageRGBToYUV(image, &rgb);
        if (result == AVIF_RESULT_OK) {
            result = avifEncoderAddImage(encoder, image, (uint64_t)(durations[i] > 0 ? durations[i] : 1), AVIF_ADD_IMAGE_FLAG_NONE);
        }
        avifImageDestroy(image);
    }
    avifRWData output = AVIF_DATA_EMPTY;
    if (result == AVIF_RESULT_OK) result = avifEncoderFinish(encoder, &output);
    if (result != AVIF_RESULT_OK) {
        snprintf(message, message_len, "%s%s%s", avifResultToString(result), encoder->diag.error[0] ? ": " : "", encoder->diag.error);
        avifRWDataFree(&output);
        avifEncoderDestroy(encoder);
        return -1;
    }
    *out = malloc(output.size);
    if (*out) {
        memcpy(*out, output.data, output.size);
        *out_len = output.size;
    }
    avifRWDataFree(&output);
    avifEncoderDestroy(encoder);
    return *out ? 0 : -1;
}

void CAVIF_free(void *pointer) { free(pointer); }
