@_spi(WebImageInternal) import WebImage

/// Parsed `thumbnail` queries by their raw text and the client hints they read,
/// so that a warm request skips parsing (percent-decoding, the source URL, the
/// steps, the sizing were a fifth of its own time).
///
/// Only queries that parsed are kept: a parse depends on nothing but the text, the
/// hints and the endpoint's settings, so a kept one is what parsing again would
/// give. Bounded: at ``capacity`` entries it starts over, and a query longer than
/// ``maxQueryBytes`` is parsed every time and never kept, so a flood of distinct
/// valid queries holds at most a few MiB (80 KB request lines, which the HTTP
/// layer admits, would otherwise have held 160 MB) and costs a parse each, as it
/// would without the cache.
final class ThumbnailQueryCache: Sendable {
    struct Key: Hashable, Sendable {
        let query: String
        /// nil when the endpoint reads no hints.
        let hints: ThumbnailQuery.ClientHints?
    }

    static let capacity = 2048
    /// The longest query kept: thumbnail queries are a few hundred bytes, a signed
    /// bucket URL a couple of KiB.
    static let maxQueryBytes = 4096
    private let entries = Lock<[Key: ThumbnailQuery]>([:])

    /// The parsed query under `key`, else `parse()`'s, kept if it succeeds.
    func query(_ key: Key, parse: () throws -> ThumbnailQuery) rethrows -> ThumbnailQuery {
        guard key.query.utf8.count <= Self.maxQueryBytes else { return try parse() }
        if let kept = entries.withLock({ $0[key] }) { return kept }
        let parsed = try parse()
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = parsed
        }
        return parsed
    }

    /// The queries kept now.
    var count: Int { entries.withLock { $0.count } }
}
