import Synchronization

/// Work in flight, counted with one atomic add each way (a load's hot path must
/// not take a lock for this), with an optional ceiling: the manager counts its
/// loads with one, so that ``ImageManager/shutdown(gracePeriod:)`` can refuse new
/// loads and wait for the running ones; a service counts its requests with one,
/// so that it can shed those past its ceiling before they do any work.
///
/// ```swift
/// let requests = InFlightCounter(limit: 256)
/// guard requests.enter() else { return overloaded() }   // 503, Retry-After
/// defer { requests.leave() }
/// ```
public final class InFlightCounter: Sendable {
    /// The count, plus ``stoppedBit`` once ``stop()`` was called.
    private let state = Atomic<Int>(0)
    private static let stoppedBit = 1 << 62
    private let waiters = IdleWaiters()
    /// The most counted in at once; `Int.max` (the default) for no ceiling.
    public let limit: Int

    public init(limit: Int = .max) { self.limit = max(1, min(limit, Self.stoppedBit - 1)) }

    /// How many are in now.
    public var count: Int { state.load(ordering: .acquiring) & ~Self.stoppedBit }

    /// Counts one in, unless stopped or at the ceiling. Every `true` must be
    /// matched by one ``leave()``.
    public func enter() -> Bool {
        var current = state.load(ordering: .relaxed)
        while current & Self.stoppedBit == 0, current < limit {
            let (exchanged, original) = state.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// Counts one out.
    public func leave() {
        let now = state.subtract(1, ordering: .acquiringAndReleasing).newValue
        guard now == Self.stoppedBit else { return }
        waiters.wakeAll()
    }

    /// Refuses every ``enter()`` from now on.
    public func stop() { _ = state.bitwiseOr(Self.stoppedBit, ordering: .acquiringAndReleasing) }

    /// Returns when none is in (call after ``stop()``), or when the calling task
    /// is cancelled.
    public func idle() async {
        await waiters.wait { self.count == 0 }
    }
}
