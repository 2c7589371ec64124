import Foundation
import Synchronization
import Testing
import WebImageTestSupport
@testable import WebImage

@Suite("A load bounded as a whole: originals' budget, deadline, shutdown")
struct LoadBoundsTests {
    @Test("ByteBudget: in order, shrinkable, cancellable; one reservation larger than the budget goes alone")
    func byteBudget() async throws {
        let budget = ByteBudget(limit: 1000)
        let a = try await budget.reserve(600)
        let second = Task { try await budget.reserve(600) }
        try #require(await eventually { budget.usage.waiting == 1 })
        let third = Task { try await budget.reserve(100) }
        try #require(await eventually { budget.usage.waiting == 2 })
        #expect(budget.usage.reserved == 600, "the small one waits behind the large one: arrival order")
        a.shrink(to: 300)
        let b = try await second.value
        let c = try await third.value
        #expect(budget.usage.reserved == 1000 && budget.usage.waiting == 0)
        let cancelled = Task { try await budget.reserve(10) }
        try #require(await eventually { budget.usage.waiting == 1 })
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        for reservation in [a, b, c] { reservation.release() }
        #expect(budget.usage.reserved == 0)
        let huge = try await budget.reserve(5000)
        #expect(budget.usage.reserved == 5000, "granted alone")
        huge.release()
        #expect(budget.usage.peak == 5000)
    }

    @Test("ByteBudget charged by bytes that exist: unanswered loads hold nothing; growth is never refused and past the limit holds admission; an origin at its share waits while others pass")
    func chargedByBytes() async throws {
        let budget = ByteBudget(limit: 1000)
        // Sixty-four loads of a silent origin: admitted at once, holding nothing.
        var silent: [ByteBudget.Reservation] = []
        for _ in 0..<64 { silent.append(try await budget.reserve(0, origin: "silent")) }
        #expect(budget.usage.reserved == 0 && budget.usage.waiting == 0)
        let b = try await budget.reserve(0, origin: "b")
        b.grow(to: 300)
        b.grow(to: 600)
        b.grow(to: 200)
        #expect(b.bytes == 600 && budget.held(by: "b") == 600, "grows with what is declared or arrived, never shrinks by growing")
        let c = try await budget.reserve(0, origin: "c")
        c.grow(to: 700)
        #expect(budget.usage.reserved == 1300, "growth past the limit is charged: the bytes exist")
        // Over the limit nothing is admitted, whatever the origin.
        let secondB = Task { try await budget.reserve(0, origin: "b") }
        try #require(await eventually { budget.usage.waiting == 1 })
        let d = Task { try await budget.reserve(400, origin: "d") }
        try #require(await eventually { budget.usage.waiting == 2 })
        // Room again: b holds more than its share (half of 1000), so d, behind it, passes it and fills the budget.
        c.release()
        let granted = try await d.value
        #expect(budget.usage.waiting == 1 && budget.usage.reserved == 1000, "d admitted before b")
        // With no other origin waiting, b's load is admitted when there is room: alone, an origin may use the whole budget.
        granted.release()
        let b2 = try await secondB.value
        b2.grow(to: 350)
        #expect(budget.usage.reserved == 950 && budget.held(by: "b") == 950 && budget.usage.waiting == 0)
        for reservation in silent + [b, b2] { reservation.release() }
        #expect(budget.usage.reserved == 0 && budget.usage.peak == 1300)
    }

    @Test("a burst on an origin that does not answer holds none of the originals' budget; answered, every body is charged, the peak stays within the budget and the bodies in flight, every load ends")
    func originalsBudget() async throws {
        let h = Harness {
            $0.originalsBudget = 1 << 20
            $0.maxResponseSize = 400_000
        }
        for index in 0..<12 { h.loader.serve("test://host/\(index).timg", data: TestCoder.encode(width: 250, height: 250, seed: UInt8(index))) }
        h.loader.close()
        let loads = (0..<12).map { index in Task { try await h.manager.loadImage(with: h.url("\(index).timg")) } }
        try #require(await eventually { h.loader.requestCount == 12 })
        #expect(h.manager.originalsInFlight.bytes == 0 && h.manager.originalsInFlight.waiting == 0,
                "nothing is reserved for requests not yet answered")
        loads[11].cancel()
        let cancelled = await #expect(throws: WebImageError.self) { try await loads[11].value }
        #expect(cancelled?.code == .cancelled)
        h.loader.open()
        for load in loads.prefix(11) { #expect(try await load.value.image?.pixelSize == PixelSize(250)) }
        let body = TestCoder.encode(width: 250, height: 250).count
        #expect(h.manager.originalsInFlight.peak <= (1 << 20) + 12 * body && h.manager.originalsInFlight.bytes == 0)
        #expect(h.manager.originalsInFlight.peak >= body, "the bodies were charged")
    }

