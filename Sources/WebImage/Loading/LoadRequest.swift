public import Foundation

/// What the manager asks a loader for.
public struct LoadRequest: Sendable {
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
