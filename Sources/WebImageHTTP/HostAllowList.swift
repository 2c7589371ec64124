public import Foundation
import WebImage

/// The hosts the service fetches from: `images.example.com` (any port),
/// `images.example.com:8443` (that port only), `*.example.com` (any subdomain,
/// not the domain itself), or `*` (any host); and the buckets it loads `s3://`
/// URLs from: `s3://photos` (that bucket), or `s3://*` (any bucket the
/// credentials reach). Host entries never match an `s3://` URL, nor bucket
/// entries an http one. Empty refuses everything.
///
/// The list is checked against the URL a client asks for, before any network
/// access. It complements the loader's SSRF guard, which checks the address each
/// connection (and each redirect) actually goes to.
public struct HostAllowList: Sendable, Hashable, CustomStringConvertible {
    enum Entry: Hashable {
        case any
        case suffix(String)
        case host(String, port: Int?)
        case bucket(String)
        case anyBucket
    }

    let entries: [Entry]
    /// The entries as written.
    public let patterns: [String]

    /// Parses `patterns`; nil (naming nothing) if one is malformed.
    public init?(_ patterns: [String]) {
        var entries: [Entry] = []
        for raw in patterns {
            let pattern = raw.trimmingCharacters(in: .whitespaces).lowercased()
            if pattern == "*" { entries.append(.any); continue }
            if pattern.hasPrefix("s3://") {
                let bucket = String(pattern.dropFirst(5))
                if bucket == "*" { entries.append(.anyBucket); continue }
                guard BucketName.isValid(bucket) else { return nil }
                entries.append(.bucket(bucket))
                continue
            }
            if pattern.hasPrefix("*.") {
                let suffix = String(pattern.dropFirst(1))
                guard suffix.count > 1, !suffix.contains(":"), !suffix.contains("*") else { return nil }
                entries.append(.suffix(suffix))
                continue
            }
            guard !pattern.isEmpty, !pattern.contains("*"), !pattern.contains("/") else { return nil }
            // host, host:port, [v6], [v6]:port
            if pattern.hasPrefix("[") {
                guard let close = pattern.firstIndex(of: "]") else { return nil }
                let host = String(pattern[...close])
                let rest = pattern[pattern.index(after: close)...]
                if rest.isEmpty { entries.append(.host(host, port: nil)); continue }
                guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (1...65_535).contains(port) else { return nil }
                entries.append(.host(host, port: port))
            } else if let colon = pattern.lastIndex(of: ":") {
                guard let port = Int(pattern[pattern.index(after: colon)...]), (1...65_535).contains(port), colon != pattern.startIndex else { return nil }
                entries.append(.host(String(pattern[..<colon]), port: port))
            } else {
                entries.append(.host(pattern, port: nil))
            }
        }
        self.entries = entries
        self.patterns = patterns
    }

    /// Whether the list names any bucket (so that `s3://` URLs may be asked for).
    public var namesBuckets: Bool {
        entries.contains { if case .bucket = $0 { true } else if case .anyBucket = $0 { true } else { false } }
    }

    /// Whether `url`'s host (and port) is on the list; for an `s3://` URL, its bucket.
    public func allows(_ url: URL) -> Bool {
        guard var host = url.host?.lowercased(), !host.isEmpty else { return false }
        let scheme = url.scheme?.lowercased()
        if scheme == "s3" {
            return entries.contains { entry in
                switch entry {
                case .anyBucket: true
                case .bucket(let name): name == host
                default: false
                }
            }
        }
        // Foundation strips an IPv6 literal's brackets. (Bytes, not Foundation's
        // `contains`, which was a tenth of a warm request.)
        if host.utf8.contains(UInt8(ascii: ":")), !host.hasPrefix("[") { host = "[\(host)]" }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return entries.contains { entry in
            switch entry {
            case .any: true
            case .suffix(let suffix): host.utf8.count > suffix.utf8.count && host.hasSuffix(suffix)
            case .host(let name, let only): name == host && (only == nil || only == port)
            case .bucket, .anyBucket: false
            }
        }
    }

    public var description: String { patterns.isEmpty ? "(empty)" : patterns.joined(separator: ", ") }
}
