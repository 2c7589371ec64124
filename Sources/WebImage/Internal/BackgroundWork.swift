import Foundation
import Synchronization

/// Work the manager must see finished before it shuts down, counted, bounded and
/// awaitable: the store writes a load started but did not wait for
/// (``start(bytes:_:)``), so that `ImageManager.shutdown()` loses none of them and
/// a burst of loads cannot pile up an unbounded set of tasks holding image bytes.
/// (Loads in flight are counted by ``InFlightCounter``, which takes no lock.)
///
/// Past the bound (``ImageManager/Configuration/maxPendingWrites`` writes or
/// ``ImageManager/Configuration/maxPendingWriteBytes`` bytes) a write is dropped,
/// counted and logged: the image is served all the same, only not cached. A write
/// larger than the byte bound alone is still accepted when nothing else is pending.
final class BackgroundWork: Sendable {
    private struct State {
        var pending = 0
        var bytes = 0
        var stopped = false
    }

    private let state = Lock(State())
    private let idleWaiters = IdleWaiters()
    let maxPending: Int
    let maxPendingBytes: Int

    init(maxPending: Int, maxPendingBytes: Int) {
        self.maxPending = max(1, maxPending)
        self.maxPendingBytes = max(0, maxPendingBytes)
    }

    /// Work started and not yet finished: (jobs, bytes).
    var pending: (count: Int, bytes: Int) { state.withLock { ($0.pending, $0.bytes) } }

    /// Starts `job` on a task of its own, unless the bound is reached or work has
    /// stopped. Returns false for a dropped job, which never runs.
    func start(bytes: Int, _ job: @escaping @Sendable () async -> Void) -> Bool {
        guard enter(bytes: bytes) else { return false }
        Task.detached(priority: .utility) {
            await job()
            self.leave(bytes: bytes)
        }
        return true
    }

    /// Counts one piece of work in, unless the bound is reached or work has stopped.
    /// Every `true` must be matched by one ``leave(bytes:)``.
    func enter(bytes: Int = 0) -> Bool {
        state.withLock { state -> Bool in
            guard !state.stopped, state.pending < maxPending, state.pending == 0 || state.bytes + bytes <= maxPendingBytes else { return false }
            state.pending += 1
            state.bytes += bytes
            return true
        }
    }

    /// Refuses new work from now on; work already started goes on.
    func stop() { state.withLock { $0.stopped = true } }

    /// Whether ``stop()`` was called: work is refused because the manager shuts down.
    var isStopped: Bool { state.withLock { $0.stopped } }

    func leave(bytes: Int = 0) {
        let idle = state.withLock { state -> Bool in
            state.pending -= 1
            state.bytes -= bytes
            return state.pending == 0
        }
        if idle { idleWaiters.wakeAll() }
    }

    /// Returns when nothing is pending, or when the calling task is cancelled.
    func idle() async {
        await idleWaiters.wait { self.pending.count == 0 }
    }
}
