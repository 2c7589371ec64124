/// A number as the package's grammars write one: an optional `-`, digits, and at
/// most one `.` with digits on at least one side (`2`, `-0.5`, `.25`, `1.`), at
/// most 32 characters. `Double(_:)` also takes hexadecimal (`0x10`, `0x1p1`),
/// exponents, `inf`, `nan` and a leading `+`, other spellings of a value that a
/// URL or a spec should not have (a stranger found `t=blur:0x10` read as 16).
package func plainDecimal<S: StringProtocol>(_ text: S) -> Double? {
    let bytes = Array(text.utf8)
    let body = bytes.first == UInt8(ascii: "-") ? bytes.dropFirst() : bytes[...]
    guard bytes.count <= 32, body.contains(where: { (48...57).contains($0) }),
          body.allSatisfy({ (48...57).contains($0) || $0 == UInt8(ascii: ".") }),
          body.filter({ $0 == UInt8(ascii: ".") }).count <= 1 else { return nil }
    return Double(String(decoding: bytes, as: UTF8.self))
}
