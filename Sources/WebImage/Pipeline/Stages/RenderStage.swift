import Foundation
import Logging
import Synchronization
import Tracing

/// The stage that makes pixels: decode, transform and (for derived bytes wanted
/// now) encode, in one job on the blocking pool. One queue wait, not one per
/// step behind every decode that arrived in between.
///
/// Heavy work first waits for its room in the context's work budget. Each step
/// of a transform chain is checked against the decode's limits before it runs,
/// and a cancelled load (its callers gone, its deadline passed) stops between steps.
final class RenderStage: Sendable {
    let services: StageServices
    /// Pixels decoded by pool jobs still running (``ImageManager/decodedPixelsInFlight``).
    let pixelsInFlight = Atomic<Int>(0)

    init(services: StageServices) {
        self.services = services
    }

    /// A decoded image, and the derived result's bytes when they were asked for.
    struct Rendered: Sendable {
        var image: Image
        /// The cache serializer's bytes when encoding was asked for; inside, nil
        /// when the serializer made none.
        var encoded: Data??
    }

    /// What one pool job does, worked out on the caller's task.
    private struct Work: Sendable {
        let key: String
        let derivedKey: String
        let jobKey: String
        /// The load's own coder (``ImageContext/coder``), else nil: the registry decodes.
        let coder: (any ImageCoder)?
        let options: DecodeOptions
        let transformer: (any ImageTransformer)?
        let serializer: CacheSerializer?
    }

    /// Decodes `data` (and for originals, transforms; with `encoding`, also encodes
    /// the derived result).
    /// - Parameter derived: the bytes are a derived result already: no thumbnail,
    ///   no transform, no orientation, no work budget.
    func render(_ data: Data, _ plan: LoadPlan, derived: Bool, encoding: Bool = false) async throws -> Rendered {
        let configuration = services.configuration
        guard plan.context.coder != nil || configuration.coders.decoder(for: data) != nil else {
            let what = ImageFormat.sniff(data).map { "\($0) data, which no registered coder decodes" } ?? "data no registered coder recognises"
            throw configuration.coders.noCoder("\(plan.plainKey) is \(what) (coders: \(configuration.coders.names.joined(separator: ", ")))")
        }
        let work = Work(key: plan.plainKey, derivedKey: plan.key, jobKey: plan.jobKey, coder: plan.context.coder,
                        options: decodeOptions(plan, derived: derived),
                        transformer: derived ? nil : plan.context.transformer,
                        serializer: encoding ? serializer(plan.context) : nil)
        services.jobStages.set(plan.jobKey, .waitingForRoom)
        let workBudget = derived ? nil : plan.context.workBudget
        let (workCost, encodeWeight) = (plan.context.workCost, plan.context.encodeWorkWeight)
        let room = Lock<WorkBudget.Room?>(nil)
        defer { room.withLock { $0?.release() } }
        func wait(for cost: Double) async throws {
            guard let workBudget else { return }
            do {
                let granted = try await workBudget.acquire(cost)
                room.withLock { $0 = granted }
            } catch {
                throw WebImageError.wrap(error, as: .cancelled, "waiting for room in the work budget")
            }
        }
        try await wait(for: workCost)
        // The pool's thread has no task: its spans are started under the load's context.
        let parent = ServiceContext.current ?? .topLevel
        let (pool, maxCost) = (configuration.pool, plan.context.maxTransformCost)
        return try await CancellationFlag.run { flag in
            var limits = TransformBudget(pixelLimit: work.options.pixelLimit, memoryLimit: work.options.memoryLimit,
                                         isCancelled: { flag.isCancelled })
            limits.maxCost = maxCost
            let budget = limits
            // The room held, against which the image's cost is weighed.
            func held() -> Double? { workBudget == nil ? nil : room.withLock { $0?.cost ?? 0 } }
            func hold(_ cost: Double) async throws {
                services.jobStages.set(plan.jobKey, .waitingForRoom)
                if let current = room.withLock({ $0 }) {
                    do { try await current.grow(to: cost) } catch {
                        throw WebImageError.wrap(error, as: .cancelled, "waiting for room in the work budget")
                    }
                } else {
                    try await wait(for: cost)
                }
            }
            let first = held()
            var outcome = try await pool.run {
                try flag.makingCurrent { try self.run(work, data, budget, parent, perFrameCost: workCost, encodeWeight: encodeWeight, heldRoom: first) }
            }
            // Heavier than its room, now that its frames (and, once decoded, its
            // encode) are known: it waits for the whole cost (keeping its place, if
            // it has one; never holding passes while it waits), then goes on. At
            // most twice: from the header, before the decode, then from the image.
            while true {
                switch outcome {
                case .done(let rendered):
                    return rendered
                case .needsRoom(let decoded?, let cost, let pixels):
                    // The image's pixels stay counted while it waits and is finished.
                    defer { pixelsInFlight.subtract(pixels, ordering: .relaxed) }
                    try await hold(cost)
                    return try await pool.run { try flag.makingCurrent { try self.finish(work, decoded, budget, parent) } }
                case .needsRoom(nil, let cost, _):
                    try await hold(cost)
                    let holding = held()
                    outcome = try await pool.run {
                        try flag.makingCurrent { try self.run(work, data, budget, parent, perFrameCost: workCost, encodeWeight: encodeWeight, heldRoom: holding) }
                    }
                }
            }
        }
    }

