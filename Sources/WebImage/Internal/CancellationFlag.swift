import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A flag that a task's cancellation sets and blocking work polls: work on a pool
/// thread cannot see `Task.isCancelled`, so a chain asks this between steps, and a
/// coder registers a handler that stops a long C call inside (libvips' kill switch).
///
/// The manager makes the flag of a decode job *current* on the pool thread that
/// runs it (``makingCurrent(_:)``), so that a coder several calls down finds it
/// (``current``) without every signature carrying it.
package final class CancellationFlag: Sendable {
    private struct State {
        var cancelled = false
        var handlers: [UInt64: @Sendable () -> Void] = [:]
        var next: UInt64 = 0
    }
    private let state = Lock(State())

    package init() {}

    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Sets the flag and runs the registered handlers (outside the lock), once.
    package func cancel() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.cancelled else { return [] }
            state.cancelled = true
            defer { state.handlers.removeAll() }
            return Array(state.handlers.values)
        }
        for handler in handlers { handler() }
    }

    /// Registers `handler` to run when the flag is cancelled.
    /// - Returns: a token for ``remove(_:)``, or nil when the flag is cancelled
    ///   already (the handler is not kept: do not start the work).
    package func onCancel(_ handler: @escaping @Sendable () -> Void) -> UInt64? {
        state.withLock { state -> UInt64? in
            guard !state.cancelled else { return nil }
            state.next += 1
            state.handlers[state.next] = handler
            return state.next
        }
    }

    package func remove(_ token: UInt64) {
        _ = state.withLock { $0.handlers.removeValue(forKey: token) }
    }

    /// Runs `body` with a flag that the calling task's cancellation sets.
    package static func run<T>(_ body: (CancellationFlag) async throws -> T) async throws -> T {
        let flag = CancellationFlag()
        return try await withTaskCancellationHandler { try await body(flag) } onCancel: { flag.cancel() }
    }

    // MARK: The flag of the job on this thread

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// The flag of the blocking job running on this thread, if it made one current.
    package static var current: CancellationFlag? {
        pthread_getspecific(key).map { Unmanaged<CancellationFlag>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Runs `body` with this flag as ``current`` on the calling thread.
    package func makingCurrent<T>(_ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(Self.key)
        pthread_setspecific(Self.key, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(Self.key, previous) }
        return try withExtendedLifetime(self) { try body() }
    }
}
