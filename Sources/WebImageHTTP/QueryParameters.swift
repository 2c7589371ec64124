/// A query string's parameters, percent-decoded, in order.
///
/// `+` is kept as a plus sign (it is a space only in HTML form encoding, and a
/// `url=` value may hold a literal one); a parameter named twice answers its
/// first value. A malformed escape (`%zz`) leaves the value as written.
public struct QueryParameters: Sendable, Hashable {
    public private(set) var pairs: [(name: String, value: String)]

    /// Parses `query`, the part after `?` (without it).
    public init(_ query: some StringProtocol) {
        pairs = query.split(separator: "&", omittingEmptySubsequences: true).map { part in
            if let equals = part.firstIndex(of: "=") {
                return (Self.decode(part[..<equals]), Self.decode(part[part.index(after: equals)...]))
            }
            return (Self.decode(part), "")
        }
    }

    init(pairs: [(name: String, value: String)]) { self.pairs = pairs }

    /// The first value of `name`, or nil.
    public subscript(_ name: String) -> String? {
        pairs.first { $0.name == name }?.value
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

    static func decode(_ text: some StringProtocol) -> String {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "%"), iterator.count >= 2,
               let high = hex(iterator[iterator.startIndex]), let low = hex(iterator[iterator.startIndex + 1]) {
                bytes.append(high << 4 | low)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
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
