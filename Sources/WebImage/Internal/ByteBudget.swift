import DequeModule
import Synchronization

/// A budget of bytes for downloaded originals, charged by bytes that exist: a
/// load is admitted before it downloads while there is room, and its download's
/// charge (one for all the loads that share the download, ``charge(origin:)``)
/// then grows with what its response has delivered and what it declares
/// (``OriginalStage/charged(_:)``), until the last of those loads ends. A request that has not been answered holds nothing, so an
/// origin that accepts connections and never answers takes no room from others.
///
/// Admission is in arrival order (a large reservation is not starved by small
/// ones behind it), except that a load of an origin holding its share (half the
/// budget) lets loads of other origins pass it: alone, an origin may use the
/// whole budget; beside others, it keeps no more than its share from them. A reservation larger than the whole budget is
/// granted alone, when nothing else is charged. Growth is never refused (the
/// bytes have arrived); while the charges are over the limit, no load is
/// admitted. So the charges stay within the limit plus what the downloads in
/// flight receive after it filled: those admitted while it had room, each up to
/// the response size. (``OriginalStage`` admits a download again when it gets
/// its origin's slot, so those are the ones transferring, or queued in the
/// loader.) A caller waiting for its turn can be cancelled.
final class ByteBudget: Sendable {
    let limit: Int
    /// The most one origin may hold before its further loads wait.
    let originShare: Int

    private struct Waiter {
        let id: UInt64
        let bytes: Int
        let origin: String
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var reserved = 0
        var peak = 0
        var byOrigin: [String: Int] = [:]
        var waiters = Deque<Waiter>()
        var nextID: UInt64 = 0
    }

    private let state = Lock(State())

    init(limit: Int) {
        self.limit = max(1, limit)
        self.originShare = max(1, self.limit / 2)
    }

    /// Bytes charged now, the most ever charged at once, and the loads waiting.
    var usage: (reserved: Int, peak: Int, waiting: Int) { state.withLock { ($0.reserved, $0.peak, $0.waiters.count) } }

    /// Bytes one origin holds now.
    func held(by origin: String) -> Int { state.withLock { $0.byOrigin[origin] ?? 0 } }

    /// Waits until `bytes` fit (and `origin` holds less than its share), then
    /// charges them. `bytes` is what exists or is declared now: 0 for a download
    /// not yet answered.
    /// - Throws: `CancellationError` if the task is cancelled while it waits.
    func reserve(_ bytes: Int, origin: String = "") async throws -> Reservation {
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
                        take(bytes, origin, &state)
                        return true
                    }
                    state.waiters.append(Waiter(id: id, bytes: bytes, origin: origin, continuation: continuation))
                    return false
                }
                // Queued behind an origin over its share, it may pass it now.
                if granted == false { grantWaiting() }
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
        return Reservation(budget: self, bytes: bytes, origin: origin)
    }

    /// A charge of nothing yet, made without waiting: for bytes the loads that
    /// will hold them were admitted for already (one download that several
    /// loads share, each admitted by ``reserve(_:origin:)`` before it joined).
    func charge(origin: String = "") -> Reservation { Reservation(budget: self, bytes: 0, origin: origin) }

    /// One download's charge: grown as bytes are declared or arrive, resized to
    /// the body when it is whole, released when the decode ends (or when the
    /// last reference to it goes).
    final class Reservation: Sendable {
        private let budget: ByteBudget
        private let origin: String
        private let held: Lock<Int>

        fileprivate init(budget: ByteBudget, bytes: Int, origin: String) {
            self.budget = budget
            self.origin = origin
            self.held = Lock(bytes)
        }

        /// The bytes charged now.
        var bytes: Int { held.withLock { $0 } }

        /// Charges up to `bytes` (a declared Content-Length, the bytes received so
        /// far). Never refused and never waits: the bytes exist. Never shrinks it.
        func grow(to bytes: Int) {
            let added = held.withLock { held -> Int in
                let more = max(0, bytes - held)
                held += more
                return more
            }
            if added > 0 { budget.charge(added, origin: origin) }
        }

        /// Gives back what is over `bytes` (a body smaller than its declared
        /// length). Never grows it.
        func shrink(to bytes: Int) {
            let freed = held.withLock { held -> Int in
                let keep = min(held, max(0, bytes))
                defer { held = keep }
                return held - keep
            }
            if freed > 0 { budget.give(freed, origin: origin) }
        }

        /// Exactly `bytes`: the whole body's size.
        func resize(to bytes: Int) {
            grow(to: bytes)
            shrink(to: bytes)
        }

        /// Gives everything back; later calls do nothing.
        func release() { shrink(to: 0) }

        deinit { release() }
    }

    private func overShare(_ origin: String, _ state: State) -> Bool {
        (state.byOrigin[origin] ?? 0) >= originShare
    }

    /// Room for `bytes` (at least one byte of room for an unanswered download), or
    /// nothing charged at all.
    private func fits(_ bytes: Int, _ state: State) -> Bool {
        state.reserved == 0 || state.reserved + max(1, bytes) <= limit
    }

    private func take(_ bytes: Int, _ origin: String, _ state: inout State) {
        state.reserved += bytes
        if bytes > 0 { state.byOrigin[origin, default: 0] += bytes }
        state.peak = max(state.peak, state.reserved)
    }

    private func charge(_ bytes: Int, origin: String) {
        state.withLock { take(bytes, origin, &$0) }
    }

    private func give(_ bytes: Int, origin: String) {
        state.withLock { state in
            state.reserved -= bytes
            let left = (state.byOrigin[origin] ?? 0) - bytes
            state.byOrigin[origin] = left > 0 ? left : nil
        }
        grantWaiting()
    }

    /// Grants waiting reservations in order while they fit; a waiter whose origin
    /// holds its share is passed over (it keeps its place), so one origin cannot
    /// hold up the others. Resumes them outside the lock.
    private func grantWaiting() {
        let granted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            var granted: [CheckedContinuation<Void, any Error>] = []
            // The first waiter not passed over is granted if it fits, else none is
            // (arrival order); after a grant, look again from the front.
            while true {
                var grantedOne = false
                for index in state.waiters.indices {
                    let waiter = state.waiters[index]
                    if overShare(waiter.origin, state),
                       state.waiters[(index + 1)...].contains(where: { $0.origin != waiter.origin }) {
                        continue
                    }
                    if fits(waiter.bytes, state) {
                        state.waiters.remove(at: index)
                        take(waiter.bytes, waiter.origin, &state)
                        granted.append(waiter.continuation)
                        grantedOne = true
                    }
                    break
                }
                if !grantedOne { break }
            }
            return granted
        }
        for continuation in granted { continuation.resume() }
    }
}
