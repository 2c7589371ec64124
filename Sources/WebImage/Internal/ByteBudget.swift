import DequeModule
import Synchronization

/// A budget of bytes that loads reserve before they download and give back when
/// their decode ends, so that the originals downloaded and waiting for a decode
/// thread never take more than the budget, whatever the callers do.
///
/// Reservations are granted in arrival order (a large one is not starved by small
/// ones behind it). A reservation larger than the whole budget is granted alone,
/// when nothing else is reserved. A caller waiting for its turn can be cancelled.
final class ByteBudget: Sendable {
    let limit: Int

    private struct Waiter {
        let id: UInt64
        let bytes: Int
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var reserved = 0
        var peak = 0
        var waiters = Deque<Waiter>()
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    init(limit: Int) { self.limit = max(1, limit) }

    /// Bytes reserved now, the most ever reserved at once, and the loads waiting.
    var usage: (reserved: Int, peak: Int, waiting: Int) { state.withLock { ($0.reserved, $0.peak, $0.waiters.count) } }

    /// Waits until `bytes` fit, then reserves them.
    /// - Throws: `CancellationError` if the task is cancelled while it waits.
    func reserve(_ bytes: Int) async throws -> Reservation {
        let bytes = max(0, bytes)
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let granted = state.withLock { state -> Bool? in
                    if Task.isCancelled { return nil }
                    if state.waiters.isEmpty, fits(bytes, state) {
                        take(bytes, &state)
                        return true
                    }
                    state.waiters.append(Waiter(id: id, bytes: bytes, continuation: continuation))
                    return false
                }
                switch granted {
                case true?: continuation.resume()
                case nil: continuation.resume(throwing: CancellationError())
                case false?: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
            // The waiter that left may have blocked smaller ones behind it.
            grantWaiting()
        }
        return Reservation(budget: self, bytes: bytes)
    }

    /// One reservation: shrink it when the size is known, release it when done.
    final class Reservation: Sendable {
        private let budget: ByteBudget
        private let held: Mutex<Int>

        fileprivate init(budget: ByteBudget, bytes: Int) {
            self.budget = budget
            self.held = Mutex(bytes)
        }

        /// Gives back what is over `bytes` (a Content-Length smaller than the
        /// maximum, a body smaller than its reservation). Never grows it.
        func shrink(to bytes: Int) {
            let freed = held.withLock { held -> Int in
                let keep = min(held, max(0, bytes))
                defer { held = keep }
                return held - keep
            }
            if freed > 0 { budget.give(freed) }
        }

        /// Gives everything back; later calls do nothing.
        func release() { shrink(to: 0) }

        deinit { release() }
    }

    private func fits(_ bytes: Int, _ state: State) -> Bool {
        state.reserved == 0 || state.reserved + bytes <= limit
    }

    private func take(_ bytes: Int, _ state: inout State) {
        state.reserved += bytes
        state.peak = max(state.peak, state.reserved)
    }

    private func give(_ bytes: Int) {
        state.withLock { $0.reserved -= bytes }
        grantWaiting()
    }

    /// Grants waiting reservations in order while they fit; resumes them outside the lock.
    private func grantWaiting() {
        let granted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            var granted: [CheckedContinuation<Void, any Error>] = []
            while let first = state.waiters.first, fits(first.bytes, state) {
                state.waiters.removeFirst()
                take(first.bytes, &state)
                granted.append(first.continuation)
            }
            return granted
        }
        for continuation in granted { continuation.resume() }
    }
}