    @Test("a download in progress is charged what arrived, and ahead of it what it declares up to as much again plus 1 MiB")
    func chargedAhead() {
        func charged(_ received: Int64, _ expected: Int64?) -> Int { OriginalStage.charged(LoadProgress(received: received, expected: expected)) }
        #expect(charged(0, nil) == 0 && charged(5_000_000, nil) == 5_000_000, "nothing declared: what arrived")
        #expect(charged(10, 60_000_000) == 20 + (1 << 20), "a trickle of a large body: about 1 MiB")
        #expect(charged(1_000, 500_000) == 500_000, "a small body: all of it at once")
        #expect(charged(30_000_000, 45_000_000) == 45_000_000 && charged(10_000_000, 45_000_000) == 20_000_000 + (1 << 20))
        #expect(charged(700, 500) == 700, "never less than arrived")
        #expect(charged(.max, .max) == Int.max, "no overflow")
    }

    @Test("a download queued for its origin's slot is admitted to the originals' budget again when it gets the slot: while the budget is spent it does not start, and says so in its stage")
    func admittedAtTheSlot() async throws {
        let h = Harness { $0.originalsBudget = 1000 }
        for name in ["a", "b"] { h.loader.serve("test://host/\(name).timg", data: TestCoder.encode(width: 32, height: 32)) }
        h.loader.close()
        let limit = OriginLimit(limit: 1)
        var context = ImageContext()
        context.originLimit = limit
        let budget = h.manager.stages.original.budget
        let first = Task { [context] in try await h.manager.loadImage(with: h.url("a.timg"), context: context) }
        try #require(await eventually { h.loader.requestCount == 1 })
        let second = Task { [context] in try await h.manager.loadImage(with: h.url("b.timg"), context: context) }
        let jobKey = h.manager.plan(url: h.url("b.timg"), options: [], context: context).jobKey
        try #require(await eventually { limit.usage(of: "test://host").waiting == 1 }, "admitted, queued for the slot")
        // The budget fills (another origin's body) while the second waits for the slot.
        let other = try await budget.reserve(5000, origin: "other")
        h.loader.open()
        _ = try await first.value
        #expect(await eventually { budget.usage.waiting == 1 && h.manager.jobStages.stage(of: jobKey) == .waitingForOriginals },
                "holding the slot, it waits for room: \(budget.usage)")
        #expect(h.loader.requestCount == 1, "not started while the budget is spent")
        other.release()
        #expect(try await second.value.image?.pixelSize == PixelSize(32))
        #expect(h.loader.requestCount == 2 && budget.usage.peak <= 5000 + TestCoder.encode(width: 32, height: 32).count)
        #expect(await eventually { h.manager.jobStages.isEmpty })
        // A shared download that outlives the job it was started for gives that job no stage again.
        h.manager.jobStages.update(jobKey, .download)
        #expect(h.manager.jobStages.isEmpty)
    }

    @Test("eight sizes of one URL at once share its original: one download, charged once to the originals' budget and stored once; stored, one read of it while the jobs that use it run")
    func originalSharedBySizes() async throws {
        let store = TaskRecordingStore()
        let h = Harness(store: store)
        let body = TestCoder.encode(width: 64, height: 64)
        h.loader.serve("test://host/one.timg", data: body)
        h.loader.close()
        let plainKey = h.manager.plan(url: h.url("one.timg"), options: [], context: ImageContext()).plainKey
        func sizes(_ sides: [Int], gate: Gate?) -> [Task<ImageResult, any Error>] {
            sides.map { side in
                Task {
                    var context = ImageContext(thumbnailPixelSize: PixelSize(side))
                    if let gate { context.transformer = GatedTransformer(gate: gate) }
                    return try await h.manager.loadImage(with: h.url("one.timg"), context: context)
                }
            }
        }
        let downloading = sizes(Array(stride(from: 4, through: 32, by: 4)), gate: nil)
        try #require(await eventually { h.manager.stages.original.downloads.waiterCount == 8 })
        h.loader.open()
        for load in downloading { #expect(try await load.value.cacheType == .none) }
        #expect(h.loader.requestCount == 1)
        #expect(h.manager.originalsInFlight.peak == body.count, "charged once, not once per size")
        #expect(await eventually { store.writes(plainKey) == 1 } && store.writes(plainKey) == 1, "stored once, not once per size")
        // Each job lets go as it ends, a moment after its callers have the result.
        #expect(await eventually { h.manager.originalsInFlight.bytes == 0 && h.manager.stages.lookup.pending.holders(plainKey) == 0 })

        // Stored now: eight other sizes, each held in its transform until all of them have the original.
        let readsBefore = store.reads(plainKey)
        let gate = Gate()
        let reading = sizes(Array(stride(from: 5, through: 33, by: 4)), gate: gate)
        let shared = await eventually { h.manager.stages.lookup.pending.holders(plainKey) == 8 }
        gate.open()
        #expect(shared, "every job holds the one copy")
        for load in reading { #expect(try await load.value.cacheType == .disk) }
        #expect(store.reads(plainKey) - readsBefore == 1, "one read of the stored original for the eight jobs")
        #expect(await eventually { h.manager.stages.lookup.pending.holders(plainKey) == 0 }, "released with the last job")
    }

    @Test("a deadline: the caller gets timedOut, and the download of a load nobody else waits for is cancelled")
    func deadline() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 8, height: 8))
        h.loader.close()
        var context = ImageContext()
        context.deadline = .now + .milliseconds(200)
        let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("a.timg"), context: context) }
        #expect(error?.code == .timedOut && error?.message.contains("deadline in its download") == true, "\(String(describing: error))")
        h.loader.open()
        #expect(await eventually { h.loader.cancellations == 1 }, "the job was cancelled with its only caller")
        let later = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(later.image != nil, "a new load starts afresh")
    }

    @Test("a deadline that passes in the transform, after the download finished, is workTimedOut naming the transform, with a retryAfter; no stage is kept once the job ends")
    func deadlineInTransform() async throws {
        let h = Harness()
        // On a busy machine the download and decode of 8x8 pixels may outlast a
        // short deadline: then the error names that stage, which is checked too,
        // and the next attempt has a longer one. The transform waits at its gate
        // until after the deadline, so some attempt ends there.
        var reached = false
        for (attempt, seconds) in [2, 10, 40, 120].enumerated() where !reached {
            h.loader.serve("test://host/a\(attempt).timg", data: TestCoder.encode(width: 8, height: 8))
            let gate = Gate()
            defer { gate.open() }
            var context = ImageContext()
            context.transformer = GatedTransformer(gate: gate)
            context.deadline = .now + .seconds(seconds)
            let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("a\(attempt).timg"), context: context) }
            let message = error?.message ?? ""
            if message.contains("its transform") {
                reached = true
                #expect(error?.code == .workTimedOut && error?.isTransient == true && error?.retryAfter != nil, "\(String(describing: error))")
                #expect(message.contains("passed its deadline in its transform, after its download had finished"), "\(message)")
            } else {
                // An earlier stage: only a download may be timedOut.
                #expect(error?.code == (message.contains("its download") ? .timedOut : .workTimedOut), "\(String(describing: error))")
            }
        }
        #expect(reached, "some attempt's deadline passed in the transform")
        #expect(await eventually { h.manager.loadsInFlight == 0 && h.manager.jobStages.isEmpty }, "the job's stage goes with it")
    }

    @Test("shutdown's grace period ends loads still in flight with shutDown, at once, and cancels their downloads")
    func shutdownDeadline() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 8, height: 8))
        h.loader.close()
        let load = Task { try await h.manager.loadImage(with: h.url("a.timg")) }
        try #require(await eventually { h.loader.requestCount == 1 })
        let clean = await h.manager.shutdown(gracePeriod: .milliseconds(200))
        #expect(!clean)
        let error = await #expect(throws: WebImageError.self) { try await load.value }
        #expect(error?.code == .shutDown)
        h.loader.open()
        #expect(await eventually { h.loader.cancellations == 1 }, "its download was cancelled")
        let refused = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("a.timg")) }
        #expect(refused?.code == .shutDown)
    }
}

