import DequeModule
import Synchronization

/// At most ``limit`` downloads per origin (scheme, host and port) at once, across
/// the loads that share it: an origin that accepts connections and never answers
/// holds that many of the loader's slots, never all of them. Further downloads of
/// that origin wait their turn, in order, each cancellable (its deadline, its
/// callers gone); other origins' downloads never wait for it.
///
/// A service sets one on the loads its users ask for (``ImageContext/originLimit``);
/// `ImageEndpoint` does by default. A loader with a per-host limit of its own (the
/// curl loader's `maxConcurrentDownloadsPerHost`) bounds its transfers the same way
/// for every caller.
///
/// ```swift
/// var context = ImageContext()
/// context.originLimit = OriginLimit(limit: 4)
/// ```
public final class OriginLimit: Sendable {
    /// Downloads of one origin at once.
    public let limit: Int

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Origin {
        var running = 0
        var waiters = Deque<Waiter>()
    }

    private struct State {
        var origins: [String: Origin] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Lock(State())

    public init(limit: Int) { self.limit = max(1, limit) }

    /// Downloads running and waiting for `origin` now.
    public func usage(of origin: String) -> (running: Int, waiting: Int) {
        state.withLock { state in state.origins[origin].map { ($0.running, $0.waiters.count) } ?? (0, 0) }
    }

    /// Runs `body` once `origin` has a free slot.
    /// - Throws: `CancellationError` when the task is cancelled while it waits; `body`'s error.
    public func run<T: Sendable>(_ origin: String, _ body: () async throws -> T) async throws -> T {
        try await acquire(origin)
        defer { release(origin) }
        return try await body()
    }

    private func acquire(_ origin: String) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let granted = state.withLock { state -> Bool? in
                    if Task.isCancelled { return nil }
                    var entry = state.origins[origin] ?? Origin()
                    defer { state.origins[origin] = entry }
                    if entry.running < limit {
                        entry.running += 1
                        return true
                    }
                    entry.waiters.append(Waiter(id: id, continuation: continuation))
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
                guard var entry = state.origins[origin], let index = entry.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                let waiter = entry.waiters.remove(at: index)
                state.origins[origin] = entry
                return waiter
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    private func release(_ origin: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard var entry = state.origins[origin] else { return nil }
            defer { state.origins[origin] = entry.running == 0 && entry.waiters.isEmpty ? nil : entry }
            if let waiter = entry.waiters.popFirst() { return waiter.continuation }   // the slot passes on
            entry.running -= 1
            return nil
        }
        next?.resume()
    }
}
