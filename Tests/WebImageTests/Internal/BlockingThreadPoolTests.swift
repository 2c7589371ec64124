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

@Suite("BlockingThreadPool")
struct BlockingThreadPoolTests {
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
