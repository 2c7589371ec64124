import Synchronization

/// Runs one job per key however many callers ask for it at once.
///
/// Each caller waits on a continuation of its own, so a caller that is cancelled
/// returns at once (throwing `CancellationError`) while the others keep waiting.
/// The job itself is cancelled only when its last caller has gone. Progress the
/// job reports reaches every caller still waiting. When the job ends, every caller
/// gets its result and the key is free for a new job.
///
/// A caller may bring a deadline: at it, that caller alone gets the deadline's
/// error (the job is cancelled if it was the last caller), through the manager's
/// one ``DeadlineTimer``, with no task group or timer task of its own.
///
/// The job runs on a task of its own: that is what lets each caller cancel alone
/// while the others keep waiting (a job run on its first caller's task would end
/// with that caller).
///
/// Continuations are resumed, and progress handlers called, outside the lock.
final class Coalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    typealias Progress = @Sendable (LoadProgress) -> Void

    private struct Waiter {
        let continuation: CheckedContinuation<Value, any Error>
        let progress: Progress?
    }

    private struct Job {
        let id: UInt64
        var waiters: [UInt64: Waiter] = [:]
        var task: Task<Void, Never>?
    }

    private struct State {
        var jobs: [Key: Job] = [:]
        var nextID: UInt64 = 1
    }

    private let state = Lock(State())
    /// `state.jobs.count`, set under the lock wherever a job is added or removed:
    /// ``hasJobs`` reads it without the lock (a warm hit asks, and nearly always
    /// nothing is running).
    private let running = Atomic<Int>(0)

    /// Whether any job is running. Advisory, as ``isRunning(_:)`` is: a job may
    /// start just after.
    var hasJobs: Bool { running.load(ordering: .acquiring) > 0 }

    /// The number of jobs running; for tests and metrics.
    var jobCount: Int { state.withLock { $0.jobs.count } }

    /// Callers waiting, over every job; for tests.
    var waiterCount: Int { state.withLock { $0.jobs.values.reduce(0) { $0 + $1.waiters.count } } }

    /// Whether a job for `key` is running (a new caller would join it).
    func isRunning(_ key: Key) -> Bool { state.withLock { $0.jobs[key] != nil } }

    /// A caller's deadline: when, the timer that keeps it, and the error it gets then.
    struct Deadline: Sendable {
        let instant: ContinuousClock.Instant
        let timer: DeadlineTimer
        let error: @Sendable () -> any Error
    }

    /// Joins the job for `key`, starting it with `operation` if there is none.
    /// When that job ends, `finished` (the one of the caller that started it) is
    /// called with its result and the number of callers about to get it (0 when
    /// every caller left first), under the lock that lets `key` go: no caller gets
    /// the result, and no new caller starts a new job for `key`, before it
    /// returns. It must be quick and must not call into this coalescer.
    func value(
        for key: Key,
        priority: TaskPriority? = nil,
        progress: Progress? = nil,
        deadline: Deadline? = nil,
        operation: @escaping @Sendable (_ progress: @escaping Progress) async throws -> Value,
        finished: (@Sendable (Result<Value, any Error>, _ callers: Int) -> Void)? = nil
    ) async throws -> Value {
        let waiterID = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        // Scheduled before the waiter exists: a deadline that passes in between is
        // seen when it is added (the clock only moves forward).
        let timerID = deadline.map { deadline in
            deadline.timer.schedule(at: deadline.instant) { [weak self] in
                self?.leave(key: key, waiterID: waiterID, with: deadline.error())
            }
        }
        defer { if let deadline, let timerID { deadline.timer.cancel(timerID) } }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let waiter = Waiter(continuation: continuation, progress: progress)
                // Decided under the lock: the cancellation handler takes the same
                // lock, so a waiter is either seen cancelled here or removed there.
                let start = state.withLock { state -> (UInt64)? in
                    if Task.isCancelled { return nil }
                    if let deadline, ContinuousClock.now >= deadline.instant { return UInt64.max }
                    if state.jobs[key] != nil {
                        state.jobs[key]!.waiters[waiterID] = waiter
                        return 0
                    }
                    let jobID = state.nextID
                    state.nextID += 1
                    var job = Job(id: jobID)
                    job.waiters[waiterID] = waiter
                    state.jobs[key] = job
                    running.store(state.jobs.count, ordering: .releasing)
                    return jobID
                }
                guard let start else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                if start == UInt64.max, let deadline {
                    // Past its deadline already: this caller alone fails; it never joined.
                    continuation.resume(throwing: deadline.error())
                    return
                }
                guard start != 0 else { return }
                let task = Task(priority: priority) {
                    let result: Result<Value, any Error>
                    do {
                        result = .success(try await operation { [weak self] value in self?.report(value, key: key, jobID: start) })
                    } catch {
                        result = .failure(error)
                    }
                    self.finish(key: key, jobID: start, result: result, finished: finished)
                }
                // The task may already have finished; only attach it to a live job.
                let cancelNow = state.withLock { state -> Bool in
                    guard state.jobs[key]?.id == start else { return false }
                    state.jobs[key]!.task = task
                    return state.jobs[key]!.waiters.isEmpty
                }
                if cancelNow { task.cancel() }
            }
        } onCancel: {
            self.leave(key: key, waiterID: waiterID)
        }
    }

    /// Removes a caller: it gets `error` (cancellation, or its deadline's error)
    /// at once, and the job is cancelled if it was the last.
    private func leave(key: Key, waiterID: UInt64, with error: any Error = CancellationError()) {
        let (waiter, taskToCancel) = state.withLock { state -> (Waiter?, Task<Void, Never>?) in
            guard var job = state.jobs[key], let waiter = job.waiters.removeValue(forKey: waiterID) else { return (nil, nil) }
            if job.waiters.isEmpty {
                // Last caller gone: the job is abandoned; a new caller starts afresh.
                state.jobs[key] = nil
                running.store(state.jobs.count, ordering: .releasing)
                return (waiter, job.task)
            }
            state.jobs[key] = job
            return (waiter, nil)
        }
        waiter?.continuation.resume(throwing: error)
        taskToCancel?.cancel()
    }

    /// Ends every job now: each caller gets `error` at once, and each job's task is
    /// cancelled (a download aborts; a transform chain stops at its next step). A
    /// job that later finishes finds nobody waiting. For a shutdown's deadline.
    /// - Returns: the number of jobs ended.
    @discardableResult
    func abandonAll(with error: any Error) -> Int {
        let jobs = state.withLock { state -> [Job] in
            defer {
                state.jobs.removeAll()
                running.store(0, ordering: .releasing)
            }
            return Array(state.jobs.values)
        }
        for job in jobs {
            for waiter in job.waiters.values { waiter.continuation.resume(throwing: error) }
            job.task?.cancel()
        }
        return jobs.count
    }

    private func report(_ value: LoadProgress, key: Key, jobID: UInt64) {
        let handlers = state.withLock { state -> [Progress] in
            guard let job = state.jobs[key], job.id == jobID else { return [] }
            return job.waiters.values.compactMap(\.progress)
        }
        for handler in handlers { handler(value) }
    }

    private func finish(key: Key, jobID: UInt64, result: Result<Value, any Error>,
                        finished: (@Sendable (Result<Value, any Error>, Int) -> Void)?) {
        let waiters = state.withLock { state -> [Waiter] in
            guard let job = state.jobs[key], job.id == jobID else {
                finished?(result, 0)
                return []
            }
            state.jobs[key] = nil
            running.store(state.jobs.count, ordering: .releasing)
            finished?(result, job.waiters.count)
            return Array(job.waiters.values)
        }
        for waiter in waiters { waiter.continuation.resume(with: result) }
    }
}
