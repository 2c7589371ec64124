import NIOCore
import Testing
@testable import WebImageHummingbird

@Suite("Connections per client address")
struct ClientConnectionLimitTests {
    @Test("many connections at once from many addresses: each address gets exactly the limit, the rest are refused; the table is empty when they have closed")
    func concurrent() async {
        let counts = ClientConnectionCounts(limit: 3)
        let addresses = (0..<50).map { "10.0.0.\($0)" }
        // Eight connections from each address at once, none closing yet.
        let admitted = await withTaskGroup(of: String?.self) { group in
            for index in 0..<(8 * addresses.count) {
                let address = addresses[index % addresses.count]
                group.addTask { counts.enter(address) ? address : nil }
            }
            return await group.reduce(into: [String: Int]()) { tally, address in
                if let address { tally[address, default: 0] += 1 }
            }
        }
        #expect(admitted.count == addresses.count && admitted.values.allSatisfy { $0 == 3 }, "\(admitted)")
        #expect(addresses.allSatisfy { counts.open(from: $0) == 3 } && counts.clients == addresses.count)
        // All close at once.
        await withTaskGroup(of: Void.self) { group in
            for (address, open) in admitted {
                for _ in 0..<open { group.addTask { counts.leave(address) } }
            }
        }
        #expect(counts.clients == 0, "an address leaves the table with its last connection")
        // Leaving an address never counted does not go below zero or add an entry.
        counts.leave("10.0.0.1")
        #expect(counts.clients == 0 && counts.enter("10.0.0.1") && counts.open(from: "10.0.0.1") == 1)
    }

    @Test("a client is an IPv4 address (also as IPv6 sees it) or an IPv6 /64: other addresses of one /64 count as one client")
    func clientKeys() throws {
        func key(_ ip: String) throws -> String? { ClientConnectionLimitHandler.client(of: try SocketAddress(ipAddress: ip, port: 4321)) }
        #expect(try key("192.0.2.7") == "192.0.2.7")
        #expect(try key("::ffff:192.0.2.7") == "192.0.2.7")
        #expect(try key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(try key("2001:db8:1:2:ffff:ffff:ffff:ffff") == key("2001:db8:1:2::1"))
        #expect(try key("2001:db8:1:3::1") != key("2001:db8:1:2::1"))
        #expect(try key("::1") == "0:0:0:0::/64")
    }
}
