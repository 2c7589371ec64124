import Foundation

/// What a transform chain costs, in megapixel passes: one pass over a million
/// pixels (every frame counted) is 1. A step's cost is its input's pixels times
/// its weight: 1 for a step that reads each pixel a few times (crop, flip, tint,
/// grey, round, flatten, trim, watermark), input plus output for a resize or pad,
/// and for a convolution a weight that grows with its kernel: `1 + sigma` for
/// blur, `2 + sigma` for sharpen (a Gaussian's kernel is about 6 sigma wide and
/// separable). On this machine's libvips, one megapixel pass of blur runs in
/// about 10 ms (docs/serving.md, "What requests cost").
///
/// ```swift
/// let cost = TransformCost.estimate(transformer, input: ImageFootprint(size: PixelSize(width: 2048, height: 2048), bands: 4))
/// ```
public enum TransformCost {
    /// The cost of running `transformer`'s steps from `input`, each step from the
    /// footprint the one before it predicts.
    public static func estimate(_ transformer: any ImageTransformer, input: ImageFootprint) -> Double {
        var footprint = input
        var total = 0.0
        for step in transformer.steps {
            total += step.cost(for: footprint)
            footprint = step.footprint(after: footprint)
        }
        return total
    }

    /// One pass over `footprint`'s pixels, in megapixel passes.
    public static func pass(_ footprint: ImageFootprint) -> Double { Double(footprint.pixels) / 1_000_000 }

    /// What encoding `footprint` as `format` costs, in megapixel passes: its
    /// pixels times the format's weight (``encodeWeight(_:)``), times
    /// ``maxBytesEncodes`` when the encode searches for a size (`maxBytes`).
    public static func encode(_ footprint: ImageFootprint, as format: ImageFormat, fittingSize: Bool = false) -> Double {
        pass(footprint) * encodeWeight(format) * (fittingSize ? Double(maxBytesEncodes) : 1)
    }

    /// An encoder's CPU per megapixel against one pass of blur (about 10 ms of a
    /// core on this machine's libvips), at the defaults: from docs/performance.md's
    /// encoder tables (libjpeg-turbo about 5 ms a megapixel; WebP at effort 2 and
    /// AVIF at effort 0 near four times that, JPEG XL at effort 5 over seven),
    /// rounded up. An animation pays it per frame.
    public static func encodeWeight(_ format: ImageFormat) -> Double {
        switch format {
        case .jpeg: 0.5
        case .png: 1
        case .gif: 1.5
        case .webp: 2
        case .avif, .heif: 2.5
        case .jxl: 4
        default: 1
        }
    }

    /// The most encodes a `maxBytes` search makes: the top quality, then a
    /// binary search down to the floor (``EncodeOptions/fitting(_:_:)``).
    public static let maxBytesEncodes = 7

    /// The least an animation's frame costs, in megapixel passes, however few
    /// its pixels: a frame's own decode and encode. 4096 frames of one pixel
    /// took 2.3 s of a core as AVIF (0.56 ms a frame, about 0.056 passes) and
    /// 0.6 s as GIF; costed by their pixels alone they were nearly free, so a
    /// burst of them never waited for a heavy place and kept plain thumbnails
    /// waiting for seconds.
    public static let minimumFrameCost = 0.05

    /// What each frame of an image of `frames` frames costs at least:
    /// `perFrame`, and for an animation no less than ``minimumFrameCost``.
    public static func frameCost(_ perFrame: Double, frames: Int) -> Double {
        frames > 1 ? max(perFrame, minimumFrameCost) : perFrame
    }
}

extension WebImageError.Code {
    /// The work a request asks for is more than the service allows one request
    /// (``TransformCost``, `thumbnail.maxCost`).
    public static let costLimitExceeded = WebImageError.Code("costLimitExceeded")
}