    /// What the first pool job ended with.
    private enum Outcome: Sendable {
        case done(Rendered)
        /// Costing `cost` passes, a pass or more beyond the room held: found from
        /// the header (no image yet) or from the decoded image.
        /// `pixels`: the image's, still counted in ``pixelsInFlight`` (0 without one).
        case needsRoom(Image?, cost: Double, pixels: Int)
    }

    /// The decode options of one load: the manager's, with the load's options and context on top.
    private func decodeOptions(_ plan: LoadPlan, derived: Bool) -> DecodeOptions {
        let (options, context) = (plan.options, plan.context)
        var decodeOptions = services.configuration.decodeOptions
        decodeOptions.scale = context.scaleFactor ?? ImageScale.scale(forKey: plan.plainKey)
        decodeOptions.firstFrameOnly = decodeOptions.firstFrameOnly || options.contains(.decodeFirstFrameOnly)
        decodeOptions.scaleDownLargeImages = decodeOptions.scaleDownLargeImages || options.contains(.scaleDownLargeImages)
        decodeOptions.keepOrientation = decodeOptions.keepOrientation || context.keepOrientation
        decodeOptions.allowTruncated = decodeOptions.allowTruncated || context.allowTruncated
        decodeOptions.keepColorProfile = decodeOptions.keepColorProfile || encodeOptions(context).keepColorProfile
        decodeOptions.preserveAspectRatio = context.preserveAspectRatio
        decodeOptions.cropFocus = context.cropFocus
        // Derived bytes already are the thumbnail, transformed and upright.
        decodeOptions.thumbnailPixelSize = derived ? nil : context.thumbnailPixelSize
        if derived { decodeOptions.keepOrientation = true }
        return decodeOptions
    }

