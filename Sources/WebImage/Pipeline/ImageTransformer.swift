/// Changes a decoded image: resize, crop, rotate, blur...
///
/// ## Implementation requirements
/// - ``key`` is stable across processes and versions and differs whenever the
///   output would: it becomes part of derived cache keys (`…-t=resize(256x256,fit)`).
/// - ``transform(_:)`` runs on the manager's blocking pool and may block. It
///   applies to every frame of an animated image and throws ``WebImageError`` with
///   code ``WebImageError/Code/transformFailed`` when it cannot.
/// - It must accept the storage of the coder it is meant for; a transformer that
///   receives storage it does not know throws.
public protocol ImageTransformer: Sendable {
    var key: String { get }
    func transform(_ image: Image) throws -> Image
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
    }
}

extension ImageTransformer where Self == ImageTransformers.Pipeline {
    /// `.pipeline([.resize(...), .blur(...)])`
    public static func pipeline(_ transformers: [any ImageTransformer]) -> Self { .init(transformers) }
}