/// A bound on the heavy work in flight across loads, in megapixel passes
/// (``TransformCost``): a load whose ``ImageContext/workCost`` is one pass or
/// more waits for room before its decode, transform and encode run, and gives
/// the room back when they end. Each load is weighed again from its header
/// before its decode (every animation; a still image when its box could make
/// it heavy) and once decoded (every frame, and the encode,
/// ``ImageContext/encodeWorkWeight``): one a pass or more
/// heavier waits there for the rest before its transform and encode, keeping
/// its place but no passes, and one found heavy only then takes a place first.
/// Loads wait in arrival order, each cancellable (its
/// deadline, its callers gone); one costing more than the whole limit runs
/// alone. Lighter loads (a plain thumbnail is a small fraction of a pass) never wait.
///
/// Heavy loads also take one of ``maxHeavy`` places, by default one fewer than
/// the cores: the decode pool has a thread per core and runs its jobs in order,
/// so heavy renders holding every thread would keep light ones (a plain
/// thumbnail, milliseconds) waiting behind them for seconds.
///
/// ```swift
/// let work = WorkBudget(limit: 500)
/// var context = ImageContext()
/// context.workBudget = work
/// context.workCost = TransformCost.estimate(transformer, input: footprint)
/// ```
public final class WorkBudget: Sendable {
    /// Megapixel passes that may run at once.
    public let limit: Double
    /// Heavy loads (a pass or more) that may render at once.
    public let maxHeavy: Int
    fileprivate let budget: ByteBudget
    private let places: ByteBudget

    /// Costs are kept in kilopixel passes.
    fileprivate static let unit = 1000.0

    /// The default ``maxHeavy``: one fewer than the cores, at least one.
    public static var defaultMaxHeavy: Int { max(1, ProcessInfo.processInfo.activeProcessorCount - 1) }

    public init(limit: Double, maxHeavy: Int? = nil) {
        self.limit = max(1, limit)
        self.maxHeavy = max(1, maxHeavy ?? Self.defaultMaxHeavy)
        budget = ByteBudget(limit: Int(self.limit * Self.unit))
        places = ByteBudget(limit: self.maxHeavy)
    }

    /// Megapixel passes running now, the most at once so far, and the loads waiting.
    public var usage: (inFlight: Double, peak: Double, waiting: Int) {
        let usage = budget.usage
        return (Double(usage.reserved) / Self.unit, Double(usage.peak) / Self.unit, usage.waiting + places.usage.waiting)
    }

    /// Heavy loads rendering now, and the most at once so far.
    public var heavy: (inFlight: Int, peak: Int) {
        let usage = places.usage
        return (usage.reserved, usage.peak)
    }

    /// One heavy load's room: its passes and its place.
    final class Room: Sendable {
        private let budget: WorkBudget
        private let state: Lock<(cost: Double, passes: ByteBudget.Reservation)>
        private let place: ByteBudget.Reservation

        fileprivate init(budget: WorkBudget, cost: Double, passes: ByteBudget.Reservation, place: ByteBudget.Reservation) {
            self.budget = budget
            self.state = Lock((cost, passes))
            self.place = place
        }

        /// The passes held.
        var cost: Double { state.withLock { $0.cost } }

        /// Room for `cost` passes in all, keeping the place: the passes held are
        /// given back first, so that no load waits for passes while holding some
        /// (places are held only by loads that run or wait for passes, so the
        /// passes come free).
        func grow(to cost: Double) async throws {
            state.withLock { $0.passes.release() }
            let passes = try await budget.budget.reserve(Int(min(cost, 1e12) * WorkBudget.unit))
            state.withLock { $0 = (cost, passes) }
        }

        func release() {
            state.withLock { $0.passes.release() }
            place.release()
        }
    }

    /// Waits for a place and room for `cost`; nil for a cost under one pass,
    /// which never waits.
    func acquire(_ cost: Double) async throws -> Room? {
        guard cost >= 1, cost.isFinite else { return nil }
        // A place first: a load holding passes while it waits for a place would
        // keep them from the loads that have one.
        let place = try await places.reserve(1)
        do {
            let passes = try await budget.reserve(Int(min(cost, 1e12) * Self.unit))
            return Room(budget: self, cost: cost, passes: passes, place: place)
        } catch {
            place.release()
            throw error
        }
    }
}
