import Foundation
import Synchronization
import Testing
import WebImageTestSupport
@_spi(WebImageInternal) @testable import WebImage

@Suite("ImageManager: coalescing, cancellation, tasks")
struct CoalescingTests {
    @Test("100 concurrent loads of one URL reach the loader once, and all succeed with progress")
    func coalesces() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 16, height: 16))
        h.loader.close()
        let progressCalls = Tally()
        let results = try await withThrowingTaskGroup(of: ImageResult.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try await h.manager.loadImage(with: h.url("a.timg")) { _ in progressCalls.increment() }
                }
            }
            #expect(await eventually { h.loader.requestCount == 1 })
            #expect(await eventually { h.manager.images.waiterCount == 100 }, "every caller has joined the one job")
            h.loader.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0.image?.pixelSize == PixelSize(16) })
        #expect(h.loader.requestCount == 1)
        #expect(progressCalls.value == 200, "both progress reports reach every caller")
    }

    @Test("cancelling 99 of 100 leaves the download running; the last caller succeeds")
    func partialCancel() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 4, height: 4))
        h.loader.close()
        let tasks = (0..<100).map { _ in Task { try await h.manager.loadImage(with: h.url("a.timg")) } }
        #expect(await eventually { h.loader.requestCount == 1 })
        for task in tasks.dropLast() { task.cancel() }
        for task in tasks.dropLast() {
            let error = await #expect(throws: WebImageError.self) { try await task.value }
            #expect(error?.code == .cancelled)
        }
        h.loader.open()
        let last = try await tasks.last!.value
        #expect(last.image?.pixelSize == PixelSize(4))
        #expect(h.loader.cancellations == 0)
        #expect(h.loader.requestCount == 1)
    }

    @Test("cancelling every caller cancels the download")
    func fullCancel() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 4, height: 4))
        h.loader.close()
        let tasks = (0..<10).map { _ in Task { try await h.manager.loadImage(with: h.url("a.timg")) } }
        #expect(await eventually { h.loader.requestCount == 1 })
        for task in tasks { task.cancel() }
        for task in tasks { _ = try? await task.value }
        h.loader.open()
        #expect(await eventually { h.loader.cancellations == 1 })
        #expect(h.manager.blocklist.count == 0, "a cancellation never blocks a URL")

        // The key is free again: a new load starts a new download.
        let again = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(again.cacheType == .none && h.loader.requestCount == 2)
    }

    @Test("a thumbnail and the original of one URL share one download")
    func sharedDownload() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 40, height: 40))
        h.loader.close()
        async let original = h.manager.loadImage(with: h.url("a.timg"))
        async let thumbnail = h.manager.loadImage(with: h.url("a.timg"), context: ImageContext(thumbnailPixelSize: PixelSize(10)))
        #expect(await eventually { h.loader.requestCount >= 1 })
        #expect(await eventually { h.manager.downloads.waiterCount == 2 }, "both jobs wait on the one download")
        h.loader.open()
        let (a, b) = try await (original, thumbnail)
        #expect(a.image?.pixelSize == PixelSize(40) && b.image?.pixelSize == PixelSize(10))
        #expect(h.loader.requestCount == 1)
    }

    @Test("ImageTask streams progress and can be cancelled")
    func imageTask() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 10, height: 10))
        let task = h.manager.imageTask(with: h.url("a.timg"))
        var seen: [LoadProgress] = []
        for await value in task.progress { seen.append(value) }
        let result = try await task.result
        #expect(result.image != nil)
        #expect(seen.last?.fraction == 1 && seen.count == 2)

        h.loader.close()
        let cancelled = h.manager.imageTask(with: h.url("b.timg"))
        cancelled.cancel()
        let error = await #expect(throws: WebImageError.self) { try await cancelled.result }
        #expect(error?.code == .cancelled)
        h.loader.open()
    }

    @Test("a new load in a slot cancels the previous one")
    func slots() async throws {
        let h = Harness()
        h.loader.serve("test://host/old.timg", data: TestCoder.encode(width: 1, height: 1))
        h.loader.serve("test://host/new.timg", data: TestCoder.encode(width: 2, height: 2))
        h.loader.close()
        let old = h.manager.imageTask(with: h.url("old.timg"), slot: "cell-1")
        #expect(await eventually { h.loader.requestCount == 1 })
        let new = h.manager.imageTask(with: h.url("new.timg"), slot: "cell-1")
        let other = h.manager.imageTask(with: h.url("old.timg"), slot: "cell-2")
        let error = await #expect(throws: WebImageError.self) { try await old.result }
        #expect(error?.code == .cancelled)
        h.loader.open()
        #expect(try await new.result.image?.pixelSize == PixelSize(2))
        #expect(try await other.result.image != nil, "another slot is untouched")
    }

    @Test("the prefetcher loads with limited concurrency and counts failures")
    func prefetcher() async throws {
        let h = Harness()
        let urls = (0..<20).map { h.url("p\($0).timg") }
        for (index, url) in urls.enumerated() where index % 5 != 0 {
            h.loader.serve(url.absoluteString, data: TestCoder.encode(width: 2, height: 2))
        }
        let reports = Lock<[ImagePrefetcher.Progress]>([])
        let prefetcher = ImagePrefetcher(manager: h.manager, maxConcurrent: 3, options: [.lowPriority, .waitStoreCache])
        let final = await prefetcher.prefetch(urls) { progress in reports.withLock { $0.append(progress) } }
        #expect(final == .init(finished: 20, skipped: 4, total: 20))
        #expect(reports.withLock { $0.count } == 20)
        #expect(h.loader.requests.allSatisfy { $0.priority == .low })
        let hit = try await h.manager.loadImage(with: urls[1], options: .fromCacheOnly)
        #expect(hit.cacheType == .memory)
    }

    @Test("cancelling a prefetch stops starting new loads")
    func prefetchCancel() async throws {
        let h = Harness()
        let urls = (0..<50).map { h.url("q\($0).timg") }
        for url in urls { h.loader.serve(url.absoluteString, data: TestCoder.encode(width: 2, height: 2)) }
        h.loader.close()
        let prefetcher = ImagePrefetcher(manager: h.manager, maxConcurrent: 2)
        let task = Task { await prefetcher.prefetch(urls) }
        #expect(await eventually { h.loader.requestCount == 2 })
        task.cancel()
        let result = await task.value
        h.loader.open()
        #expect(result.finished < 50)
        #expect(h.loader.requestCount == 2)
    }
}

