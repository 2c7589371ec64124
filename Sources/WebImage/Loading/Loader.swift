public import Foundation

/// Fetches the bytes behind a URL: the plugin point for transports.
///
/// ## Implementation requirements
/// - ``canLoad(_:)`` is cheap and decides from the URL alone.
/// - ``load(_:progress:)`` honours the request's limits: ``LoadRequest/maxResponseSize``
///   (checked against a declared length and while receiving), ``LoadRequest/timeout``,
///   ``LoadRequest/headers`` and the conditional validators.
/// - Cancellation is Swift task cancellation: when the calling task is cancelled
///   the load stops promptly, releases what it holds and throws
///   ``WebImageError/Code/cancelled`` (or `CancellationError`). No progress is
///   reported after that.
/// - A revalidation answered "not modified" returns a response with
///   ``LoadResponse/isNotModified`` set and no body; it is not an error.
/// - Failures throw ``WebImageError`` classified by ``WebImageError/isTransient``:
///   timeouts, connection and DNS failures and 5xx are transient; 404, too large and
///   bad content are permanent. The manager's failed-URL blocklist relies on this.
/// - Blocking I/O runs on threads of the loader's own, never on the cooperative pool.
///
/// `WebImageTesting.LoaderConformance` checks these.
public protocol Loader: Sendable {
    /// Whether this loader handles the URL.
    func canLoad(_ url: URL) -> Bool
    /// Loads the resource, reporting progress as bytes arrive.
    func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse
}

/// Bytes of the body received so far, and the total if the source declared it.
/// A body the loader decodes as it arrives (`Content-Encoding: gzip`) counts its
/// decoded bytes, which the declared total (the encoded length) does not bound.
public struct LoadProgress: Hashable, Sendable {
    public var received: Int64
    public var expected: Int64?
    public init(received: Int64, expected: Int64?) {
        self.received = received
        self.expected = expected
    }
    /// `received / expected`, or nil when the total is unknown.
    public var fraction: Double? {
        guard let expected, expected > 0 else { return nil }
        return min(1, Double(received) / Double(expected))
    }
}
