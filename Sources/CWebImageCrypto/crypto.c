#include "CWebImageCrypto.h"

#include <string.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

// EVP_Digest and the one-shot HMAC() are OpenSSL 3's supported interfaces (the
// SHA256_* and HMAC_CTX_* families are deprecated); both pick the CPU's SHA
// extensions at run time.

int CWI_sha256(const void *data, size_t length, uint8_t out[32]) {
    unsigned int written = 0;
    static const unsigned char empty = 0;
    if (EVP_Digest(length ? data : &empty, length, out, &written, EVP_sha256(), NULL) == 1 && written == 32) return 1;
    memset(out, 0, 32);
    return 0;
}

int CWI_hmac_sha256(const void *key, size_t keyLength, const void *data, size_t length, uint8_t out[32]) {
    unsigned int written = 0;
    static const unsigned char empty = 0;
    if (keyLength > (size_t)INT32_MAX) { memset(out, 0, 32); return 0; }
    if (HMAC(EVP_sha256(), keyLength ? key : &empty, (int)keyLength, length ? data : &empty, length, out, &written) != NULL && written == 32) return 1;
    memset(out, 0, 32);
    return 0;
}
