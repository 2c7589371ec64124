public import Foundation

/// Where the hosts of a fleet share their failed-URL blocklists, so that a URL
/// that failed permanently on one host (a 404, bytes no coder reads, a body over
/// the size limit) is refused by every host for the rest of its TTL instead of
/// being downloaded once per host.
///
/// `RedisCacheStore` (WebImageRedis) is one: give the same store to the
/// ``TieredCacheStore`` and to the blocklist, or set `blocklist.shared = true`
/// with `store.shared.kind = redis` in configuration.
///
/// ```swift
/// let shared = try RedisCacheStore(configuration: .init(urls: ["redis://cache.internal:6379"]))
/// configuration.store = TieredCacheStore(local: local, shared: shared)
/// configuration.blocklist = FailedURLBlocklist(shared: shared)
/// ```
///
/// The blocklist asks the shared store only when a load is about to go to its
/// loader (a miss in every cache tier), writes to it in the background (bounded),
/// and treats its failures as "not blocked": a shared store that is down costs a
/// fleet its shared memory of failures, never a load. Whoever made the store
/// closes it (the manager closes its own ``ImageManager/Configuration/store``).
public protocol SharedFailureStore: Sendable {
    /// The failure recorded for `url` and how much longer it stands, or nil when
    /// none stands.
    func failure(forURL url: String) async throws -> (record: FailureRecord, remaining: Duration)?
    /// Records `record` for `url` for `ttl`, replacing an earlier record.
    func recordFailure(_ record: FailureRecord, forURL url: String, ttl: Duration) async throws
    /// Forgets the failure of `url`.
    func removeFailure(forURL url: String) async throws
    /// Forgets every failure.
    func removeAllFailures() async throws
}

/// What a shared blocklist keeps of a failure: its code, message and HTTP
/// status, in a small text form any backend can store (``encoded()``).
public struct FailureRecord: Sendable, Hashable {
    public var code: WebImageError.Code
    public var message: String
    public var statusCode: Int?

    /// Longest message kept, in UTF-8 bytes; a longer one is cut at a character boundary.
    public static let maxMessageBytes = 1024

    public init(code: WebImageError.Code, message: String, statusCode: Int? = nil) {
        self.code = code
        self.message = message
        self.statusCode = statusCode
    }

    /// The parts of `error` that mean something on another host.
    public init(_ error: WebImageError) {
        self.init(code: error.code, message: error.message, statusCode: error.statusCode)
    }

    /// The failure as an error (permanent, as every recorded failure is).
    public var error: WebImageError {
        WebImageError(code, message, isTransient: false, statusCode: statusCode)
    }

    /// `wif1`, the status (or `-`), the code and the message, separated by tabs.
    public func encoded() -> Data {
        var end = message.startIndex, bytes = 0
        for character in message {
            bytes += character.utf8.count
            guard bytes <= Self.maxMessageBytes else { break }
            end = message.index(after: end)
        }
        let message = message[..<end]
        let status = statusCode.map(String.init) ?? "-"
        return Data("wif1\t\(status)\t\(code.rawValue)\t\(message)".utf8)
    }

    /// Reads ``encoded()``'s form; nil for anything else (another program's value,
    /// a truncated one, a code with characters no code has).
    public init?(encoded data: Data) {
        guard data.count <= Self.maxMessageBytes + 128, let text = String(data: data, encoding: .utf8) else { return nil }
        let parts = text.split(separator: "\t", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "wif1" else { return nil }
        var status: Int?
        if parts[1] != "-" {
            guard let value = Int(parts[1]), (100...999).contains(value) else { return nil }
            status = value
        }
        let code = parts[2]
        guard (1...64).contains(code.utf8.count),
              code.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
                  || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0 | 0x20) })
        else { return nil }
        self.init(code: WebImageError.Code(String(code)), message: String(parts[3]), statusCode: status)
    }
}