@Suite("Deadlines: one timer for every load, no task group")
struct DeadlineTests {
    @Test("a caller past its deadline fails alone with its stage's error; a caller without one, sharing the job, still gets the image; no timer entry is left")
    func deadlinePerCaller() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 4, height: 4))
        h.loader.close()
        let patient = Task { try await h.manager.loadImage(with: h.url("a.timg")) }
        #expect(await eventually { h.loader.requestCount == 1 })
        var hurried = ImageContext()
        hurried.deadline = .now + .milliseconds(50)
        let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("a.timg"), context: hurried) }
        #expect(error?.code == .timedOut && error?.message.contains("its download") == true, "\(String(describing: error))")
        #expect(h.loader.cancellations == 0, "the other caller still waits: the download goes on")
        h.loader.open()
        #expect(try await patient.value.image?.pixelSize == PixelSize(4))
        #expect(h.manager.deadlines.count == 0, "the expired entry fired and left; none is kept")
    }

    @Test("a deadline that passes is counted under its own code, and the job it cancels is not counted as a failure")
    func deadlineMetrics() async throws {
        let metrics = RecordingMetrics.shared
        let tag = [("test", UUID().uuidString)]
        let h = Harness { $0.metricsDimensions = tag }
        h.loader.serve("test://host/m.timg", data: TestCoder.encode(width: 2, height: 2))
        h.loader.close()
        var hurried = ImageContext()
        hurried.deadline = .now + .milliseconds(50)
        let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("m.timg"), context: hurried) }
        #expect(error?.code == .timedOut)
        h.loader.open()
        #expect(await eventually { h.loader.cancellations == 1 }, "its only caller gone, the job and its download were cancelled")
        #expect(await eventually { h.manager.loadsInFlight == 0 && h.manager.jobStages.isEmpty })
        #expect(metrics.value("webimage_errors_total", [("code", "timedOut")] + tag) == 1)
        #expect(metrics.value("webimage_errors_total", [("code", "cancelled")] + tag) == 0)
    }

    @Test("a deadline already past fails at once; loads that finish in time cancel their entries")
    func pastAndInTime() async throws {
        let h = Harness()
        h.loader.serve("test://host/b.timg", data: TestCoder.encode(width: 2, height: 2))
        var late = ImageContext()
        late.deadline = .now - .seconds(1)
        let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("b.timg"), context: late) }
        #expect(error?.code == .timedOut || error?.code == .workTimedOut, "\(String(describing: error))")
        var roomy = ImageContext()
        roomy.deadline = .now + .seconds(600)
        for index in 0..<20 {
            h.loader.serve("test://host/c\(index).timg", data: TestCoder.encode(width: 2, height: 2))
            _ = try await h.manager.loadImage(with: h.url("c\(index).timg"), context: roomy)
        }
        #expect(h.manager.deadlines.count == 0)
    }

    @Test("the timer fires entries in deadline order, an earlier one scheduled after a later one included")
    func timerOrder() async throws {
        let timer = DeadlineTimer()
        let fired = Lock<[Int]>([])
        let now = ContinuousClock.now
        _ = timer.schedule(at: now + .milliseconds(300)) { fired.withLock { $0.append(3) } }
        _ = timer.schedule(at: now + .milliseconds(100)) { fired.withLock { $0.append(1) } }
        let cancelled = timer.schedule(at: now + .milliseconds(200)) { fired.withLock { $0.append(2) } }
        timer.cancel(cancelled)
        #expect(await eventually { fired.withLock { $0.count } == 2 })
        #expect(fired.withLock { $0 } == [1, 3])
        #expect(timer.count == 0)
    }
}
