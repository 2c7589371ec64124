import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage
import WebImageCurl
import WebImageTestSupport

@Suite("AddressPolicy: the SSRF guard's rules")
struct AddressPolicyTests {
    static func bytes(_ text: String) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, text, &buffer) == 1 { return Array(buffer.prefix(4)) }
        precondition(inet_pton(AF_INET6, text, &buffer) == 1, text)
        return buffer
    }

    /// For each special-purpose range: its first and last address are refused, and
    /// the addresses just outside it (where they are global) are not.
    @Test("each range: its first and last address refused, its neighbours outside allowed", arguments: [
        ("0.0.0.0", "0.255.255.255", nil, "1.0.0.0"),
        ("10.0.0.0", "10.255.255.255", "9.255.255.255", "11.0.0.0"),
        ("100.64.0.0", "100.127.255.255", "100.63.255.255", "100.128.0.0"),
        ("127.0.0.0", "127.255.255.255", "126.255.255.255", "128.0.0.0"),
        ("169.254.0.0", "169.254.255.255", "169.253.255.255", "169.255.0.0"),
        ("172.16.0.0", "172.31.255.255", "172.15.255.255", "172.32.0.0"),
        ("192.0.0.0", "192.0.0.255", "191.255.255.255", "192.0.1.0"),
        ("192.0.2.0", "192.0.2.255", "192.0.1.255", "192.0.3.0"),
        ("192.88.99.0", "192.88.99.255", "192.88.98.255", "192.88.100.0"),
        ("192.168.0.0", "192.168.255.255", "192.167.255.255", "192.169.0.0"),
        ("198.18.0.0", "198.19.255.255", "198.17.255.255", "198.20.0.0"),
        ("198.51.100.0", "198.51.100.255", "198.51.99.255", "198.51.101.0"),
        ("203.0.113.0", "203.0.113.255", "203.0.112.255", "203.0.114.0"),
        ("224.0.0.0", "239.255.255.255", "223.255.255.255", nil),
        ("240.0.0.0", "255.255.255.255", nil, nil),
        ("::", "::", nil, nil),
        ("::1", "::1", nil, nil),
        ("::2", "::ffff:ffff", nil, nil),
        ("64:ff9b::", "64:ff9b::ffff:ffff", "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", "64:ff9b::1:0:0"),
        ("64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", nil, "64:ff9b:2::"),
        ("100::", "100::ffff:ffff:ffff:ffff", "ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", nil),
        ("100:0:0:1::", "100:0:0:1:ffff:ffff:ffff:ffff", nil, "100:0:0:2::"),
        ("2001::", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:200::"),
        ("2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::"),
        ("2002::", "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2003::"),
        ("3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "3fff:1000::"),
        ("5f00::", "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "5f01::"),
        ("fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe00::"),
        ("fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", nil),
        ("fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", nil, nil),
        ("ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", nil, nil),
    ] as [(String, String, String?, String?)])
    func range(first: String, last: String, below: String?, above: String?) {
        let policy = AddressPolicy()
        #expect(policy.refusal(for: Self.bytes(first)) != nil, "\(first) is special-purpose")
        #expect(policy.refusal(for: Self.bytes(last)) != nil, "\(last) is special-purpose")
        for neighbour in [below, above].compactMap({ $0 }) {
            #expect(policy.refusal(for: Self.bytes(neighbour)) == nil, "\(neighbour) is global")
        }
    }

    @Test("global addresses pass; mapped IPv4 is judged as IPv4; exemptions let a range through, and only it")
    func mappedAndExempt() throws {
        let policy = AddressPolicy()
        for global in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "2a00:1450::1"] {
            #expect(policy.refusal(for: Self.bytes(global)) == nil, "\(global)")
        }
        #expect(policy.refusal(for: Self.bytes("::ffff:127.0.0.1"))?.contains("loopback") == true)
        #expect(policy.refusal(for: Self.bytes("::ffff:10.1.2.3")) != nil)
        #expect(policy.refusal(for: Self.bytes("::ffff:8.8.8.8")) == nil)
        #expect(policy.refusal(for: Self.bytes("169.254.169.254"))?.contains("link-local") == true, "the reason is named")
        let exempting = AddressPolicy(exempt: [try #require(CurlLoader.AddressRange("10.20.0.0/16"))])
        #expect(exempting.refusal(for: Self.bytes("10.20.5.5")) == nil)
        #expect(exempting.refusal(for: Self.bytes("::ffff:10.20.5.5")) == nil)
        #expect(exempting.refusal(for: Self.bytes("10.21.0.1")) != nil)
        #expect(policy.refusal(for: [1, 2, 3]) != nil, "not an address")
    }
}

@Suite("SSRF guard with proxies and redirects", .timeLimit(.minutes(2)))
struct GuardProxyTests {
    /// The proxy listens on 127.0.0.2, exempt, as a proxy on a private network would be.
    static func configuration(proxy: TestHTTPServer) throws -> CurlLoader.Configuration {
        var configuration = CurlLoader.Configuration(blockPrivateAddresses: true)
        configuration.exemptAddresses = [try #require(CurlLoader.AddressRange("127.0.0.2/32")),
                                         try #require(CurlLoader.AddressRange("127.0.0.3/32"))]
        configuration.proxy = "http://127.0.0.2:\(proxy.port)"
        return configuration
    }

    @Test("with a proxy set, each target is checked before the proxy sees it, redirect hops included")
    func proxiedTargets() async throws {
        let proxy = try await TestHTTPServer.start(host: "127.0.0.2")
        defer { Task { await proxy.shutdown() } }
        let loader = CurlLoader(configuration: try Self.configuration(proxy: proxy))
        // An exempt target goes through the proxy, which answers it.
        let allowed = try await load(loader, URL(string: "http://127.0.0.3:9/bytes/10")!)
        #expect(allowed.data.count == 10)
        #expect(proxy.stats.withLock { $0.requests.map(\.path) } == ["http://127.0.0.3:9/bytes/10"], "the proxy got the whole URL")
        // An internal target is refused before any request leaves.
        let refused = await #expect(throws: WebImageError.self) { try await load(loader, URL(string: "http://127.0.0.1:9/bytes/10")!) }
        #expect(refused?.code == .forbidden && refused?.message.contains("127.0.0.1") == true, "\(String(describing: refused))")
        #expect(proxy.stats.withLock { $0.requests.count } == 1)
        // A redirect to an internal target: the hop is refused and named.
        let hop = await #expect(throws: WebImageError.self) {
            try await load(loader, URL(string: "http://127.0.0.3:9/redirect-to/127.0.0.1:9/bytes/10")!)
        }
        #expect(hop?.code == .forbidden && hop?.message.contains("redirected to http://127.0.0.1:9/bytes/10") == true, "\(String(describing: hop))")
        #expect(proxy.stats.withLock { $0.requests.count } == 2, "only the first hop reached the proxy")
        // Exempt redirect hops are followed.
        let followed = try await load(loader, URL(string: "http://127.0.0.3:9/redirect/2")!)
        #expect(followed.data.count == 100 && followed.url.path == "/bytes/100")
        // A redirect without a Location is an error, as it is without a proxy.
        let nowhere = await #expect(throws: WebImageError.self) { try await load(loader, URL(string: "http://127.0.0.3:9/redirect-nowhere")!) }
        #expect(nowhere?.code == .badStatus && nowhere?.statusCode == 302)
    }

    @Test("without a proxy, a refused redirect hop is named in the error")
    func redirectNamed() async throws {
        try await withServer { server in
            var configuration = CurlLoader.Configuration(blockPrivateAddresses: true)
            configuration.exemptAddresses = [try #require(CurlLoader.AddressRange("127.0.0.1/32"))]
            let loader = CurlLoader(configuration: configuration)
            let error = await #expect(throws: WebImageError.self) {
                try await load(loader, server.url("/redirect-to/127.0.0.2:\(server.port)/bytes/10"))
            }
            #expect(error?.code == .forbidden, "\(String(describing: error))")
            #expect(error?.message.contains("redirected to http://127.0.0.2:\(server.port)/bytes/10") == true, "\(String(describing: error))")
            #expect(error?.message.contains("loopback") == true)
        }
    }

    /// The environment's proxy would carry the request past the guard: with the
    /// guard on it is ignored, so the target's own address is checked and refused.
    @Test("with the guard on, http_proxy and ALL_PROXY from the environment are ignored")
    func environmentProxyIgnored() async throws {
        let proxy = try await TestHTTPServer.start(host: "127.0.0.2")
        defer { Task { await proxy.shutdown() } }
        let tool = Tool()
        defer { tool.cleanUp() }
        let environment = ["http_proxy": "http://127.0.0.2:\(proxy.port)", "HTTPS_PROXY": "http://127.0.0.2:\(proxy.port)",
                           "ALL_PROXY": "http://127.0.0.2:\(proxy.port)"]
        let guarded = try await tool.run(["load", "--json", "--store", "none", "--set", "loader.blockPrivateAddresses=true",
                                          "--set", "loader.exemptAddresses=127.0.0.2/32", "http://127.0.0.1:9/bytes/10"], environment: environment)
        let error = try #require(guarded.lines.first?["error"] as? [String: Any], "\(guarded.stdout) \(guarded.stderr)")
        #expect(error["code"] as? String == "forbidden")
        #expect(proxy.stats.withLock { $0.requests.isEmpty }, "nothing went through the environment's proxy")
        // With the guard off, curl uses the environment's proxy as before.
        let open = try await tool.run(["load", "--json", "--store", "none", "http://127.0.0.1:9/bytes/10"],
                                      environment: environment)
        #expect(open.lines.first?["error"] != nil)
        #expect(proxy.stats.withLock { $0.requests.count } == 1, "the unguarded tool used the environment's proxy")
    }
}