@Suite("InFlightCounter")
struct InFlightCounterTests {
    @Test("a ceiling refuses past it; stop refuses everything; idle returns when the last one leaves")
    func ceiling() async {
        let counter = InFlightCounter(limit: 2)
        #expect(counter.enter() && counter.enter())
        #expect(!counter.enter(), "at the ceiling")
        counter.leave()
        #expect(counter.enter() && counter.count == 2)
        counter.stop()
        #expect(!counter.enter())
        let idle = Task { await counter.idle() }
        counter.leave()
        counter.leave()
        await idle.value
        #expect(counter.count == 0)
        #expect(InFlightCounter().limit > 1 << 40, "no ceiling by default")
    }
}

/// ``TestCoder``'s decode without a header read: its `info` fails.
private struct HeaderlessCoder: ImageCoder {
    func canDecode(_ data: Data) -> Bool { TestCoder().canDecode(data) }
    func info(_ data: Data) throws -> ImageInfo { throw WebImageError(.decodeFailed, "reads no header") }
    func decode(_ data: Data, options: DecodeOptions) throws -> Image { try TestCoder().decode(data, options: options) }
    func canEncode(_ format: ImageFormat) -> Bool { TestCoder().canEncode(format) }
    func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data { try TestCoder().encode(image, as: format, options: options) }
}

