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
}

extension WebImageError.Code {
    /// The work a request asks for is more than the service allows one request
    /// (``TransformCost``, `thumbnail.maxCost`).
    public static let costLimitExceeded = WebImageError.Code("costLimitExceeded")
}

/// A bound on the heavy work in flight across loads, in megapixel passes
/// (``TransformCost``): a load whose ``ImageContext/workCost`` is one pass or
/// more waits for room before its decode, transform and encode run, and gives
/// the room back when they end. Loads wait in arrival order, each cancellable
/// (its deadline, its callers gone); one costing more than the whole limit runs
/// alone. Lighter loads (a plain thumbnail is a small fraction of a pass) never wait.
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
    private let budget: ByteBudget

    /// Costs are kept in kilopixel passes.
    private static let unit = 1000.0

    public init(limit: Double) {
        self.limit = max(1, limit)
        budget = ByteBudget(limit: Int(self.limit * Self.unit))
    }

    /// Megapixel passes running now, the most at once so far, and the loads waiting.
    public var usage: (inFlight: Double, peak: Double, waiting: Int) {
        let usage = budget.usage
        return (Double(usage.reserved) / Self.unit, Double(usage.peak) / Self.unit, usage.waiting)
    }

    /// Waits for room for `cost`; nil for a cost under one pass, which never waits.
    func acquire(_ cost: Double) async throws -> ByteBudget.Reservation? {
        guard cost >= 1, cost.isFinite else { return nil }
        return try await budget.reserve(Int(min(cost, 1e12) * Self.unit))
    }
}
