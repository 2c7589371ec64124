import Foundation
@_spi(WebImageInternal) import WebImage

/// The tests' one gate: work waits at it until a test opens it. Tasks wait with
/// ``wait()``; a thread that may block (a transform on the decode pool) with
/// ``waitBlocking(atMost:)``; a callback that must not block (a NIO event loop's)
/// with ``onOpen(_:)``. It can be closed again (a loader that holds requests
/// for part of a test).
package final class Gate: Sendable {
    private struct State {
        var open: Bool
        var waiters: [CheckedContinuation<Void, Never>] = []
        var actions: [@Sendable () -> Void] = []
    }

    private let state: Lock<State>

    package init(open: Bool = false) { state = Lock(State(open: open)) }

    package var isOpen: Bool { state.withLock { $0.open } }

    /// Opens it: every waiter goes on, and every later wait returns at once.
    package func open() {
        let (waiters, actions) = state.withLock { state in
            state.open = true
            defer { state.waiters = []; state.actions = [] }
            return (state.waiters, state.actions)
        }
        for waiter in waiters { waiter.resume() }
        for action in actions { action() }
    }

    /// Closes it: waits from now on wait until the next ``open()``.
    package func close() { state.withLock { $0.open = false } }

    /// Returns when the gate is open.
    package func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Runs `action` when the gate opens (now, if it is open), on the opener's thread.
    package func onOpen(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.open { return true }
            state.actions.append(action)
            return false
        }
        if now { action() }
    }

    /// Blocks the calling thread until the gate opens, for at most `limit` (a
    /// failing test must not hang the suite; then the test's expectations say
    /// what went wrong).
    package func waitBlocking(atMost limit: Duration = .seconds(60)) {
        let until = ContinuousClock.now + limit * TestTiming.scale
        while !isOpen, ContinuousClock.now < until { usleep(2_000) }
    }
}

/// The tests' one poll: `condition`, again every few milliseconds until it holds
/// or `timeout` passes, for state that background work reaches. The ceiling is
/// generous (60 s by default, scaled by `TEST_TIME_SCALE`) because `make test`
/// runs suites in parallel on two cores, beside two CPU burners before a change
/// lands; the poll returns as soon as the condition holds.
/// - Returns: whether it held (expect it, so that a timeout fails the test).
package func eventually(timeout: Duration = .seconds(60), _ condition: @Sendable () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout * TestTiming.scale
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try await condition()
}
