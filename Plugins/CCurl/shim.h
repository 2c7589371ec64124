#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H
// Typed wrappers over libcurl's variadic curl_easy_setopt, curl_easy_getinfo and
// curl_multi_setopt, which Swift cannot call, and accessors for the structs its
// callbacks receive.
#include <curl/curl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
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

/// curl's open-socket callback and where its address lies: the SSRF guard's rules
/// are in Swift (AddressPolicy); the callback runs on the driver thread.
typedef curl_socket_t (*CCurl_opensocket_callback)(void *context, curlsocktype purpose, struct curl_sockaddr *address);
static inline CURLcode CCurl_set_opensocket(CURL *h, CCurl_opensocket_callback f, void *context) {
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, context);
    return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f);
}
static inline const struct sockaddr *CCurl_sockaddr_address(const struct curl_sockaddr *a) { return &a->addr; }
#endif