/// A transform that waits at a gate (on the pool's thread, which may block).
struct GatedTransformer: ImageTransformer {
    let gate: Gate
    var key: String { "gated" }
    func transform(_ image: Image) throws -> Image {
        gate.waitBlocking()
        return image
    }
}

/// An animation format for the work budget's header check: `GIF89a` (so that it
/// sniffs as GIF), then the frame count as one byte. Its header says 200x200 and
/// the frames; its decode counts how many run at once.
private final class CountingAnimationCoder: ImageCoder, @unchecked Sendable {
    let running = Atomic<Int>(0)
    let most = Atomic<Int>(0)
    let decodes = Atomic<Int>(0)

    static func data(frames: UInt8, seed: UInt8) -> Data { Data("GIF89a".utf8) + Data([frames, seed]) }

    func canDecode(_ data: Data) -> Bool { data.starts(with: Data("GIF89a".utf8)) && data.count == 8 }

    func info(_ data: Data) throws -> ImageInfo {
        ImageInfo(format: .gif, pixelSize: PixelSize(200), frameDurations: Array(repeating: .milliseconds(100), count: Int(data[6])), loopCount: 0, hasAlpha: false)
    }

    func decode(_ data: Data, options: DecodeOptions) throws -> Image {
        decodes.add(1, ordering: .relaxed)
        let now = running.add(1, ordering: .relaxed).newValue
        most.max(now, ordering: .relaxed)
        defer { running.subtract(1, ordering: .relaxed) }
        Thread.sleep(forTimeInterval: 0.05)
        let frames = Int(data[6])
        return Image(pixelSize: PixelSize(200), scale: 1, frames: Array(repeating: Image.Frame(duration: .milliseconds(100)), count: frames),
                     loopCount: 0, format: .gif, hasAlpha: false,
                     storage: PixelBuffer(size: PixelSize(200), channels: 4, bytes: [UInt8](repeating: data[7], count: 200 * 200 * 4 * frames)))
    }

    func canEncode(_ format: ImageFormat) -> Bool { false }
    func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data { throw WebImageError(.encodeFailed, "decodes only") }
}

