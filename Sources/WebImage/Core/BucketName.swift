/// The package's one rule for a bucket's name, shared by the S3 plugin (which
/// refuses a bad name in a URL or a store's configuration) and the HTTP
/// endpoint's allow-list (`s3://BUCKET` entries): 3 to 63 characters of
/// lower-case letters, digits, dots, dashes (and underscores, which Google Cloud
/// Storage allows), beginning and ending with a letter or digit, as S3 and its
/// compatibles allow them.
package enum BucketName {
    /// The rule in words, for an error's message.
    package static let rule = "3 to 63 lower-case letters, digits, dots, dashes and underscores, beginning and ending with a letter or digit"

    package static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        func isAlphanumeric(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) }
        guard (3...63).contains(bytes.count), let first = bytes.first, let last = bytes.last else { return false }
        return isAlphanumeric(first) && isAlphanumeric(last)
            && bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }
}
