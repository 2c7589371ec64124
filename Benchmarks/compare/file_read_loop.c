// The peer for file-store hits: open/read/close of the same data files that
// FileCacheStore wrote. Usage: file_read_loop FILELIST GETS -> ns per get as JSON.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: file_read_loop FILELIST GETS\n"); return 2; }
    int gets = atoi(argv[2]);
    FILE *list = fopen(argv[1], "r");
    if (!list) return 1;
    char **paths = NULL; int count = 0; char line[4096];
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\n")] = 0;
        paths = realloc(paths, sizeof(char *) * (count + 1));
        paths[count++] = strdup(line);
    }
    srand(42);
    char *buffer = malloc(64 << 20);
    size_t total = 0;
    struct timespec a, b;
    for (int pass = 0; pass < 2; pass++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < (pass ? gets : 1000); i++) {
            int fd = open(paths[rand() % count], O_RDONLY);
            if (fd < 0) continue;
            struct stat st; fstat(fd, &st);
            ssize_t n = read(fd, buffer, st.st_size);
            if (n > 0) total += n;
            close(fd);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
    }
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / gets;
    if (total == 0) { fprintf(stderr, "read nothing\n"); return 1; }
    printf("{\"scenario\": \"open/read/close loop\", \"nsPerGet\": %.1f, \"bytes\": %zu}\n", ns, total);
    return 0;
}
