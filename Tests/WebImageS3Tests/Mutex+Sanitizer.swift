#if WEBIMAGE_TSAN_LOCKS
import WebImage
/// `make tsan` only: the pthread-backed lock ThreadSanitizer sees (WebImage's SanitizerMutex).
typealias Mutex<Value> = SanitizerMutex<Value>
#endif
