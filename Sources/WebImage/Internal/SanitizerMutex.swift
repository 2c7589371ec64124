#if WEBIMAGE_TSAN_LOCKS
#if canImport(Glibc)
import Glibc
#endif

/// `make tsan` only (`-DWEBIMAGE_TSAN_LOCKS`): a pthread-backed stand-in for
/// `Synchronization.Mutex`. ThreadSanitizer follows `pthread_mutex_lock`, but not
/// a lock taken inside the uninstrumented standard library, so with the real
/// `Mutex` every piece of state it guards looks unguarded, or (where the compiler
/// inlined the lock's atomics) is checked by luck. Each module that uses `Mutex`
/// aliases this one under the flag (`Mutex+Sanitizer.swift`), so that the
/// coalescer, the pools and the stores are checked for real. Same calls as the
/// package makes: `init(_:)` and `withLock(_:)`.
package final class SanitizerMutex<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched inside `withLock`, under `mutex`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

typealias Mutex<Value> = SanitizerMutex<Value>
#endif
