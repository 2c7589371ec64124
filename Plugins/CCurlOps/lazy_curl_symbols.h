// The libcurl functions the package calls, one per line, for lazy_curl.S (see
// Sources/CWebImageSystem/include/CWILazyLibrary.h). Functions only.
//
// A call to a function missing here fails the link with "undefined symbol":
// add the name.
LAZY(curl_easy_cleanup)
LAZY(curl_easy_getinfo)
LAZY(curl_easy_init)
LAZY(curl_easy_reset)
LAZY(curl_easy_setopt)
LAZY(curl_easy_strerror)
LAZY(curl_global_init)
LAZY(curl_multi_add_handle)
LAZY(curl_multi_cleanup)
LAZY(curl_multi_info_read)
LAZY(curl_multi_init)
LAZY(curl_multi_perform)
LAZY(curl_multi_poll)
LAZY(curl_multi_remove_handle)
LAZY(curl_multi_setopt)
LAZY(curl_multi_wakeup)
LAZY(curl_slist_append)
LAZY(curl_slist_free_all)
