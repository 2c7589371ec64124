public import Foundation
public import HTTPTypes
import WebImage

/// The conditional headers of a `GET` or `HEAD` (RFC 9110, section 13): whether
/// the client's copy is current, so that the answer is `304 Not Modified`
/// without a body.
public enum ConditionalRequest {
    /// Whether `If-None-Match` names `entityTag`: a list of tags, weak (`W/"…"`) or
    /// strong, with any spacing, or `*`. The comparison is the weak one the RFC
    /// gives for `If-None-Match`: `W/"x"` matches `"x"`.
    public static func ifNoneMatch(_ header: String, matches entityTag: String) -> Bool {
        let wanted = opaque(entityTag)
        var rest = Substring(header)
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "," }
            guard !rest.isEmpty else { return false }
            if rest.first == "*" { return true }
            if rest.hasPrefix("W/") { rest = rest.dropFirst(2) }
            guard rest.first == "\"", let close = rest.dropFirst().firstIndex(of: "\"") else {
                // Not a quoted tag: skip to the next comma.
                guard let comma = rest.firstIndex(of: ",") else { return false }
                rest = rest[comma...]
                continue
            }
            if rest[rest.startIndex...close] == wanted { return true }
            rest = rest[rest.index(after: close)...]
        }
    }

    /// What the conditions of a `GET` or `HEAD` say about its answer.
    public enum Outcome: Sendable, Equatable {
        /// Answer in full.
        case proceed
        /// `304 Not Modified`: the client's copy is current.
        case notModified
        /// `412 Precondition Failed`: the client asked for a representation this is not.
        case preconditionFailed
    }

    /// The conditions of a `GET` or `HEAD` in the order RFC 9110 §13.2.2 gives:
    /// `If-Match` (a list of strong tags, or `*`), else `If-Unmodified-Since`,
    /// deciding ``Outcome/preconditionFailed``; then ``isNotModified(_:entityTag:lastModified:)``.
    ///
    /// ```swift
    /// switch ConditionalRequest.evaluate(request.headerFields, entityTag: "\"v1\"", lastModified: nil) {
    /// case .proceed: print("200 with the body")
    /// case .notModified: print("304")
    /// case .preconditionFailed: print("412")
    /// }
    /// ```
    public static func evaluate(_ fields: HTTPFields, entityTag: String?, lastModified: Date?) -> Outcome {
        if let header = fields.value(.ifMatch) {
            // `*`: any current representation; a list needs the tag.
            guard ifMatch(header, matches: entityTag ?? "") else { return .preconditionFailed }
        } else if let header = fields.value(.ifUnmodifiedSince), let lastModified, let since = HTTPDate.parse(header),
                  lastModified.timeIntervalSince1970.rounded(.down) > since.timeIntervalSince1970 {
            return .preconditionFailed
        }
        return isNotModified(fields, entityTag: entityTag, lastModified: lastModified) ? .notModified : .proceed
    }

    /// Whether `If-Match` names `entityTag`, by the strong comparison the RFC gives
    /// for it: a weak tag on either side never matches; `*` matches any.
    public static func ifMatch(_ header: String, matches entityTag: String) -> Bool {
        guard !entityTag.hasPrefix("W/") else { return header.trimmingCharacters(in: .whitespaces) == "*" }
        var rest = Substring(header)
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "," }
            guard !rest.isEmpty else { return false }
            if rest.first == "*" { return true }
            let weak = rest.hasPrefix("W/")
            if weak { rest = rest.dropFirst(2) }
            guard rest.first == "\"", let close = rest.dropFirst().firstIndex(of: "\"") else {
                guard let comma = rest.firstIndex(of: ",") else { return false }
                rest = rest[comma...]
                continue
            }
            if !weak, rest[rest.startIndex...close] == entityTag { return true }
            rest = rest[rest.index(after: close)...]
        }
    }

    /// Whether the client's copy is current: `If-None-Match` against
    /// `entityTag` when the request has one (it then decides alone, as the RFC
    /// says), else `If-Modified-Since` against `lastModified` (whole seconds).
    public static func isNotModified(_ fields: HTTPFields, entityTag: String?, lastModified: Date?) -> Bool {
        if let header = fields.value(.ifNoneMatch) {
            guard let entityTag else { return false }
            return ifNoneMatch(header, matches: entityTag)
        }
        guard let header = fields.value(.ifModifiedSince), let lastModified, let since = HTTPDate.parse(header) else { return false }
        return lastModified.timeIntervalSince1970.rounded(.down) <= since.timeIntervalSince1970
    }

    private static func opaque(_ tag: String) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : Substring(tag)
    }
}

extension HTTPFields {
    /// A field's value, the values of a name sent more than once joined with `, `
    /// (RFC 9110, 5.3), as the subscript gives it, but without building that list
    /// for a name sent once or not at all (the subscript joins even one value, and
    /// a warm request asks for five names).
    func value(_ name: HTTPField.Name) -> String? {
        guard let first = firstIndex(where: { $0.name == name }) else { return nil }
        guard self[index(after: first)...].contains(where: { $0.name == name }) else { return self[first].value }
        return self[name]
    }
}
