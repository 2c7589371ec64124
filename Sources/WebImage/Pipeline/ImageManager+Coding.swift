import Foundation
import Logging
import Synchronization
import Tracing

extension ImageManager {
    /// A decoded image, and the derived result's bytes when they were asked for.
    struct Decoded: Sendable {
        var image: Image
        /// The cache serializer's bytes when encoding was asked for; inside, nil
        /// when the serializer made none.
        var encoded: Data??
    }

    /// Decodes (and for originals, transforms, and with `encoding` also encodes
    /// the derived result) in one job on the blocking pool: one queue wait, not one
    /// per stage behind every decode that arrived in between.
    func decode(_ data: Data, _ plan: LoadPlan, derived: Bool, encoding: Bool = false) async throws -> Decoded {
        let (key, options, context) = (plan.plainKey, plan.options, plan.context)
        guard let coder = context.coder ?? configuration.coders.decoder(for: data) else {
            let what = ImageFormat.sniff(data).map { "\($0) data, which no registered coder decodes" } ?? "data no registered coder recognises"
            throw WebImageError(.unsupportedFormat, "\(key) is \(what) (coders: \(configuration.coders.names.joined(separator: ", ")))")
        }
        var decodeOptions = configuration.decodeOptions
        decodeOptions.scale = context.scaleFactor ?? ImageScale.scale(forKey: key)
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
        let transformer = derived ? nil : context.transformer
        let metrics = metrics
        let finalOptions = decodeOptions
        let pool = configuration.pool
        let serializer = encoding ? serializer(context) : nil
        let derivedKey = plan.key, coders = configuration.coders
        // The pool's thread has no task: its spans are started under the load's context.
        let parent = ServiceContext.current ?? .topLevel
        // Heavy work waits for its room in the service's work budget (not a derived
        // result's decode: its bytes are the finished image).
        let jobKey = plan.jobKey, stages = jobStages
        stages.set(jobKey, .waitingForRoom)
        var work: ByteBudget.Reservation?
        if !derived, let budget = context.workBudget {
            do { work = try await budget.acquire(context.workCost) } catch {
                throw WebImageError.wrap(error, as: .cancelled, "waiting for room in the work budget")
            }
        }
        defer { work?.release() }
        let maxCost = context.maxTransformCost
        return try await CancellationFlag.run { flag in
            // Each step of the chain is checked against the decode's limits before it
            // runs, and a cancelled load (its callers gone, its deadline passed) stops between steps.
            var limits = TransformBudget(pixelLimit: finalOptions.pixelLimit, memoryLimit: finalOptions.memoryLimit,
                                         isCancelled: { flag.isCancelled })
            limits.maxCost = maxCost
            let budget = limits
            return try await pool.run { try flag.makingCurrent {
                let started = ContinuousClock.now
                var image: Image
                stages.set(jobKey, .decode)
                image = try self.stage("webimage.decode", parent) { span in
                    span.set("webimage.bytes", data.count)
                    do {
                        let image = try coder.decode(data, options: finalOptions)
                        span.setSize("webimage.image", image.pixelSize)
                        return image
                    } catch {
                        throw WebImageError.wrap(error, as: .decodeFailed, "decoding \(key)")
                    }
                }
                // Decoded pixels held by this job until it ends (a gauge in /metrics).
                let held = image.pixelSize.width.multipliedReportingOverflow(by: image.pixelSize.height * max(1, image.frameCount))
                let pixels = held.overflow ? Int.max / 4 : held.partialValue
                self.pixelsInFlight.add(pixels, ordering: .relaxed)
                defer { self.pixelsInFlight.subtract(pixels, ordering: .relaxed) }
                metrics.decoded(duration: ContinuousClock.now - started)
                if let transformer {
                    let input = image
                    stages.set(jobKey, .transform)
                    image = try self.stage("webimage.transform", parent) { span in
                        span.set("webimage.transformer", transformer.key)
                        do {
                            let output = try budget.apply(transformer, to: input)
                            span.setSize("webimage.image", output.pixelSize)
                            return output
                        } catch {
                            throw WebImageError.wrap(error, as: .transformFailed, "transforming \(key) with \(transformer.key)")
                        }
                    }
                }
                let made = image
                let encoded = try serializer.map { serializer in
                    stages.set(jobKey, .encode)
                    return try self.stage("webimage.encode", parent) { span in
                        let bytes = serializer.serialize(made, derivedKey, coders)
                        span.set("webimage.bytes", bytes?.count ?? 0)
                        return bytes
                    }
                }
                return Decoded(image: image, encoded: encoded)
            } }
        }
    }

    /// Runs one stage of a pool job inside a span under `parent`, its error recorded.
    func stage<T>(_ name: String, _ parent: ServiceContext, _ body: (any Span) throws -> T) throws -> T {
        let span = startSpan(name, context: parent)
        defer { span.end() }
        do { return try body(span) } catch {
            span.recordError(error)
            throw error
        }
    }

    /// A derived result's bytes, by the cache serializer, on the decode pool; nil
    /// when the serializer makes none.
    func encodeDerived(_ image: Image, key: String, context: ImageContext) async throws -> Data? {
        let serializer = serializer(context)
        let coders = configuration.coders
        do { return try await configuration.pool.run({ serializer.serialize(image, key, coders) }) } catch {
            throw WebImageError.wrap(error, as: .encodeFailed, "encoding \(key)")
        }
    }

    /// What makes a derived result's bytes: the load's serializer, else the
    /// manager's, else negotiation from the accepted formats, else the encode format.
    func serializer(_ context: ImageContext) -> CacheSerializer {
        context.cacheSerializer ?? configuration.cacheSerializer
            ?? context.acceptedFormats.map { .negotiating($0, options: encodeOptions(context)) }
            ?? .encoding(as: context.encodeFormat, options: encodeOptions(context))
    }

    /// The options derived results are encoded with: the load's, else the manager's.
    func encodeOptions(_ context: ImageContext) -> EncodeOptions { context.encodeOptions ?? configuration.encodeOptions }
}