@Suite("WorkBudget in the manager")
struct WorkBudgetManagerTests {
    @Test("an animation of tiny frames costs at least TransformCost.minimumFrameCost a frame: 40 one-pixel-box frames are heavy, one decode at a time under maxHeavy 1")
    func tinyFramesAreNotFree() async throws {
        #expect(TransformCost.frameCost(0.000001, frames: 40) == TransformCost.minimumFrameCost)
        #expect(TransformCost.frameCost(0.000001, frames: 1) == 0.000001, "a still pays for its pixels only")
        #expect(TransformCost.frameCost(0.3, frames: 40) == 0.3)
        let coder = CountingAnimationCoder()
        let h = Harness {
            $0.coders.register(coder, name: "counting")
            $0.pool = BlockingThreadPool(threadCount: 4, name: "counting")
        }
        let work = WorkBudget(limit: 1000, maxHeavy: 1)
        for index in 0..<4 { h.loader.serve("test://host/tiny\(index).gif", data: CountingAnimationCoder.data(frames: 40, seed: UInt8(index))) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<4 {
                group.addTask {
                    var context = ImageContext(thumbnailPixelSize: PixelSize(1))
                    context.workBudget = work
                    context.workCost = 0.000001  // a one-pixel box: by its pixels, 40 frames are 0.00004 passes
                    _ = try await h.manager.loadImage(with: h.url("tiny\(index).gif"), context: context)
                }
            }
            try await group.waitForAll()
        }
        #expect(coder.most.load(ordering: .relaxed) == 1, "40 frames x 0.05 passes: heavy, so one decode at a time")
        #expect(work.heavy.peak == 1 && work.usage.peak >= 2 && work.usage.inFlight == 0, "\(work.heavy) \(work.usage)")
    }

    @Test("an animation light by its box but heavy by its frames takes a heavy place before its frames are decoded, from its header: one such decode at a time under maxHeavy 1")
    func headerWeighsAnimations() async throws {
        let coder = CountingAnimationCoder()
        // Four decode threads, so that only the budget can keep the decodes apart.
        let h = Harness {
            $0.coders.register(coder, name: "counting")
            $0.pool = BlockingThreadPool(threadCount: 4, name: "counting")
        }
        let work = WorkBudget(limit: 1000, maxHeavy: 1)
        for index in 0..<4 { h.loader.serve("test://host/anim\(index).gif", data: CountingAnimationCoder.data(frames: 40, seed: UInt8(index))) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<4 {
                group.addTask {
                    var context = ImageContext(thumbnailPixelSize: PixelSize(200))
                    context.workBudget = work
                    context.workCost = 0.04  // a 200 px box: light, under a pass
                    _ = try await h.manager.loadImage(with: h.url("anim\(index).gif"), context: context)
                }
            }
            try await group.waitForAll()
        }
        #expect(coder.most.load(ordering: .relaxed) == 1, "40 frames x 0.05 passes (the least a frame costs): heavy, so one decode at a time")
        #expect(work.heavy.peak == 1 && work.usage.peak >= 1.6 && work.usage.inFlight == 0 && work.heavy.inFlight == 0, "\(work.heavy) \(work.usage)")

        // Over the load's maximum by its header: refused before any frame is decoded.
        let before = coder.decodes.load(ordering: .relaxed)
        h.loader.serve("test://host/long.gif", data: CountingAnimationCoder.data(frames: 200, seed: 9))
        var context = ImageContext(thumbnailPixelSize: PixelSize(200))
        context.workBudget = work
        context.workCost = 0.04
        context.maxTransformCost = 4
        let refused = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("long.gif"), context: context) }
        // 200 frames at the least a frame costs (0.05 passes, over the 0.04 asked).
        #expect(refused?.code == .costLimitExceeded && refused?.message.contains("10 megapixel passes") == true, "\(String(describing: refused))")
        #expect(coder.decodes.load(ordering: .relaxed) == before, "no frame decoded")
    }
}

extension WorkBudgetManagerTests {
    /// A manager whose one heavy place (`maxHeavy` 1) a load holds at a gate
    /// after its decode, 100 pixels counted. A pool of its own: a gated job on
    /// the shared pool, beside another test's, would leave no thread for the
    /// test's other render.
    static func heavyPlaceHeld(_ name: String) async -> (Harness, WorkBudget, Gate, Task<ImageResult, any Error>) {
        let h = Harness { $0.pool = BlockingThreadPool(threadCount: 2, name: name) }
        let work = WorkBudget(limit: 1000, maxHeavy: 1)
        let gate = Gate()
        h.loader.serve("test://host/held.timg", data: TestCoder.encode(width: 10, height: 10))
        var heavy = ImageContext()
        heavy.workBudget = work
        heavy.workCost = 2
        heavy.transformer = GatedTransformer(gate: gate)
        let holder = Task { try await h.manager.loadImage(with: h.url("held.timg"), context: heavy) }
        #expect(await eventually { work.heavy.inFlight == 1 && h.manager.decodedPixelsInFlight == 100 })
        return (h, work, gate, holder)
    }

