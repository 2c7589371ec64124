import Foundation
import Synchronization
import Testing
import WebImageTestSupport
import WebImage

/// Stands for a job's input (a whole image's bytes): its deinit says when it is freed.
private final class Payload: Sendable {
    let bytes: Data
    init(count: Int) { bytes = Data(count: count) }
}

/// Jobs running at once, the most seen, and waits inside `blocking(_:)`.
private final class RunningJobs: Sendable {
    let state = Mutex((running: 0, most: 0, waited: 0))
}

@Suite("BlockingThreadPool")
struct BlockingThreadPoolTests {
    @Test("its threads carry their names where the OS shows them (/proc, top -H, gdb, perf): wi.blocking-N, wi.io-N")
    func threadNames() async throws {
        @Sendable func comm() throws -> String {
            try String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let blocking = try await BlockingThreadPool.shared.run { try comm() }
        let io = try await BlockingThreadPool.io.run { try comm() }
        #expect(blocking.hasPrefix("wi.blocking-") && io.hasPrefix("wi.io-"), "\(blocking), \(io)")
        let pool = BlockingThreadPool(threadCount: 1, name: "a.pool.with.a.long.name")
        defer { pool.shutdown() }
        let long = try await pool.run { try comm() }
        // A pool of one runs its jobs on thread 0, or on thread 1 (which takes over while a job waits).
        #expect(["h.a.long.name-0", "h.a.long.name-1"].contains(long) && long.utf8.count == 15, "15 bytes at most, the number kept: \(long)")
    }

    @Test("a finished job's captures are released at once, not when the queue compacts")
    func releasesFinishedJobs() async throws {
        let pool = BlockingThreadPool(threadCount: 1, name: "test.pool")
        defer { pool.shutdown() }
        // Fewer jobs than any compaction threshold the queue ever had (64): with an
        // array and a head index, every one of these payloads stayed alive.
        for _ in 0..<10 {
            weak var watched: Payload?
            do {
                let payload = Payload(count: 1 << 20)
                watched = payload
                let size = try await pool.run { payload.bytes.count }
                #expect(size == 1 << 20)
            }
            // The one thread has finished its previous loop turn once it ran this job.
            try await pool.run {}
            #expect(watched == nil, "the pool still holds a finished job's input")
        }
    }

    @Test("a job waiting inside blocking(_:) gives its processor to the next job, and takes one back before it goes on")
    func blockingGivesUpTheProcessor() async throws {
        let pool = BlockingThreadPool(threadCount: 1, name: "test.pool")
        defer { pool.shutdown() }
        let gate = DispatchSemaphore(value: 0)
        let waiting = Tally()
        // The one processor's job waits for the next job: without blocking(_:) the
        // next job could not start until this wait timed out.
        let first = Task {
            try await pool.run { () -> Bool in
                waiting.increment()
                return BlockingThreadPool.blocking { gate.wait(timeout: .now() + .seconds(120)) } == .success
            }
        }
        try #require(await eventually { waiting.value == 1 })
        _ = try await pool.run { gate.signal() }
        #expect(try await first.value, "the next job did not run while the first waited")
        // Outside a pool's job it only runs the body.
        #expect(BlockingThreadPool.blocking { 42 } == 42)
    }

    @Test("no more than threadCount jobs run at once when some wait inside blocking(_:)")
    func blockingKeepsTheBound() async throws {
        let pool = BlockingThreadPool(threadCount: 2, name: "test.pool")
        defer { pool.shutdown() }
        let counts = RunningJobs()
        let running = { @Sendable (change: Int) in counts.state.withLock { $0.running += change; $0.most = max($0.most, $0.running) } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<16 {
                group.addTask {
                    try await pool.run {
                        running(1)
                        usleep(2_000)
                        if index.isMultiple(of: 2) {
                            running(-1)
                            BlockingThreadPool.blocking {
                                counts.state.withLock { $0.waited += 1 }
                                // A call within the wait has no processor to give: nothing changes.
                                _ = BlockingThreadPool.blocking { usleep(5_000) }
                            }
                            running(1)
                            usleep(1_000)
                        }
                        running(-1)
                    }
                }
            }
            try await group.waitForAll()
        }
        let final = counts.state.withLock { $0 }
        #expect(final.waited == 8 && final.running == 0)
        #expect(final.most <= 2, "\(final.most) jobs ran at once on a pool of 2")
    }

    @Test("a job cancelled while queued never runs, and its caller returns at once")
    func cancelQueued() async throws {
        let pool = BlockingThreadPool(threadCount: 1, name: "test.pool")
        defer { pool.shutdown() }
        let gate = DispatchSemaphore(value: 0)
        let ran = Tally()
        let running = Tally()
        let blocker = Task { try await pool.run { running.increment(); gate.wait() } }
        try #require(await eventually { running.value == 1 })
        let queued = Task { try await pool.run { ran.increment() } }
        try #require(await eventually { pool.queuedJobs == 1 }, "the job waits in the queue behind the blocker")
        queued.cancel()
        await #expect(throws: CancellationError.self) { try await queued.value }
        gate.signal()
        try await blocker.value
        _ = try await pool.run { }  // the pool still works, and has passed the cancelled job
        #expect(ran.value == 0)
    }
}
