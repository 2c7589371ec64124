public import Foundation

/// What a loader returns.
public struct LoadResponse: Sendable {
    /// The body; empty for a "not modified" answer.
    public var data: Data
    /// The HTTP status, or 200 for sources without one (files).
    public var statusCode: Int
    /// Response headers with lower-cased names.
    public var headers: [String: String]
    /// The URL the bytes finally came from, after redirects.
    public var url: URL

    public init(data: Data, statusCode: Int = 200, headers: [String: String] = [:], url: URL) {
        self.data = data
        self.statusCode = statusCode
        // Loaders usually pass lower-cased names already; only rebuild when they did not.
        if headers.keys.allSatisfy({ !$0.utf8.contains { $0 >= 0x41 && $0 <= 0x5A } }) {
            self.headers = headers
        } else {
            self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        }
        self.url = url
    }

    /// A revalidation answered "not modified" (HTTP 304).
    public var isNotModified: Bool { statusCode == 304 }
    public var contentType: String? { headers["content-type"] }
    public var etag: String? { headers["etag"] }
    public var lastModified: String? { headers["last-modified"] }
}
