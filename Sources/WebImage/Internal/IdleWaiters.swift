/// Tasks waiting for a counter to reach zero: the one waiter behind
/// ``InFlightCounter/idle()`` and `BackgroundWork.idle()`.
///
/// The counter wakes them with ``wakeAll()`` after it reaches zero; ``wait(until:)``
/// checks `isIdle` and stores the waiter under the same lock `wakeAll()` takes, so
/// a count that reaches zero in between is never missed. A cancelled waiter
/// returns at once.
final class IdleWaiters: Sendable {
    private let waiters = Lock<(next: Int, waiting: [Int: CheckedContinuation<Void, Never>])>((0, [:]))

    /// Returns when `isIdle()` is true, or when the calling task is cancelled.
    /// `isIdle` runs under this type's lock: it may read the counter (an atomic,
    /// or a lock of its own) but must not call back into these waiters.
    func wait(until isIdle: @Sendable () -> Bool) async {
        let id = waiters.withLock { waiters -> Int in
            waiters.next += 1
            return waiters.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = waiters.withLock { waiters -> Bool in
                    if isIdle() || Task.isCancelled { return true }
                    waiters.waiting[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            waiters.withLock { $0.waiting.removeValue(forKey: id) }?.resume()
        }
    }

    /// Wakes every waiter; call after the counter reached zero.
    func wakeAll() {
        let woken = waiters.withLock { waiters in
            defer { waiters.waiting.removeAll() }
            return Array(waiters.waiting.values)
        }
        for waiter in woken { waiter.resume() }
    }
}
