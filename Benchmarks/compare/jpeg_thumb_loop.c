// The C reference for JPEG thumbnails: the work of the TurboJPEG coder's direct
// path with nothing around it. One process, one thread; for each file: read it
// into memory, decode at the smallest M/8 scale that still covers the BOX x BOX
// fit (any Huffman file at 1/8 by the coder's DC decoder, else a progressive one
// without its AC scans by libjpeg; at 2/8 to 4/8 a progressive file without its
// AC refinement scans: as the coder does), resample to the fit with the coder's own C (resample.c, compiled
// into this program), and encode at quality 85 with optimised Huffman tables,
// 4:2:0, as the coder writes; the bytes go to OUTDIR/NAME.
// Usage: jpeg_thumb_loop BOX OUTDIR FILE... -> JSON with ms per image (wall and CPU).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <time.h>
#include <jpeglib.h>
#include "CJPEGTurboOps.h"

static jmp_buf jump;
static void fail(j_common_ptr info) { (*info->err->output_message)(info); longjmp(jump, 1); }

static double now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: jpeg_thumb_loop BOX OUTDIR FILE...\n"); return 2; }
    int box = atoi(argv[1]);
    const char *outdir = argv[2];
    double wall = now(CLOCK_MONOTONIC), cpu = now(CLOCK_PROCESS_CPUTIME_ID);
    for (int f = 3; f < argc; f++) {
        FILE *file = fopen(argv[f], "rb");
        if (!file) { perror(argv[f]); return 1; }
        fseek(file, 0, SEEK_END);
        long size = ftell(file);
        fseek(file, 0, SEEK_SET);
        unsigned char *data = malloc((size_t) size);
        if (fread(data, 1, (size_t) size, file) != (size_t) size) return 1;
        fclose(file);

        struct jpeg_decompress_struct info;
        struct jpeg_error_mgr error;
        info.err = jpeg_std_error(&error);
        error.error_exit = fail;
        if (setjmp(jump)) return 1;
        jpeg_create_decompress(&info);
        jpeg_mem_src(&info, data, (unsigned long) size);
        jpeg_read_header(&info, TRUE);
        double fit = (double) box / (info.image_width > info.image_height ? info.image_width : info.image_height);
        int needW = (int) (info.image_width * fit + 0.5), needH = (int) (info.image_height * fit + 0.5);
        info.scale_denom = 8;
        for (info.scale_num = 1; info.scale_num < 8; info.scale_num++) {
            jpeg_calc_output_dimensions(&info);
            if ((int) info.output_width >= needW && (int) info.output_height >= needH) break;
        }
        unsigned char *filtered = NULL, *pixels = NULL;
        int bands = 0, sw = 0, sh = 0;
        if (info.scale_num == 1 && info.arith_code == 0) {
            // The coder's 1/8 path: its own DC decoder, else (progressive) libjpeg
            // on a copy without the AC scans.
            int ycc = info.jpeg_color_space == JCS_YCbCr;
            if (CJT_dc_decode(data, (size_t) size, ycc, 256, &pixels, &sw, &sh, &bands) != 0 && info.progressive_mode) {
                pixels = NULL;
                filtered = malloc((size_t) size);
                size_t length = CJT_dc_only(data, (size_t) size, 256, filtered);
                if (length > 0) {
                    jpeg_abort_decompress(&info);
                    jpeg_mem_src(&info, filtered, (unsigned long) length);
                    jpeg_read_header(&info, TRUE);
                    info.scale_num = 1;
                    info.scale_denom = 8;
                }
            }
        } else if (info.progressive_mode && info.scale_num >= 2 && info.scale_num <= 4) {
            filtered = malloc((size_t) size);
            size_t length = CJT_scan_filter(data, (size_t) size, 256, filtered, 1);
            if (length > 0) {
                unsigned int num = info.scale_num;
                jpeg_abort_decompress(&info);
                jpeg_mem_src(&info, filtered, (unsigned long) length);
                jpeg_read_header(&info, TRUE);
                info.scale_num = num;
                info.scale_denom = 8;
            }
        }
        if (pixels) {
            jpeg_destroy_decompress(&info);
        } else {
            info.do_block_smoothing = FALSE;
            info.out_color_space = info.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
            jpeg_start_decompress(&info);
            bands = info.output_components;
            sw = (int) info.output_width;
            sh = (int) info.output_height;
            size_t stride = (size_t) sw * (size_t) bands;
            pixels = malloc(stride * (size_t) sh);
            while (info.output_scanline < info.output_height) {
                JSAMPROW row = pixels + stride * info.output_scanline;
                jpeg_read_scanlines(&info, &row, 1);
            }
            jpeg_finish_decompress(&info);
            jpeg_destroy_decompress(&info);
        }
        free(filtered);
        free(data);

        unsigned char *thumb = malloc((size_t) needW * (size_t) needH * (size_t) bands);
        if (CJT_resample(pixels, sw, sh, bands, thumb, needW, needH)) return 1;
        free(pixels);

        CJT_encode_options options = { .quality = 85, .progressive = 0, .subsampling = 2, .restartInterval = 0, .separateDCScans = 0, .optimize = 1 };
        unsigned char *out = NULL;
        unsigned long length = 0;
        char message[256];
        if (CJT_encode(thumb, needW, needH, bands, &options, &out, &length, message, sizeof message)) { fprintf(stderr, "%s\n", message); return 1; }
        const char *name = strrchr(argv[f], '/');
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", outdir, name ? name + 1 : argv[f]);
        FILE *written = fopen(path, "wb");
        if (!written || fwrite(out, 1, length, written) != length) { perror(path); return 1; }
        fclose(written);
        CJT_free(out);
        free(thumb);
    }
    int images = argc - 3;
    printf("{\"images\": %d, \"wallMsPerImage\": %.3f, \"cpuMsPerImage\": %.3f}\n",
           images, (now(CLOCK_MONOTONIC) - wall) / images, (now(CLOCK_PROCESS_CPUTIME_ID) - cpu) / images);
    return 0;
}
