import WebImage

/// A query string's parameters, percent-decoded, in order.
///
/// `+` is kept as a plus sign (it is a space only in HTML form encoding, and a
/// `url=` value may hold a literal one); a parameter named twice answers its
/// first value. A malformed escape (`%zz`) leaves the value as written. The query
/// is read as bytes, as RFC 3986 defines it: `&` and `=` separate wherever they
/// are, even before a combining mark that would make one `Character` of them.
public struct QueryParameters: Sendable, Hashable {
    public private(set) var pairs: [(name: String, value: String)]

    /// Parses `query`, the part after `?` (without it).
    public init(_ query: some StringProtocol) {
        // Bytes, not Characters: splitting and decoding by grapheme was most of a
        // warm request's own time.
        let bytes = Array(query.utf8)
        var pairs: [(name: String, value: String)] = []
        var start = 0
        while start < bytes.count {
            var end = start
            var equals: Int?
            while end < bytes.count, bytes[end] != UInt8(ascii: "&") {
                if equals == nil, bytes[end] == UInt8(ascii: "=") { equals = end }
                end += 1
            }
            if end > start {
                if let equals {
                    pairs.append((Self.decode(bytes[start..<equals]), Self.decode(bytes[(equals + 1)..<end])))
                } else {
                    pairs.append((Self.decode(bytes[start..<end]), ""))
                }
            }
            start = end + 1
        }
        self.pairs = pairs
    }

    init(pairs: [(name: String, value: String)]) { self.pairs = pairs }

    /// The first value of `name`, or nil.
    public subscript(_ name: String) -> String? {
        pairs.first { $0.name == name }?.value
    }

    /// Throws `invalidArgument` naming the first parameter not in `known`, and
    /// listing those that are: an endpoint refuses what it does not read, so
    /// that a misspelt parameter is not answered as if it were absent.
    public func requireKnown(_ known: Set<String>) throws {
        if let unknown = names.first(where: { !known.contains($0) }) {
            // Named as far as a reader needs: a name of 80 KB is not echoed whole into the answer and the log.
            let shown = unknown.unicodeScalars.count > 64 ? String(String.UnicodeScalarView(unknown.unicodeScalars.prefix(64))) + "…" : unknown
            throw WebImageError(.invalidArgument, "the parameter '\(shown)' is not one this endpoint reads (\(known.sorted().joined(separator: ", ")))")
        }
    }

    /// The names present, in order (a repeated name once).
    public var names: [String] {
        var seen = Set<String>()
        return pairs.compactMap { seen.insert($0.name).inserted ? $0.name : nil }
    }

    /// These parameters with `other`'s added where these lack the name: a
    /// request's own values over a preset's.
    public func filling(from other: QueryParameters) -> QueryParameters {
        let present = Set(pairs.map(\.name))
        return QueryParameters(pairs: pairs + other.pairs.filter { !present.contains($0.name) })
    }

    public static func == (a: QueryParameters, b: QueryParameters) -> Bool {
        a.pairs.count == b.pairs.count && zip(a.pairs, b.pairs).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for pair in pairs { hasher.combine(pair.name); hasher.combine(pair.value) }
    }

    /// `text` percent-decoded; bytes that are no UTF-8 become U+FFFD.
    static func decode(_ text: ArraySlice<UInt8>) -> String {
        guard text.contains(UInt8(ascii: "%")) else { return String(decoding: text, as: UTF8.self) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count)
        var index = text.startIndex
        while index < text.endIndex {
            let byte = text[index]
            if byte == UInt8(ascii: "%"), text.endIndex - index >= 3,
               let high = hex(text[index + 1]), let low = hex(text[index + 2]) {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(byte)
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
