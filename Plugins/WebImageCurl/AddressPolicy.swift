#if canImport(Glibc)
import Glibc
#endif
import WebImage

/// Which addresses a server may be made to connect to: the rules of the SSRF
/// guard (``CurlLoader/Configuration/blockPrivateAddresses``).
///
/// An address is refused when it lies in one of ``specialPurposeRanges`` (the IANA
/// IPv4 and IPv6 special-purpose registries' entries that are not globally
/// reachable, plus multicast and the transition prefixes that can embed an
/// internal IPv4 address), unless one of the policy's exempt ranges contains it.
/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is judged as its IPv4 address.
///
/// The check runs in curl's open-socket callback, after DNS resolution and before
/// `connect`, so a public name that resolves inside is caught, and so is every
/// redirect hop.
public struct AddressPolicy: Sendable, Hashable {
    /// Ranges let through although they are special-purpose (an origin on a private
    /// network the deployment means to reach).
    public var exempt: [CurlLoader.AddressRange]

    public init(exempt: [CurlLoader.AddressRange] = []) {
        self.exempt = exempt
    }

    /// The ranges refused by default, each with the registry's reason.
    public static let specialPurposeRanges: [(range: CurlLoader.AddressRange, name: String)] = [
        // IPv4 (RFC 6890 and the IANA IPv4 special-purpose address registry).
        ("0.0.0.0/8", "this network"),
        ("10.0.0.0/8", "private use"),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local (cloud metadata)"),
        ("172.16.0.0/12", "private use"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("192.88.99.0/24", "6to4 relay anycast (deprecated)"),
        ("192.168.0.0/16", "private use"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("255.255.255.255/32", "limited broadcast"),
        // IPv6 (RFC 6890 and the IANA IPv6 special-purpose address registry).
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible (deprecated)"),
        ("64:ff9b::/96", "IPv4/IPv6 translation (can embed an internal IPv4 address)"),
        ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation"),
        ("100::/64", "discard-only"),
        ("100:0:0:1::/64", "dummy prefix"),
        ("2001::/23", "IETF protocol assignments (Teredo among them)"),
        ("2001:db8::/32", "documentation"),
        ("2002::/16", "6to4 (can embed an internal IPv4 address)"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing (SRv6) SIDs"),
        ("fc00::/7", "unique local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    ].map { (CurlLoader.AddressRange($0.0)!, $0.1) }

    /// Why `address` (4 or 16 bytes, network order) is refused, or nil when it may be reached.
    public func refusal(for address: [UInt8]) -> String? {
        var bytes = address
        if bytes.count == 16, bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            bytes = Array(bytes.suffix(4))  // IPv4-mapped
        }
        guard bytes.count == 4 || bytes.count == 16 else { return "not an IP address" }
        if exempt.contains(where: { $0.contains(bytes) }) { return nil }
        return Self.specialPurposeRanges.first { $0.range.contains(bytes) }.map { "\($0.range) is \($0.name)" }
    }

    /// The refusal for a socket address curl is about to connect to; anything but
    /// IPv4 and IPv6 (a Unix socket) is refused.
    func refusal(for address: UnsafePointer<sockaddr>) -> String? {
        Self.bytes(of: address).map { refusal(for: $0) } ?? "not an internet address"
    }

    /// The address's 4 or 16 bytes, network order; nil for other families.
    static func bytes(of address: UnsafePointer<sockaddr>) -> [UInt8]? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) } }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) } }
        default:
            return nil
        }
    }
}

extension AddressPolicy {
    /// Every address a host name (or literal) resolves to, 4 or 16 bytes each. Blocks: call off the cooperative pool.
    static func resolve(_ host: String) throws -> [[UInt8]] {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(name, nil, &hints, &list)
        guard rc == 0, let list else {
            throw WebImageError(.loadFailed, "cannot resolve \(name): \(String(cString: gai_strerror(rc)))", isTransient: true)
        }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            if let address = current.pointee.ai_addr, let bytes = bytes(of: address) { addresses.append(bytes) }
            entry = current.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw WebImageError(.loadFailed, "\(name) has no IP address", isTransient: true) }
        return addresses
    }

    /// An address as text (`10.0.0.1`, `fd00::1`).
    static func text(of address: [UInt8]) -> String {
        var text = [CChar](repeating: 0, count: 64)
        _ = inet_ntop(address.count == 4 ? AF_INET : AF_INET6, address, &text, socklen_t(text.count))
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    static func text(of address: UnsafePointer<sockaddr>) -> String {
        bytes(of: address).map { text(of: $0) } ?? "a non-internet address"
    }
}

extension CurlLoader.AddressRange {
    /// Whether the range contains `address` (4 or 16 bytes, network order, same family).
    public func contains(_ address: [UInt8]) -> Bool {
        guard address.count == bytes.count else { return false }
        let whole = prefix / 8, rest = prefix % 8
        for index in 0..<whole where address[index] != bytes[index] { return false }
        guard rest > 0 else { return true }
        let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - rest))
        return address[whole] & mask == bytes[whole] & mask
    }
}
