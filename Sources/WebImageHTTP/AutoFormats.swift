@_spi(WebImageInternal) import WebImage

/// `thumbnail.formats` that a coder registry writes, found on first use and kept.
final class AutoFormats: Sendable {
    private let candidates: [ImageFormat]
    private let coders: CoderRegistry
    private let found = Lock<Set<ImageFormat>?>(nil)

    init(_ candidates: [ImageFormat], coders: CoderRegistry) {
        self.candidates = candidates
        self.coders = coders
    }

    var value: Set<ImageFormat> {
        if let known = found.withLock({ $0 }) { return known }
        // Outside the lock: a coder's answer may start a library. Two first
        // requests at once both ask, and get the same answer.
        let formats = Set(candidates.filter { coders.encoder(for: $0) != nil })
        found.withLock { $0 = formats }
        return formats
    }
}
