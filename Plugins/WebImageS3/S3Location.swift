public import Foundation
import WebImage

/// An object in a bucket, as an `s3://BUCKET/KEY` URL names it.
public struct S3Location: Sendable, Hashable, CustomStringConvertible {
    public var bucket: String
    /// The object's key, decoded (`photos/a b.jpg`).
    public var key: String

    /// - Throws: `WebImageError` `.invalidURL` for a bucket name S3 does not
    ///   allow, a key that is empty or over 1024 bytes, or a key with a `.` or
    ///   `..` segment.
    ///
    /// Keys with dot-segments (`a/../b`, `./x`, also when written `%2E%2E`) are
    /// refused rather than sent: HTTP clients and servers resolve them, so
    /// `s3://photos/../secret/x` would reach bucket `secret` in the path-style
    /// form after the allow-list had judged bucket `photos`. The one canonical
    /// form is the key as named, which such a key cannot be sent as. Empty
    /// segments (`a//b`) are sent as they are.
    public init(bucket: String, key: String) throws {
        try Self.validate(bucket: bucket)
        guard !key.isEmpty else { throw WebImageError(.invalidURL, "s3://\(bucket)/ names no object key") }
        guard key.utf8.count <= 1024 else { throw WebImageError(.invalidURL, "s3://\(bucket)/…: the key is \(key.utf8.count) bytes; S3 allows 1024") }
        guard !key.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == "." || $0 == ".." }) else {
            throw WebImageError(.invalidURL, "s3://\(bucket)/\(key): a key with a '.' or '..' segment is refused, since HTTP resolves them and the request would name another object or bucket")
        }
        self.bucket = bucket
        self.key = key
    }

    /// The object an `s3://BUCKET/KEY` URL names; percent escapes in the key are decoded.
    /// - Throws: `WebImageError` `.invalidURL` saying what is wrong with it.
    public init(url: URL) throws {
        guard url.scheme?.lowercased() == "s3" else {
            throw WebImageError(.invalidURL, "\(url.absoluteString) is not an s3:// URL")
        }
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false), let bucket = components.host, !bucket.isEmpty else {
            throw WebImageError(.invalidURL, "\(url.absoluteString) names no bucket (s3://BUCKET/KEY)")
        }
        guard components.query == nil, components.fragment == nil, components.user == nil, components.port == nil else {
            throw WebImageError(.invalidURL, "\(url.absoluteString): an s3:// URL is s3://BUCKET/KEY, with no port, user, query or fragment")
        }
        let path = components.percentEncodedPath
        guard let key = path.hasPrefix("/") ? String(path.dropFirst()).removingPercentEncoding : nil else {
            throw WebImageError(.invalidURL, "\(url.absoluteString) has a key that is not valid percent-encoded UTF-8")
        }
        try self.init(bucket: bucket, key: key)
    }

    /// Bucket names as S3 and its compatibles allow them: 3 to 63 characters of
    /// lower-case letters, digits, dots, dashes (and underscores, which Google
    /// Cloud Storage allows), beginning and ending with a letter or digit.
    public static func validate(bucket: String) throws {
        guard BucketName.isValid(bucket) else {
            throw WebImageError(.invalidURL, "'\(bucket)' is not a bucket name: \(BucketName.rule)")
        }
    }

    /// `s3://BUCKET/KEY`, the key percent-encoded.
    public var url: URL { URL(string: "s3://\(bucket)/\(S3Request.encodePath(key))")! }
    public var description: String { "s3://\(bucket)/\(key)" }
}
