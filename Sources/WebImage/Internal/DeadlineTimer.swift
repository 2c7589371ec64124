/// The deadlines of a manager's loads, kept by one sleeping task for all of them,
/// so that a load with a deadline makes no task group and no timer task of its own.
///
/// ``schedule(at:_:)`` returns a token; ``cancel(_:)`` removes it (a load that
/// finished in time). At its deadline an entry's action runs, once, outside the
/// lock. The sleeper task sleeps until the earliest deadline; it is replaced only
/// when an earlier one arrives (rare: a service gives every request the same
/// allowance, so each new deadline is the latest) and ends when none is left.
final class DeadlineTimer: Sendable {
    private struct Entry {
        let deadline: ContinuousClock.Instant
        let action: @Sendable () -> Void
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        /// The instant the sleeper wakes at, and its task; nil when none runs.
        var sleeper: (wakeAt: ContinuousClock.Instant, task: Task<Void, Never>)?
    }

    private let state = Lock(State())

    /// Entries waiting; for tests.
    var count: Int { state.withLock { $0.entries.count } }

    /// Runs `action` at `deadline`, unless cancelled before.
    func schedule(at deadline: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) -> UInt64 {
        let (id, replaced) = state.withLock { state -> (UInt64, Task<Void, Never>?) in
            state.nextID += 1
            state.entries[state.nextID] = Entry(deadline: deadline, action: action)
            if let sleeper = state.sleeper, sleeper.wakeAt <= deadline { return (state.nextID, nil) }
            let previous = state.sleeper?.task
            state.sleeper = (deadline, startSleeper(until: deadline))
            return (state.nextID, previous)
        }
        replaced?.cancel()
        return id
    }

    /// Removes an entry whose load finished in time; harmless after it fired.
    func cancel(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    private func startSleeper(until instant: ContinuousClock.Instant) -> Task<Void, Never> {
        Task { [weak self] in
            var wakeAt = instant
            while true {
                do { try await Task.sleep(until: wakeAt, clock: .continuous) } catch { return }  // replaced by an earlier one
                guard let self, let next = self.fire() else { return }
                wakeAt = next
            }
        }
    }

    /// Runs every entry that is due; returns the next deadline to sleep until, or
    /// nil (and forgets the sleeper) when none is left.
    private func fire() -> ContinuousClock.Instant? {
        let now = ContinuousClock.now
        let (due, next) = state.withLock { state -> ([Entry], ContinuousClock.Instant?) in
            let due = state.entries.filter { $0.value.deadline <= now }
            for id in due.keys { state.entries.removeValue(forKey: id) }
            let next = state.entries.values.map(\.deadline).min()
            if let next, let sleeper = state.sleeper { state.sleeper = (next, sleeper.task) } else { state.sleeper = nil }
            return (due.values.sorted { $0.deadline < $1.deadline }, next)
        }
        for entry in due { entry.action() }
        return next
    }
}
