#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H
// Typed wrappers over libcurl's variadic curl_easy_setopt, curl_easy_getinfo and
// curl_multi_setopt, which Swift cannot call; and the address check of the
// server-side request forgery guard, which runs inside curl's open-socket callback.
#include <curl/curl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

static inline CURLcode CCurl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode CCurl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*CCurl_data_callback)(char *data, size_t size, size_t count, void *context);
typedef int (*CCurl_progress_callback)(void *context, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
static inline CURLcode CCurl_set_write(CURL *h, CCurl_data_callback f, void *context) {
    curl_easy_setopt(h, CURLOPT_WRITEDATA, context);
    return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f);
}
static inline CURLcode CCurl_set_header(CURL *h, CCurl_data_callback f, void *context) {
    curl_easy_setopt(h, CURLOPT_HEADERDATA, context);
    return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f);
}
static inline CURLcode CCurl_set_progress(CURL *h, CCurl_progress_callback f, void *context) {
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, context);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, f);
}

static inline CURLcode CCurl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode CCurl_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode CCurl_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode CCurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/// The CURL handle a finished-transfer message is about, and its result.
static inline CURL *CCurl_msg_easy(CURLMsg *m) { return m->easy_handle; }
static inline CURLcode CCurl_msg_result(CURLMsg *m) { return m->data.result; }
static inline int CCurl_msg_done(CURLMsg *m) { return m->msg == CURLMSG_DONE; }

/// Whether an address is one a server must not be tricked into reaching:
/// loopback, private, link-local (cloud metadata at 169.254.169.254), carrier-grade
/// NAT, "this network", multicast and reserved, unique-local and mapped IPv6.
static inline int CCurl_is_internal_address(const struct sockaddr *addr) {
    if (addr->sa_family == AF_INET) {
        uint32_t ip = ntohl(((const struct sockaddr_in *) addr)->sin_addr.s_addr);
        uint8_t a = ip >> 24, b = (ip >> 16) & 0xFF;
        return a == 0 || a == 10 || a == 127 || (a == 169 && b == 254) || (a == 172 && (b & 0xF0) == 16)
            || (a == 192 && b == 168) || (a == 100 && (b & 0xC0) == 64) || a >= 224;
    }
    if (addr->sa_family == AF_INET6) {
        const uint8_t *s = ((const struct sockaddr_in6 *) addr)->sin6_addr.s6_addr;
        static const uint8_t zero[15] = {0};
        if (memcmp(s, zero, 15) == 0 && (s[15] == 0 || s[15] == 1)) return 1;   // :: and ::1
        if ((s[0] & 0xFE) == 0xFC) return 1;                                  // fc00::/7
        if (s[0] == 0xFE && (s[1] & 0xC0) == 0x80) return 1;                  // fe80::/10
        if (s[0] == 0xFF) return 1;                                           // multicast
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
        if (memcmp(s, mapped, 12) == 0) {                                     // ::ffff:a.b.c.d
            struct sockaddr_in v4;
            memset(&v4, 0, sizeof v4);
            v4.sin_family = AF_INET;
            memcpy(&v4.sin_addr, s + 12, 4);
            return CCurl_is_internal_address((const struct sockaddr *) &v4);
        }
        return 0;
    }
    return 1;  // anything else (unix sockets) is internal
}

/// The guard's state for one transfer: whether it refused an address (so the
/// loader can say why the load failed), and up to 16 address ranges exempt from it
/// (an origin on a private network that a deployment means to reach).
typedef struct {
    int blocked;
    int count;
    struct { int family; int prefix; uint8_t bytes[16]; } exempt[16];
} CCurl_guard;

/// Adds a range (`family` AF_INET or AF_INET6, `bytes` 4 or 16 long, `prefix` bits);
/// returns 0, or -1 when the table is full or the range is malformed.
static inline int CCurl_guard_exempt(CCurl_guard *g, int family, int prefix, const uint8_t *bytes) {
    int length = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
    if (length == 0 || prefix < 0 || prefix > length * 8 || g->count >= 16) return -1;
    g->exempt[g->count].family = family;
    g->exempt[g->count].prefix = prefix;
    memcpy(g->exempt[g->count].bytes, bytes, length);
    g->count += 1;
    return 0;
}

static inline int CCurl_prefix_matches(const uint8_t *a, const uint8_t *b, int bits) {
    int whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, whole) != 0) return 0;
    if (rest == 0) return 1;
    uint8_t mask = (uint8_t) (0xFF << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

/// Whether an address falls in one of the guard's exempt ranges (an IPv4-mapped
/// IPv6 address is matched against the IPv4 ranges).
static inline int CCurl_guard_is_exempt(const CCurl_guard *g, const struct sockaddr *addr) {
    const uint8_t *bytes = NULL;
    int family = addr->sa_family;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    if (family == AF_INET) {
        bytes = (const uint8_t *) &((const struct sockaddr_in *) addr)->sin_addr.s_addr;
    } else if (family == AF_INET6) {
        bytes = ((const struct sockaddr_in6 *) addr)->sin6_addr.s6_addr;
        if (memcmp(bytes, mapped, 12) == 0) { bytes += 12; family = AF_INET; }
    } else {
        return 0;
    }
    for (int i = 0; i < g->count; i++) {
        if (g->exempt[i].family == family && CCurl_prefix_matches(bytes, g->exempt[i].bytes, g->exempt[i].prefix)) return 1;
    }
    return 0;
}

/// curl's open-socket callback for the guard: refuses internal addresses after
/// DNS resolution (so a public name pointing inside is caught too), unless a range
/// exempts them, and sets `blocked` so the loader can report why.
static inline curl_socket_t CCurl_guarded_open(void *context, curlsocktype purpose, struct curl_sockaddr *address) {
    (void) purpose;
    CCurl_guard *g = (CCurl_guard *) context;
    if (CCurl_is_internal_address(&address->addr) && !CCurl_guard_is_exempt(g, &address->addr)) {
        g->blocked = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype, address->protocol);
}

static inline CURLcode CCurl_enable_address_guard(CURL *h, CCurl_guard *g) {
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, (void *) g);
    return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, CCurl_guarded_open);
}
#endif
