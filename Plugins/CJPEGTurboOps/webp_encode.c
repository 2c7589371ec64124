// The direct path's WebP writer: libwebp's encoder on a buffer of pixels, with
// the configuration libvips' webpsave builds from the same options, so the two
// write the same file for the same pixels (the tests compare them).
#include "CJPEGTurboOps.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <webp/encode.h>

static const char *CJT_webp_error(WebPEncodingError code) {
    switch (code) {
    case VP8_ENC_ERROR_OUT_OF_MEMORY: return "out of memory";
    case VP8_ENC_ERROR_BITSTREAM_OUT_OF_MEMORY: return "out of memory for the bitstream";
    case VP8_ENC_ERROR_NULL_PARAMETER: return "a null parameter";
    case VP8_ENC_ERROR_INVALID_CONFIGURATION: return "an invalid configuration";
    case VP8_ENC_ERROR_BAD_DIMENSION: return "a width or height of 0 or over 16383";
    case VP8_ENC_ERROR_PARTITION0_OVERFLOW: return "partition 0 is over 512 KiB";
    case VP8_ENC_ERROR_PARTITION_OVERFLOW: return "a partition is over 16 MiB";
    case VP8_ENC_ERROR_BAD_WRITE: return "the writer failed";
    case VP8_ENC_ERROR_FILE_TOO_BIG: return "the file would be over 4 GiB";
    default: return "an unknown error";
    }
}

int CJT_webp_encode(const unsigned char *pixels, int width, int height, int bands, const CJT_webp_options *options,
                    unsigned char **out, size_t *outLength, char *message, size_t messageSize) {
    *out = NULL;
    *outLength = 0;
    if (width < 1 || height < 1 || (bands != 1 && bands != 3 && bands != 4)) {
        snprintf(message, messageSize, "libwebp: %dx%d with %d bands is not an image it encodes", width, height, bands);
        return -1;
    }
    WebPConfig config;
    int quality = options->quality < 0 ? 0 : options->quality > 100 ? 100 : options->quality;
    if (!WebPConfigPreset(&config, WEBP_PRESET_DEFAULT, (float) quality)) {
        snprintf(message, messageSize, "libwebp: this libwebp does not match the headers it was built with");
        return -1;
    }
    // As libvips' webpsave: the default preset at Q, then lossless, sharp YUV
    // ("smart_subsample"), an alpha plane at quality 100 and the effort as method.
    config.lossless = options->lossless ? 1 : 0;
    config.use_sharp_yuv = options->sharpYUV ? 1 : 0;
    config.alpha_quality = 100;
    config.method = options->effort < 0 ? 0 : options->effort > 6 ? 6 : options->effort;
    if (!WebPValidateConfig(&config)) {
        snprintf(message, messageSize, "libwebp: the configuration is not valid");
        return -1;
    }
    WebPPicture picture;
    if (!WebPPictureInit(&picture)) {
        snprintf(message, messageSize, "libwebp: this libwebp does not match the headers it was built with");
        return -1;
    }
    picture.width = width;
    picture.height = height;
    // Sharp YUV and lossless work from ARGB; lossy imports straight to YUV.
    picture.use_argb = options->lossless || options->sharpYUV;
    WebPMemoryWriter writer;
    WebPMemoryWriterInit(&writer);
    picture.writer = WebPMemoryWrite;
    picture.custom_ptr = &writer;

    int imported;
    if (bands == 3) {
        imported = WebPPictureImportRGB(&picture, pixels, width * 3);
    } else if (bands == 4) {
        imported = WebPPictureImportRGBA(&picture, pixels, width * 4);
    } else {
        // WebP has no grey mode: libvips writes grey as RGB too.
        size_t count = (size_t) width * (size_t) height;
        unsigned char *rgb = malloc(count * 3);
        if (!rgb) {
            snprintf(message, messageSize, "libwebp: out of memory");
            return -1;
        }
        for (size_t i = 0; i < count; i++) rgb[i * 3] = rgb[i * 3 + 1] = rgb[i * 3 + 2] = pixels[i];
        imported = WebPPictureImportRGB(&picture, rgb, width * 3);
        free(rgb);
    }
    if (!imported) {
        WebPPictureFree(&picture);
        WebPMemoryWriterClear(&writer);
        snprintf(message, messageSize, "libwebp: %s", CJT_webp_error(picture.error_code != VP8_ENC_OK ? picture.error_code : VP8_ENC_ERROR_OUT_OF_MEMORY));
        return -1;
    }
    if (!WebPEncode(&config, &picture)) {
        WebPEncodingError code = picture.error_code;
        WebPPictureFree(&picture);
        WebPMemoryWriterClear(&writer);
        snprintf(message, messageSize, "libwebp: %s", CJT_webp_error(code));
        return -1;
    }
    WebPPictureFree(&picture);
    *out = writer.mem;
    *outLength = writer.size;
    return 0;
}

void CJT_webp_free(unsigned char *bytes) { WebPFree(bytes); }
