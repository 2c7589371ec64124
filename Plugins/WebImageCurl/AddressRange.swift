#if canImport(Glibc)
import Glibc
#endif

extension CurlLoader {
    /// An IPv4 or IPv6 address range in CIDR notation (`10.20.0.0/16`, `fd00::/8`),
    /// or a single address (`127.0.0.1`). Used to exempt ranges from the SSRF guard
    /// (``CurlLoader/Configuration/exemptAddresses``).
    public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
        /// `AF_INET` or `AF_INET6`.
        let family: Int32
        let prefix: Int
        /// 4 or 16 bytes, network order.
        let bytes: [UInt8]

        /// Parses `address` or `address/prefix`; nil when either part is malformed.
        public init?(_ text: String) {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), !parts[0].isEmpty else { return nil }
            var buffer = [UInt8](repeating: 0, count: 16)
            let address = String(parts[0])
            if inet_pton(AF_INET, address, &buffer) == 1 {
                family = AF_INET
                bytes = Array(buffer.prefix(4))
            } else if inet_pton(AF_INET6, address, &buffer) == 1 {
                family = AF_INET6
                bytes = buffer
            } else {
                return nil
            }
            let maximum = bytes.count * 8
            if parts.count == 2 {
                guard let bits = Int(parts[1]), (0...maximum).contains(bits) else { return nil }
                prefix = bits
            } else {
                prefix = maximum
            }
        }

        public var description: String { "\(AddressPolicy.text(of: bytes))/\(prefix)" }
    }
}
