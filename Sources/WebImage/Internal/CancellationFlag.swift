import Synchronization

/// A flag that a task's cancellation sets and blocking work polls: work on a pool
/// thread cannot see `Task.isCancelled`, so a chain asks this between steps.
final class CancellationFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isCancelled: Bool { value.load(ordering: .relaxed) }
    func cancel() { value.store(true, ordering: .relaxed) }

    /// Runs `body` with a flag that the calling task's cancellation sets.
    static func run<T>(_ body: (CancellationFlag) async throws -> T) async throws -> T {
        let flag = CancellationFlag()
        return try await withTaskCancellationHandler { try await body(flag) } onCancel: { flag.cancel() }
    }
}
