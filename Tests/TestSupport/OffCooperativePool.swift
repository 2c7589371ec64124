import Foundation
package import Testing

/// A trait that runs a suite's tests on threads of their own instead of Swift's
/// cooperative pool.
///
/// Many coder and transformer tests are synchronous: a libvips or libjpeg call runs
/// for tens of milliseconds, and under ThreadSanitizer for seconds. Run on the
/// cooperative pool (two threads on a 2-core machine), a few of them at once hold
/// every thread, and the concurrency tests beside them, whose tasks need a thread
/// to resume on, wait out their deadlines. With this trait the test's task prefers
/// ``BlockingTestExecutor/shared``: the synchronous body runs there, its
/// `#expect`s still on the test's own task (task-locals and all), and the
/// cooperative pool stays free. Put it on suites whose bodies block, not on suites
/// that only await.
package struct OffCooperativePool: SuiteTrait, TestTrait, TestScoping {
    package var isRecursive: Bool { true }
    /// Where the bodies run: ``BlockingTestExecutor/shared`` unless a suite names its own.
    var executor: BlockingTestExecutor = .shared

    package func provideScope(
        for test: Test, testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(executor) {
            // The preference alone moves the task only at its next hop: this closure
            // and a caller-isolated `function` would go on running right here, on
            // the cooperative thread. A `@concurrent` function always hops, to the
            // preferred executor.
            try await Self.hop(function)
        }
    }

    @concurrent private static func hop(_ function: @Sendable () async throws -> Void) async throws {
        try await function()
    }
}

extension Trait where Self == OffCooperativePool {
    /// Runs the tests on ``BlockingTestExecutor/shared``, off the cooperative pool.
    package static var offCooperativePool: Self { Self() }

    /// Runs the tests on `executor`, off the cooperative pool.
    package static func offCooperativePool(_ executor: BlockingTestExecutor) -> Self { Self(executor: executor) }
}

/// A task executor over a few dedicated threads, for test bodies that block.
///
/// Jobs run in the order they arrive. Its lock is `NSCondition` (a pthread mutex and
/// condition), which ThreadSanitizer sees.
package final class BlockingTestExecutor: TaskExecutor, @unchecked Sendable {
    /// One thread per core: as many heavy tests at once as the cooperative pool ran
    /// before, so that on a busy machine (two CPU burners beside `make test`) the
    /// concurrency tests still get the CPU their 30 s waits need; four swamped it.
    /// `TEST_BLOCKING_THREADS` sets another count (`make tsan` runs one, so that at
    /// a sanitizer's slowdown the heavy tests, one at a time, leave the CPU to the
    /// concurrency tests beside them).
    package static let shared = BlockingTestExecutor(threads: {
        if let text = ProcessInfo.processInfo.environment["TEST_BLOCKING_THREADS"], let count = Int(text), count >= 1 { return count }
        return max(1, ProcessInfo.processInfo.activeProcessorCount)
    }())

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var head = 0

    package init(threads: Int) {
        for index in 0..<threads {
            // Named from inside: on Linux a name set before `start()` does not reach
            // the thread, which keeps its creator's (a cooperative thread's) name.
            let thread = Thread { [unowned self] in
                Thread.current.name = "test-blocking-\(index)"
                self.work()
            }
            thread.start()
        }
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while head == jobs.count { condition.wait() }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
