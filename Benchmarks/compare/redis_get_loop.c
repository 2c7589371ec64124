// The physical reference for a shared-tier hit: hiredis GET of random keys over
// one connection, copying each value out, as the Swift store does.
// usage: redis_get_loop PORT KEYFILE GETS   (prints {"nsPerGet": …})
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: redis_get_loop PORT KEYFILE GETS\n"); return 2; }
    int port = atoi(argv[1]);
    long gets = atol(argv[3]);
    FILE *file = fopen(argv[2], "r");
    if (!file) { perror(argv[2]); return 2; }
    char **keys = NULL; size_t count = 0, capacity = 0; char line[512];
    while (fgets(line, sizeof line, file)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        if (count == capacity) { capacity = capacity ? capacity * 2 : 1024; keys = realloc(keys, capacity * sizeof *keys); }
        keys[count++] = strdup(line);
    }
    fclose(file);
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) { fprintf(stderr, "connect failed\n"); return 2; }
    srand(42);
    long *order = malloc(gets * sizeof *order);
    for (long i = 0; i < gets; i++) order[i] = rand() % count;
    size_t total = 0;
    for (long i = 0; i < 1000 && i < gets; i++) { redisReply *r = redisCommand(c, "GET %s", keys[order[i]]); freeReplyObject(r); }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < gets; i++) {
        redisReply *r = redisCommand(c, "GET %s", keys[order[i]]);
        if (!r || r->type != REDIS_REPLY_STRING) { fprintf(stderr, "GET failed\n"); return 1; }
        char *copy = malloc(r->len); memcpy(copy, r->str, r->len); total += copy[0]; free(copy);
        freeReplyObject(r);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
    printf("{\"nsPerGet\": %.1f, \"check\": %zu}\n", ns / gets, total);
    redisFree(c);
    return 0;
}
