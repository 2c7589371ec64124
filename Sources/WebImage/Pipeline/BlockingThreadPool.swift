import DequeModule
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Threads of its own for blocking work (C calls, file I/O), so that none of it
/// ever runs on Swift's cooperative pool, whose few threads must never block.
///
/// ```swift
/// let pixels = try await BlockingThreadPool.shared.run { try decodeWithC(bytes) }
/// ```
///
/// Jobs run in the order they were submitted. A task cancelled while its job
/// still waits in the queue gets `CancellationError` at once and the job never
/// runs; a job that has started runs to the end (a C call cannot be interrupted).
public final class BlockingThreadPool: Sendable {
    /// The pool for CPU-bound work (decoding, transforming, encoding): one job per core at once.
    public static let shared = BlockingThreadPool(threadCount: ProcessInfo.processInfo.activeProcessorCount, name: "webimage.blocking")

    /// The pool for blocking I/O (disk stores, file loads): separate from
    /// ``shared`` so that a disk hit never queues behind decodes, with more threads
    /// than cores (four at least, two per core) because its jobs mostly wait.
    public static let io = BlockingThreadPool(threadCount: max(4, 2 * ProcessInfo.processInfo.activeProcessorCount), name: "webimage.io")

    private struct Job {
        let run: @Sendable () -> Void
    }

    /// Jobs waiting for a thread. A `Deque`, so that a job is released the moment a
    /// thread takes it: a job's closure holds its input (a whole image's bytes), and
    /// an array with a head index kept finished jobs alive until it compacted.
    private struct Queue {
        var jobs = Deque<Job>()
        var stopped = false
    }

    private let queue = Lock(Queue())
    private let available = DispatchSemaphore(value: 0)
    /// One per job that may run at once: a thread holds one while it runs a job,
    /// except inside ``blocking(_:)``.
    private let slots: DispatchSemaphore
    /// The number of jobs that run at once.
    public let threadCount: Int
    /// The threads: `threadCount`, and as many again that take the slots of
    /// threads waiting inside ``blocking(_:)``.
    private let allThreads: Int

    /// Jobs waiting for a thread (not those running).
    public var queuedJobs: Int { queue.withLock { $0.jobs.count } }

    /// Starts `threadCount` threads named `name-N`, and `threadCount` more that
    /// run jobs only while others wait inside ``blocking(_:)``.
    public init(threadCount: Int, name: String) {
        self.threadCount = max(1, threadCount)
        self.allThreads = 2 * self.threadCount
        self.slots = DispatchSemaphore(value: self.threadCount)
        for index in 0..<allThreads {
            // Each thread holds the pool until `shutdown()`; the shared pool lives forever.
            let full = "\(name)-\(index)"
            let thread = Thread {
                Self.nameCurrentThread(full)
                pthread_setspecific(Self.currentPool, Unmanaged.passUnretained(self).toOpaque())
                self.work()
            }
            thread.name = full
            thread.start()
        }
    }

    /// The pool whose thread this is, for ``blocking(_:)``.
    private static let currentPool = makeThreadKey()
    /// Set while this thread's job waits inside ``blocking(_:)``: a call within
    /// that wait has no processor to give.
    private static let lending = makeThreadKey()

    private static func makeThreadKey() -> pthread_key_t {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }

    /// Runs `body`, which waits for something other than the processor (another
    /// job's result, say), and lets another job of the pool run on the processor
    /// meanwhile, when called from a job of a pool. Elsewhere it only runs `body`.
    ///
    /// Without it, a job that waits for another job's result holds one of the
    /// pool's processors idle: with one per core, several sizes of one photo
    /// waiting for its one decode left a core with nothing to do. Each pool has
    /// as many threads again as it runs jobs at once, to take over while jobs
    /// wait here; once `body` returns, the job waits for a processor of the
    /// pool again, so no more than ``threadCount`` jobs ever run at once.
    /// What `body` waits for must not be a job still queued in the same pool. A
    /// call within another's wait only runs its body.
    ///
    /// ```swift
    /// let pixels = BlockingThreadPool.blocking { decodeOfTheSameFile.wait() }
    /// ```
    public static func blocking<T>(_ body: () throws -> T) rethrows -> T {
        guard let raw = pthread_getspecific(currentPool), pthread_getspecific(lending) == nil else { return try body() }
        let pool = Unmanaged<BlockingThreadPool>.fromOpaque(raw).takeUnretainedValue()
        pthread_setspecific(lending, raw)
        pool.slots.signal()
        defer {
            pool.slots.wait()
            pthread_setspecific(lending, nil)
        }
        return try body()
    }

    /// Gives the calling thread `name` as the OS knows it (`top -H`, `/proc`, gdb,
    /// `perf`), which Foundation's `Thread.name` does not set on Linux: at most 15
    /// bytes there, so `webimage.` becomes `wi.` (`wi.blocking-0`), and a longer name
    /// loses its start, keeping the thread's number.
    static func nameCurrentThread(_ name: String) {
        #if os(Linux)
        var short = name.hasPrefix("webimage.") ? "wi." + name.dropFirst("webimage.".count) : name
        while short.utf8.count > 15 { short.removeFirst() }
        // pthread_setname_np is not in Swift's Glibc module; this is what it does.
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        _ = short.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        #endif
    }

    /// Stops the threads once the queued jobs are done. Jobs submitted later throw.
    public func shutdown() {
        queue.withLock { $0.stopped = true }
        for _ in 0..<allThreads { available.signal() }
    }

    /// Runs `body` on one of the pool's threads and returns its result.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        let ticket = Ticket<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                guard ticket.attach(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                let job = Job {
                    // Claimed here or by cancellation, never both.
                    guard let continuation = ticket.claim() else { return }
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
                    ticket.claim()?.resume(throwing: WebImageError(.invalidArgument, "the blocking thread pool has been shut down"))
                }
            }
        } onCancel: {
            ticket.cancel()?.resume(throwing: CancellationError())
        }
    }

    private func work() {
        while true {
            available.wait()
            slots.wait()
            // The job (and its input) is released before its processor is given back.
            let ran: Bool = {
                guard let job = queue.withLock({ $0.jobs.popFirst() }) else { return false }
                job.run()
                return true
            }()
            slots.signal()
            if !ran, queue.withLock({ $0.stopped }) { return }
        }
    }
}

/// One job's continuation, taken exactly once: by the pool thread that starts
/// the job, or by cancellation while it still waits.
private final class Ticket<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var cancelled = false
    }

    private let state = Lock(State())

    /// Stores the continuation; false if the task was cancelled before.
    func attach(_ continuation: CheckedContinuation<T, any Error>) -> Bool {
        state.withLock { state in
            guard !state.cancelled else { return false }
            state.continuation = continuation
            return true
        }
    }

    /// Takes the continuation to run the job; nil if cancellation took it.
    @discardableResult
    func claim() -> CheckedContinuation<T, any Error>? {
        state.withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }
    }

    /// Marks the job cancelled and takes the continuation if it has not started.
    func cancel() -> CheckedContinuation<T, any Error>? {
        state.withLock { state in
            state.cancelled = true
            defer { state.continuation = nil }
            return state.continuation
        }
    }
}
