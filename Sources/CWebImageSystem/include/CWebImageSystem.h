#ifndef CWEBIMAGESYSTEM_H
#define CWEBIMAGESYSTEM_H

#include <sys/types.h>

/// `preadv2(2)` of one buffer with `RWF_NOWAIT`: reads only what is already in
/// the page cache, never waiting for the disk. Returns the bytes read (possibly
/// fewer than asked when part of the range is not cached), or -1 with `errno`
/// set: `EAGAIN` when nothing of the range is cached, `EOPNOTSUPP` or `ENOSYS`
/// where the filesystem or kernel does not support it. Not retried on `EINTR`.
/// (Swift's Glibc module does not declare `preadv2`, which needs `_GNU_SOURCE`.)
ssize_t CWI_pread_if_cached(int descriptor, void *buffer, size_t count, off_t offset);

/// The `f_type` magic number `statfs(2)` gives for the filesystem holding
/// `path` (`EXT4_SUPER_MAGIC`, `NFS_SUPER_MAGIC`...), or -1 with `errno` set.
long long CWI_filesystem_type(const char *path);

#endif
