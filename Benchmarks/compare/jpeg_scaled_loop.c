// The physical reference for JPEG thumbnails: libjpeg-turbo's own scaled decode
// of each file, in one process and one thread, nothing else (no resize, no
// encode, no file writes). Each file is read into memory, then decoded at the
// smallest M/8 scale whose output still covers a BOX x BOX fit, the scale the
// TurboJPEG coder picks. Block smoothing is off, as in the coder.
// Usage: jpeg_scaled_loop BOX FILE... -> JSON with ms per image (wall and CPU).
#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <time.h>
#include <jpeglib.h>

static jmp_buf jump;
static void fail(j_common_ptr info) { (*info->err->output_message)(info); longjmp(jump, 1); }

static double now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: jpeg_scaled_loop BOX FILE...\n"); return 2; }
    int box = atoi(argv[1]);
    double wall = now(CLOCK_MONOTONIC), cpu = now(CLOCK_PROCESS_CPUTIME_ID);
    long pixels = 0;
    for (int f = 2; f < argc; f++) {
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
        double scale = (double) box / (info.image_width > info.image_height ? info.image_width : info.image_height);
        long needW = (long) (info.image_width * scale + 0.5), needH = (long) (info.image_height * scale + 0.5);
        info.scale_denom = 8;
        for (info.scale_num = 1; info.scale_num < 8; info.scale_num++) {
            jpeg_calc_output_dimensions(&info);
            if ((long) info.output_width >= needW && (long) info.output_height >= needH) break;
        }
        info.do_block_smoothing = FALSE;
        info.out_color_space = info.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
        jpeg_start_decompress(&info);
        size_t stride = (size_t) info.output_width * info.output_components;
        unsigned char *rows = malloc(stride * 4);
        while (info.output_scanline < info.output_height) {
            JSAMPROW pointers[4] = { rows, rows + stride, rows + 2 * stride, rows + 3 * stride };
            jpeg_read_scanlines(&info, pointers, 4);
        }
        pixels += (long) info.output_width * info.output_height;
        jpeg_finish_decompress(&info);
        jpeg_destroy_decompress(&info);
        free(rows);
        free(data);
    }
    int images = argc - 2;
    printf("{\"images\": %d, \"wallMsPerImage\": %.3f, \"cpuMsPerImage\": %.3f, \"pixels\": %ld}\n",
           images, (now(CLOCK_MONOTONIC) - wall) / images, (now(CLOCK_PROCESS_CPUTIME_ID) - cpu) / images, pixels);
    return 0;
}