    /// The pool job: decode, transform, encode, each in its span. With `heldRoom`
    /// (the load is under a work budget, holding that much room), the decoded
    /// image's cost (`perFrameCost` per frame, and `encodeWeight` per megapixel
    /// of the transform's result, every frame counted) is weighed first: past the budget's
    /// `maxCost`, `costLimitExceeded`; a pass or more beyond `heldRoom`, the job ends
    /// with the image, to wait for room before the rest.
    private func run(_ work: Work, _ data: Data, _ budget: TransformBudget, _ parent: ServiceContext,
                     perFrameCost: Double, encodeWeight: Double, heldRoom: Double?) throws -> Outcome {
        let (spans, stages) = (services.spans, services.jobStages)
        // An animation light by its box may be heavy by its frames, and decoding
        // them is most of its work; a still image light by its box's decode may be
        // heavy by its encode. Both are weighed from the header before the decode,
        // so that a load found heavy waits for its room without holding pixels.
        // What a frame costs: the estimate made from the box, or, once the header
        // was read, no more than the real frame's own work.
        var perFrameCost = perFrameCost
        if let heldRoom, let (cost, frames, perFrame) = headerCost(work, data, perFrameCost: perFrameCost, encodeWeight: encodeWeight, heldRoom: heldRoom) {
            perFrameCost = perFrame
            if let maxCost = budget.maxCost, cost > maxCost {
                // Refused from the header: no frame is decoded for a load that cannot be made.
                let what = frames > 1 ? "the animation's \(frames) frames" : "the image"
                throw WebImageError(.costLimitExceeded, "\(what) and its encode cost \(Int(cost.rounded(.up))) megapixel passes, more than the \(Int(maxCost)) allowed")
            }
            if cost >= 1, cost - heldRoom >= 1 { return .needsRoom(nil, cost: cost, pixels: 0) }
        }
        let started = ContinuousClock.now
        stages.set(work.jobKey, .decode)
        let image = try spans.step("webimage.decode", parent) { span in
            span.set("webimage.bytes", data.count)
            do {
                var logger = self.services.logger
                logger[metadataKey: "key"] = "\(work.key)"
                let image = try CoderLog.$logger.withValue(logger) {
                    try work.coder?.decode(data, options: work.options) ?? self.services.configuration.coders.decode(data, options: work.options)
                }
                span.setSize("webimage.image", image.pixelSize)
                return image
            } catch {
                throw WebImageError.wrap(error, as: .decodeFailed, "decoding \(work.key)")
            }
        }
        // Decoded pixels held by this job until it ends (a gauge in /metrics).
        let held = image.pixelSize.width.multipliedReportingOverflow(by: image.pixelSize.height * max(1, image.frameCount))
        let pixels = held.overflow ? Int.max / 4 : held.partialValue
        pixelsInFlight.add(pixels, ordering: .relaxed)
        // Handed on with the image when it must wait for room: the caller subtracts them.
        var handedOn = false
        defer { if !handedOn { pixelsInFlight.subtract(pixels, ordering: .relaxed) } }
        services.metrics.decoded(duration: ContinuousClock.now - started)
        if let heldRoom {
            // Every frame, and the encode of what the transform will make of them.
            let decoded = ImageFootprint(image)
            let output = work.transformer.map { $0.footprint(after: decoded) } ?? decoded
            let cost = TransformCost.frameCost(perFrameCost, frames: decoded.frames) * Double(decoded.frames) + TransformCost.pass(output) * encodeWeight
            if let maxCost = budget.maxCost, cost > maxCost {
                let frames = decoded.frames > 1 ? " x \(decoded.frames) frames" : ""
                throw WebImageError(.costLimitExceeded, "\(image.pixelSize)\(frames) and its encode cost \(Int(cost.rounded(.up))) megapixel passes, more than the \(Int(maxCost)) allowed")
            }
            if cost >= 1, cost - heldRoom >= 1 {
                handedOn = true
                return .needsRoom(image, cost: cost, pixels: pixels)
            }
        }
        return .done(try finish(work, image, budget, parent))
    }

    /// What a load will cost, from its header, before any pixel is decoded:
    /// `perFrameCost` per frame, and the encode of what the transform makes of
    /// the image fitted to the box. Nil when the header need not be read, or no
    /// coder reads it (the decode says why).
    ///
    /// An animation's header is always read (its frames are most of its work). A
    /// still image's is read only when the most it can cost (its box, every side
    /// full) is a pass or more beyond `heldRoom`: a small thumbnail reads none.
    /// Found heavy here, the load waits for room before its decode; weighed only
    /// after it, the image's pixels would wait with it, and under a burst of
    /// such loads the decoded images would pile up behind the heavy places.
    private func headerCost(_ work: Work, _ data: Data, perFrameCost: Double, encodeWeight: Double, heldRoom: Double) -> (cost: Double, frames: Int, perFrame: Double)? {
        let animates = !work.options.firstFrameOnly && (ImageFormat.sniff(data).map { Self.mayAnimate(data, $0) } ?? false)
        if !animates {
            // A still's cost differs from the room held only by its encode.
            guard encodeWeight > 0 else { return nil }
            if let box = work.options.thumbnailPixelSize {
                let bound = ImageFootprint(size: box, bands: 4)
                let most = perFrameCost + TransformCost.pass(work.transformer.map { $0.footprint(after: bound) } ?? bound) * encodeWeight
                guard most >= 1, most - heldRoom >= 1 else { return nil }
            }
        }
        guard let info = try? work.coder?.info(data) ?? services.configuration.coders.info(data) else { return nil }
        let frames = animates ? info.frameCount : 1
        if animates, frames <= 1 { return nil }
        var frame = info.pixelSize
        if let box = work.options.thumbnailPixelSize, frame.width > 0, frame.height > 0 {
            if work.options.preserveAspectRatio {
                let scale = min(1, min(Double(box.width) / Double(frame.width), Double(box.height) / Double(frame.height)))
                frame = PixelSize(width: max(1, Int(Double(frame.width) * scale)), height: max(1, Int(Double(frame.height) * scale)))
            } else {
                frame = PixelSize(width: min(box.width, frame.width), height: min(box.height, frame.height))
            }
        }
        // The box's estimate counts a missing side at its maximum; an image smaller
        // than the box is never made larger, so a frame costs no more than reading
        // its own pixels, writing the fitted ones and the steps on those.
        let single = ImageFootprint(size: frame, bands: 4)
        let own = TransformCost.pass(ImageFootprint(size: info.pixelSize, bands: 4)) + TransformCost.pass(single)
            + (work.transformer.map { TransformCost.estimate($0, input: single) } ?? 0)
        let perFrame = min(perFrameCost, own)
        let fitted = ImageFootprint(size: frame, bands: 4, frames: frames)
        let output = work.transformer.map { $0.footprint(after: fitted) } ?? fitted
        return (TransformCost.frameCost(perFrame, frames: frames) * Double(frames) + TransformCost.pass(output) * encodeWeight, frames, perFrame)
    }

