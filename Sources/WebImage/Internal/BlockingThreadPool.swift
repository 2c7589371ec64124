import Foundation
import Synchronization

/// Threads of its own for blocking work (C calls, file I/O), so that none of it
/// ever runs on Swift's cooperative pool, whose few threads must never block.
///
/// ```swift
/// let pixels = try await BlockingThreadPool.shared.run { try decodeWithC(bytes) }
/// ```
///
/// Jobs run in the order they were submitted. A task already cancelled when it
/// calls ``run(_:)`` throws `CancellationError` without queueing; a queued job runs
/// to the end (a C call cannot be interrupted), so callers check cancellation after.
public final class BlockingThreadPool: Sendable {
    /// The pool the core and its plugins share: one thread per core.
    public static let shared = BlockingThreadPool(threadCount: ProcessInfo.processInfo.activeProcessorCount, name: "webimage.blocking")

    private struct Job {
        let run: @Sendable () -> Void
    }

    private struct Queue {
        var jobs: [Job] = []
        var head = 0
        var stopped = false
    }

    private let queue = Mutex(Queue())
    private let available = DispatchSemaphore(value: 0)
    /// The number of threads.
    public let threadCount: Int

    /// Starts `threadCount` threads named `name-N`.
    public init(threadCount: Int, name: String) {
        self.threadCount = max(1, threadCount)
        for index in 0..<self.threadCount {
            // Each thread holds the pool until `shutdown()`; the shared pool lives forever.
            let thread = Thread { self.work() }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    /// Stops the threads once the queued jobs are done. Jobs submitted later throw.
    public func shutdown() {
        queue.withLock { $0.stopped = true }
        for _ in 0..<threadCount { available.signal() }
    }

    /// Runs `body` on one of the pool's threads and returns its result.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = Job {
                continuation.resume(with: Result { try body() })
            }
            let accepted = queue.withLock { queue -> Bool in
                guard !queue.stopped else { return false }
                queue.jobs.append(job)
                return true
            }
            if accepted {
                available.signal()
            } else {
                continuation.resume(throwing: WebImageError(.invalidArgument, "the blocking thread pool has been shut down"))
            }
        }
    }

    private func work() {
        while true {
            available.wait()
            let job = queue.withLock { queue -> Job? in
                guard queue.head < queue.jobs.count else { return nil }
                let job = queue.jobs[queue.head]
                queue.head += 1
                if queue.head > 64, queue.head * 2 > queue.jobs.count {
                    queue.jobs.removeFirst(queue.head)
                    queue.head = 0
                }
                return job
            }
            guard let job else {
                if queue.withLock({ $0.stopped }) { return }
                continue
            }
            job.run()
        }
    }
}