    @Test("a still image light by its box's decode but heavy by its encode takes a heavy place from its header, before its decode: its pixels never wait for room")
    func headerWeighsStills() async throws {
        let (h, work, gate, holder) = await Self.heavyPlaceHeld("headerWeighsStills")
        h.loader.serve("test://host/wide.timg", data: TestCoder.encode(width: 2000, height: 1000))
        // 0.04 passes by its request; its 2000x1000 result's encode, 2 passes more.
        var light = ImageContext(thumbnailPixelSize: PixelSize(2000))
        light.workBudget = work
        light.workCost = 0.04
        light.encodeWorkWeight = 1
        let waiting = Task { try await h.manager.loadImage(with: h.url("wide.timg"), context: light) }
        #expect(await eventually { work.usage.waiting == 1 }, "it waits for the heavy place")
        #expect(h.manager.decodedPixelsInFlight == 100, "without its pixels: only the holder's are counted")
        gate.open()
        let (_, made) = try await (holder.value, waiting.value)
        #expect(made.image?.pixelSize == PixelSize(width: 2000, height: 1000))
        #expect(work.heavy.peak == 1 && work.usage.peak >= 2.04 && h.manager.decodedPixelsInFlight == 0, "\(work.usage)")
    }

    @Test("an image whose header no coder reads, found heavy once decoded, stays counted in decodedPixelsInFlight while it waits for room and is finished; nothing stays counted after")
    func waitingPixelsCounted() async throws {
        let (h, work, gate, holder) = await Self.heavyPlaceHeld("waitingPixelsCounted")
        h.loader.serve("test://host/large.timg", data: TestCoder.encode(width: 2000, height: 1000))
        // Light by its request, heavy by its 2 MP encode once decoded: it waits for the heavy place with its image.
        var light = ImageContext()
        light.workBudget = work
        light.workCost = 0.04
        light.encodeWorkWeight = 1
        light.coder = HeaderlessCoder()
        let waiting = Task { try await h.manager.loadImage(with: h.url("large.timg"), context: light) }
        #expect(await eventually { h.manager.decodedPixelsInFlight == 100 + 2_000_000 }, "the waiting image's pixels are counted")
        gate.open()
        _ = try await (holder.value, waiting.value)
        #expect(h.manager.decodedPixelsInFlight == 0)
    }
}

@Suite("RenderStage.mayAnimate")
struct MayAnimateTests {
    @Test("a still PNG or WebP is known from its first bytes and costs no header read; APNG, animated WebP and the animation formats do")
    func firstBytes() {
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(!RenderStage.mayAnimate(png + Data("....IHDR....IDAT".utf8), .png))
        #expect(RenderStage.mayAnimate(png + Data("....IHDR....acTL....IDAT".utf8), .png))
        #expect(!RenderStage.mayAnimate(png + Data("....IHDR....IDAT....acTL".utf8), .png), "acTL after the pixels does not animate")
        func webp(_ chunk: String, flags: UInt8) -> Data { Data("RIFF\0\0\0\0WEBP\(chunk)".utf8) + Data([0, 0, 0, 0, flags, 0, 0, 0]) }
        #expect(RenderStage.mayAnimate(webp("VP8X", flags: 0x02), .webp))
        #expect(!RenderStage.mayAnimate(webp("VP8X", flags: 0x10), .webp), "alpha only")
        #expect(!RenderStage.mayAnimate(webp("VP8 ", flags: 0x02), .webp), "a simple lossy WebP")
        #expect(RenderStage.mayAnimate(Data("GIF89a".utf8), .gif) && !RenderStage.mayAnimate(Data([0xFF, 0xD8]), .jpeg))
    }
}