    /// Whether `data` can hold frames, from its first bytes: a PNG only with an
    /// `acTL` chunk before its pixels, a WebP only with VP8X's animation flag, so
    /// that a still PNG or WebP (most of them) costs no header read here.
    static func mayAnimate(_ data: Data, _ format: ImageFormat) -> Bool {
        switch format {
        case .gif, .avif, .heif, .jxl:
            return true
        case .png:
            let head = data.prefix(1 << 16)
            guard let actl = head.range(of: Data("acTL".utf8)) else { return false }
            return head.range(of: Data("IDAT".utf8)).map { actl.lowerBound < $0.lowerBound } ?? true
        case .webp:
            // RIFF....WEBPVP8X, then the flags byte: 0x02 is "animation".
            let start = data.startIndex
            return data.count > 20 && data[(start + 12)..<(start + 16)].elementsEqual("VP8X".utf8) && data[start + 20] & 0x02 != 0
        default:
            return false
        }
    }

    /// The rest of a pool job from the decoded image: transform, encode.
    private func finish(_ work: Work, _ decoded: Image, _ budget: TransformBudget, _ parent: ServiceContext) throws -> Rendered {
        let (spans, stages) = (services.spans, services.jobStages)
        var image = decoded
        if let transformer = work.transformer {
            let input = image
            stages.set(work.jobKey, .transform)
            image = try spans.step("webimage.transform", parent) { span in
                span.set("webimage.transformer", transformer.key)
                do {
                    let output = try budget.apply(transformer, to: input)
                    span.setSize("webimage.image", output.pixelSize)
                    return output
                } catch {
                    throw WebImageError.wrap(error, as: .transformFailed, "transforming \(work.key) with \(transformer.key)")
                }
            }
        }
        let made = image, coders = services.configuration.coders
        let encoded = try work.serializer.map { serializer in
            stages.set(work.jobKey, .encode)
            return try spans.step("webimage.encode", parent) { span in
                let bytes = serializer.serialize(made, work.derivedKey, coders)
                span.set("webimage.bytes", bytes?.count ?? 0)
                return bytes
            }
        }
        return Rendered(image: image, encoded: encoded)
    }

    /// A derived result's bytes, by the cache serializer, on the decode pool; nil
    /// when the serializer makes none. (A background store write's encode.)
    func encodeDerived(_ image: Image, key: String, context: ImageContext) async throws -> Data? {
        let serializer = serializer(context)
        let coders = services.configuration.coders
        do { return try await services.configuration.pool.run({ serializer.serialize(image, key, coders) }) } catch {
            throw WebImageError.wrap(error, as: .encodeFailed, "encoding \(key)")
        }
    }

    /// What makes a derived result's bytes: the load's serializer, else the
    /// manager's, else negotiation from the accepted formats, else the encode format.
    func serializer(_ context: ImageContext) -> CacheSerializer {
        let configuration = services.configuration
        return context.cacheSerializer ?? configuration.cacheSerializer
            ?? context.acceptedFormats.map { .negotiating($0, options: encodeOptions(context)) }
            ?? .encoding(as: context.encodeFormat, options: encodeOptions(context))
    }

    /// The options derived results are encoded with: the load's, else the manager's.
    func encodeOptions(_ context: ImageContext) -> EncodeOptions { context.encodeOptions ?? services.configuration.encodeOptions }
}
