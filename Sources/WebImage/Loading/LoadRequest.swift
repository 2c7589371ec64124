public import Foundation

/// A caller's judgement of a URL a load reaches: nil lets it through, a reason
/// refuses it (for example "is not on the allow-list"). See ``LoadRequest/urlPolicy``.
public typealias URLPolicy = @Sendable (URL) -> String?

/// What the manager asks a loader for.
public struct LoadRequest: Sendable {
    /// The default longest time for a whole load, in the manager and in every
    /// built-in loader: 15 s (SDWebImage's and Kingfisher's).
    public static let defaultTimeout: Duration = .seconds(15)
    /// The default largest response or file accepted: 64 MiB. A server must bound
    /// it (Nuke does); an image service rarely sees originals above a few MiB.
    public static let defaultMaxResponseSize: Int64 = 64 << 20

    /// Scheduling priority among queued loads.
    public enum Priority: Int, Sendable, Comparable {
        case low = 0, normal = 1, high = 2
        public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
    }

    public var url: URL
    /// Extra request headers (for example `Authorization`); names are case-insensitive.
    public var headers: [String: String]
    public var priority: Priority
    /// The longest the whole load may take; nil uses the loader's default.
    public var timeout: Duration?
    /// The most bytes accepted; nil uses the loader's default.
    public var maxResponseSize: Int64?
    /// Revalidate: send `If-None-Match` with this ETag.
    public var ifNoneMatch: String?
    /// Revalidate: send `If-Modified-Since` with this date string (as the server sent it).
    public var ifModifiedSince: String?
    /// Asked about every URL the load reaches, the first and every redirect hop,
    /// before it is requested: a service's host allow-list, which must hold for
    /// where a redirect leads as much as for the URL a client named. A loader
    /// that follows redirects must ask it at each hop and fail with
    /// ``WebImageError/Code/forbidden``, naming the hop, when it refuses one.
    public var urlPolicy: URLPolicy?
    /// Asked by a loader that queues transfers while this one waits and just
    /// before it starts: an error fails it at once, unstarted. The manager sets it
    /// from its ``OriginCircuitBreaker``, so that transfers queued for an origin
    /// whose circuit opens fail then with ``WebImageError/Code/originUnavailable``
    /// instead of starting against it. It must be cheap (a lock and a lookup).
    public var stillAdmitted: (@Sendable () -> WebImageError?)?
    /// Refuse private, loopback and link-local addresses for this request, as a
    /// loader with its SSRF guard on does for every request (the curl loader's
    /// `blockPrivateAddresses`, with its exempt ranges). A service sets it for
    /// URLs its users choose, whatever the loader's own setting.
    public var refusesPrivateAddresses = false

    public init(
        url: URL,
        headers: [String: String] = [:],
        priority: Priority = .normal,
        timeout: Duration? = nil,
        maxResponseSize: Int64? = nil,
        ifNoneMatch: String? = nil,
        ifModifiedSince: String? = nil
    ) {
        self.url = url
        self.headers = headers
        self.priority = priority
        self.timeout = timeout
        self.maxResponseSize = maxResponseSize
        self.ifNoneMatch = ifNoneMatch
        self.ifModifiedSince = ifModifiedSince
    }

    /// Whether the request carries validators (it is a revalidation).
    public var isConditional: Bool { ifNoneMatch != nil || ifModifiedSince != nil }
}
