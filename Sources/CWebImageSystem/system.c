#define _GNU_SOURCE
#include <sys/uio.h>
#include <sys/vfs.h>
#include "CWebImageSystem.h"

long CWI_pread_if_cached(int descriptor, void *buffer, unsigned long count, long long offset) {
    struct iovec vector = { .iov_base = buffer, .iov_len = count };
    return (long) preadv2(descriptor, &vector, 1, (off_t) offset, RWF_NOWAIT);
}

long long CWI_filesystem_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long long) info.f_type;
}
