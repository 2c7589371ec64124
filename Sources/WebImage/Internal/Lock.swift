#if WEBIMAGE_TSAN_LOCKS
#if canImport(Glibc)
import Glibc
#endif
#else
public import Synchronization
#endif

/// The package's one lock: a value guarded by a mutex, reached only inside
/// ``withLock(_:)``. Every module of the package uses it, so that `make tsan` can
/// swap what is inside in one place.
///
/// It is SPI (`@_spi(WebImageInternal) import WebImage`), not `package`: Swift 6.3
/// does not inline or specialise a `package` `@inlinable` function in another
/// module, so every plugin's lock ran as an unspecialised generic call that
/// instantiated `Mutex` metadata each time (2–5 % of an LMDB hit). A public
/// `@inlinable` one, SPI or not, is inlined like `Mutex.withLock` itself.
///
/// It is `Synchronization.Mutex`, except under `make tsan`
/// (`-DWEBIMAGE_TSAN_LOCKS`): ThreadSanitizer follows `pthread_mutex_lock`, not a
/// lock taken inside the uninstrumented standard library, so with the real
/// `Mutex` every piece of state it guards would look unguarded, or (where the
/// compiler inlined the lock's atomics) be checked by luck. Under the flag it is
/// a pthread mutex, and the coalescer, the pools and the stores are checked for real.
@_spi(WebImageInternal) public struct Lock<Value>: ~Copyable, Sendable {
    #if WEBIMAGE_TSAN_LOCKS
    @usableFromInline let mutex: PthreadMutex<Value>
    #else
    @usableFromInline let mutex: Mutex<Value>
    #endif

    @inlinable
    public init(_ value: sending Value) {
        #if WEBIMAGE_TSAN_LOCKS
        mutex = PthreadMutex(value)
        #else
        mutex = Mutex(value)
        #endif
    }

    /// Runs `body` with the value, the lock held.
    @inlinable
    public borrowing func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        try mutex.withLock(body)
    }
}

#if WEBIMAGE_TSAN_LOCKS
/// `make tsan` only: the pthread mutex ThreadSanitizer sees, inside ``Lock``.
@usableFromInline
final class PthreadMutex<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched inside `withLock`, under `mutex`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    @usableFromInline init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @usableFromInline func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
#endif
