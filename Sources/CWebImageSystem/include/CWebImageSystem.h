#ifndef CWEBIMAGESYSTEM_H
#define CWEBIMAGESYSTEM_H

// Plain C types only, no system header: a header this module included would
// make Swift attribute its declarations (timespec, stat...) to this module.

// Libraries loaded on their first call (its own header; included here because
// this is the module's umbrella header).
#include "CWILazyLibrary.h"

/// `preadv2(2)` of one buffer with `RWF_NOWAIT`: reads only what is already in
/// the page cache, never waiting for the disk. Returns the bytes read (possibly
/// fewer than asked when part of the range is not cached), or -1 with `errno`
/// set: `EAGAIN` when nothing of the range is cached, `EOPNOTSUPP` or `ENOSYS`
/// where the filesystem or kernel does not support it. Not retried on `EINTR`.
/// (Swift's Glibc module does not declare `preadv2`, which needs `_GNU_SOURCE`.)
long CWI_pread_if_cached(int descriptor, void *buffer, unsigned long count, long long offset);

/// The `f_type` magic number `statfs(2)` gives for the filesystem holding
/// `path` (`EXT4_SUPER_MAGIC`, `NFS_SUPER_MAGIC`...), or -1 with `errno` set.
long long CWI_filesystem_type(const char *path);

/// XXH3-64 (seed 0) of `count` bytes: the payload checksum of cache entries
/// (xxh3.c: AVX2 where the CPU has it, else SSE2; the same values either way).
unsigned long long CWI_xxh3_64(const void *bytes, unsigned long count);

/// XXH3-128 of `count` bytes with `seed`: the key of a kept scaled decode
/// (WebImageTurboJPEG's ScaledDecodeReuse), seeded per process so that a file
/// cannot be made to collide with another's.
void CWI_xxh3_128_seeded(const void *bytes, unsigned long count, unsigned long long seed,
                         unsigned long long *low, unsigned long long *high);

/// The bytes a `getsockopt(TCP_INFO)` buffer must hold for
/// `CWI_tcp_bytes_acked` (more than any kernel's `struct tcp_info` so far).
#define CWI_TCP_INFO_CAPACITY 512

/// `tcpi_bytes_acked` from the `TCP_INFO` of a TCP socket, read into a zeroed
/// buffer of `CWI_TCP_INFO_CAPACITY` bytes: what the peer has acknowledged
/// receiving. 0 on a kernel before Linux 4.1, which does not report it.
unsigned long long CWI_tcp_bytes_acked(const void *info);

#endif
