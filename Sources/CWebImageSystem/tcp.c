#include <linux/tcp.h>
#include <stddef.h>
#include <string.h>
#include "CWebImageSystem.h"

// Linux's tcp_info, not glibc's: glibc's stops before tcpi_bytes_acked (Linux 4.1).
_Static_assert(offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(__u64) <= CWI_TCP_INFO_CAPACITY,
               "CWI_TCP_INFO_CAPACITY holds tcpi_bytes_acked");

unsigned long long CWI_tcp_bytes_acked(const void *info) {
    __u64 acked;
    memcpy(&acked, (const char *)info + offsetof(struct tcp_info, tcpi_bytes_acked), sizeof acked);
    return acked;
}
