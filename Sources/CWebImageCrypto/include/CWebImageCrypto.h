#ifndef CWEBIMAGECRYPTO_H
#define CWEBIMAGECRYPTO_H

#include <stddef.h>
#include <stdint.h>

/// SHA-256 and HMAC-SHA256 from the system's OpenSSL libcrypto (libssl-dev), which
/// libcurl links anyway: the URL signer's HMAC and S3's payload digests. Each
/// returns 1 and writes 32 bytes to `out`, or returns 0 (allocation failure inside
/// OpenSSL) and leaves `out` zeroed.
int CWI_sha256(const void *data, size_t length, uint8_t out[32]);
int CWI_hmac_sha256(const void *key, size_t keyLength, const void *data, size_t length, uint8_t out[32]);

#endif
