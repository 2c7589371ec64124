/// Changes a decoded image: resize, crop, rotate, blur...
///
/// ## Implementation requirements
/// - ``key`` is stable across processes and versions and differs whenever the
///   output would: it becomes part of derived cache keys (`…-t=resize(256x256,fit)`).
/// - ``transform(_:)`` runs on the manager's blocking pool and may block. It
///   applies to every frame of an animated image and throws ``WebImageError`` with
///   code ``WebImageError/Code/stepDoesNotFit`` when its parameters do not fit
///   the image (a crop outside it), checked before any pixel work and named in
///   the parameters' terms, or ``WebImageError/Code/transformFailed`` when it
///   fails on an image it should handle.
/// - It must accept the storage of the coder it is meant for; a transformer that
///   receives storage it does not know throws.
/// - ``footprint(after:)`` says, from the input's footprint alone, how large the
///   output will be, so that the manager refuses a step over
///   ``DecodeOptions/memoryLimit`` before it runs. The default says "the same as
///   the input", right for filters (blur, sharpen, tint); a transformer that
///   changes the size or the bands must implement it. The manager also checks
///   each step's real output, so a wrong answer costs one step, not the chain.
/// - ``cost(for:)`` says what the step costs in megapixel passes
///   (``TransformCost``), so that a service can refuse or queue heavy work before
///   it runs. The default is one pass over the input, right for cheap per-pixel
///   steps; a convolution or a resampling implements it.
public protocol ImageTransformer: Sendable {
    var key: String { get }
    func transform(_ image: Image) throws -> Image
    /// The footprint of the output for an input of this footprint.
    func footprint(after input: ImageFootprint) -> ImageFootprint
    /// What this step costs on an input of this footprint, in megapixel passes.
    func cost(for input: ImageFootprint) -> Double
}

extension ImageTransformer {
    public func footprint(after input: ImageFootprint) -> ImageFootprint { input }

    public func cost(for input: ImageFootprint) -> Double { TransformCost.pass(input) }

    /// The steps this transformer runs: its transformers for a
    /// ``ImageTransformers/Pipeline`` (flattened), else itself.
    public var steps: [any ImageTransformer] {
        if let pipeline = self as? ImageTransformers.Pipeline { return pipeline.transformers.flatMap(\.steps) }
        return [self]
    }
}

/// The bound a load puts on a transform chain: each step's output is predicted
/// from its input and checked before the step runs, then checked again as made;
/// between steps, a cancelled load stops.
public struct TransformBudget: Sendable {
    public var pixelLimit: Int
    public var memoryLimit: Int
    /// The most the whole chain may cost from the decoded image, in megapixel
    /// passes (``TransformCost``); nil for no limit. Checked before the first step.
    public var maxCost: Double?
    /// Asked between steps; true stops the chain with ``WebImageError/Code/cancelled``.
    public var isCancelled: @Sendable () -> Bool

    public init(pixelLimit: Int, memoryLimit: Int, isCancelled: @escaping @Sendable () -> Bool = { false }) {
        self.pixelLimit = pixelLimit
        self.memoryLimit = memoryLimit
        self.isCancelled = isCancelled
    }

    /// Runs `transformer`'s steps on `image` within the budget.
    /// - Throws: ``WebImageError/Code/pixelLimitExceeded`` naming the step and the
    ///   sizes, before the step runs; `cancelled` between steps; a step's own error.
    public func apply(_ transformer: any ImageTransformer, to image: Image) throws -> Image {
        if let maxCost {
            let cost = TransformCost.estimate(transformer, input: ImageFootprint(image))
            guard cost <= maxCost else {
                throw WebImageError(.costLimitExceeded, "\(transformer.key) on \(image.pixelSize)\(image.frameCount > 1 ? " x \(image.frameCount) frames" : "") costs \(Int(cost.rounded(.up))) megapixel passes, more than the \(Int(maxCost)) allowed")
            }
        }
        var current = image
        for step in transformer.steps {
            if isCancelled() { throw WebImageError(.cancelled, "the load was cancelled before \(step.key)") }
            let input = ImageFootprint(current)
            try step.footprint(after: input).check(pixelLimit: pixelLimit, memoryLimit: memoryLimit, step: "\(step.key) of \(input.size)")
            current = try step.transform(current)
            try ImageFootprint(current).check(pixelLimit: pixelLimit, memoryLimit: memoryLimit, step: "\(step.key) of \(input.size)")
        }
        return current
    }
}

/// The family of transformers. The core holds the composition; coders such as
/// `WebImageVips` add the pixel operations as extensions.
public enum ImageTransformers {
    /// Applies transformers in order; its key joins theirs.
    public struct Pipeline: ImageTransformer {
        public var transformers: [any ImageTransformer]
        public init(_ transformers: [any ImageTransformer]) { self.transformers = transformers }
        public var key: String { transformers.map(\.key).joined(separator: "|") }
        public func transform(_ image: Image) throws -> Image {
            try transformers.reduce(image) { try $1.transform($0) }
        }
        public func footprint(after input: ImageFootprint) -> ImageFootprint {
            transformers.reduce(input) { $1.footprint(after: $0) }
        }
        public func cost(for input: ImageFootprint) -> Double { TransformCost.estimate(self, input: input) }
    }
}

extension ImageTransformer where Self == ImageTransformers.Pipeline {
    /// `.pipeline([.resize(...), .blur(...)])`
    public static func pipeline(_ transformers: [any ImageTransformer]) -> Self { .init(transformers) }
}
