#if WEBIMAGE_TSAN_LOCKS
package import WebImage
/// `make tsan` only: the pthread-backed lock ThreadSanitizer sees (WebImage's
/// SanitizerMutex). `package`: the support types expose locked state to the tests.
package typealias Mutex<Value> = SanitizerMutex<Value>
#endif
