import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage

/// Commands to one Redis server or a Redis Cluster, on threads of its own.
///
/// The first command finds out which it is: `CLUSTER SLOTS` on a seed answers
/// the slot map of a cluster, or an error on a standalone server. In a cluster,
/// a key goes to the primary that owns its hash slot (CRC16 of the key, or of its
/// `{hash tag}`, mod 16384); `MOVED` updates the map and the slot map is read
/// again, `ASK` is followed for one command with `ASKING`, and a broken
/// connection makes the next command read the map again (a failover).
final class RedisClient: Sendable {
    struct Settings: Sendable {
        var seeds: [RedisAddress]
        var credentials = RedisCredentials()
        /// Timeouts, retry delay and pool size: the store's configuration, read here.
        var configuration: RedisCacheStore.Configuration
    }

    enum Topology: Sendable {
        case unknown
        case standalone(RedisAddress)
        /// The owner of every slot (nil: not covered), and the primaries.
        case cluster(slots: [RedisAddress?], primaries: [RedisAddress])
    }

    let settings: Settings
    /// The threads every blocking call runs on: at most `maxConnections` at once,
    /// and apart from the I/O pool, so that a stalled Redis never holds up disk hits.
    let threads: BlockingThreadPool
    private let pools = Lock<[RedisAddress: RedisNodePool]>([:])
    private let topology = Lock<(map: Topology, stale: Bool)>((.unknown, false))

    init(settings: Settings) {
        self.settings = settings
        self.threads = BlockingThreadPool(threadCount: settings.configuration.maxConnections, name: "webimage.redis")
    }

    deinit { threads.shutdown() }

    // MARK: Commands

    /// One command about `key` (routed by its slot in a cluster).
    func run(_ command: [Data], key: Data) async throws -> RedisValue {
        try await threads.run { try self.execute(command, key: key) }
    }

    /// Several commands, pipelined: one round trip per server involved.
    func pipeline(_ commands: [(key: Data, command: [Data])]) async throws -> [RedisValue] {
        try await threads.run {
            let map = try self.currentTopology()
            var groups: [RedisAddress: [Int]] = [:]
            for (index, item) in commands.enumerated() { groups[Self.node(for: item.key, in: map), default: []].append(index) }
            var replies = [RedisValue](repeating: .null, count: commands.count)
            for (address, indices) in groups {
                let answers = try self.pool(address).withConnection { try $0.pipeline(indices.map { commands[$0].command }) }
                for (index, answer) in zip(indices, answers) {
                    // A slot that moved mid-batch: that command again, alone, with redirections.
                    if let message = answer.errorMessage, message.hasPrefix("MOVED ") || message.hasPrefix("ASK ") {
                        replies[index] = try self.execute(commands[index].command, key: commands[index].key)
                    } else {
                        replies[index] = answer
                    }
                }
            }
            return replies
        }
    }

    /// A command on every primary (SCAN, FLUSH-like work), with each one's reply.
    func onEveryPrimary(_ body: @escaping @Sendable (RedisConnection) throws -> Void) async throws {
        try await threads.run {
            let primaries: [RedisAddress] = switch try self.currentTopology() {
            case .standalone(let address): [address]
            case .cluster(_, let primaries): primaries
            case .unknown: []
            }
            for address in primaries { try self.pool(address).withConnection(body) }
        }
    }

    /// Closes idle connections.
    func close() {
        for pool in pools.withLock({ Array($0.values) }) { pool.close() }
    }

    // MARK: Routing (on the client's threads)

    private func execute(_ command: [Data], key: Data) throws -> RedisValue {
        var target = Self.node(for: key, in: try currentTopology())
        var asking = false
        for _ in 0..<6 {
            let reply: RedisValue
            do {
                reply = try pool(target).withConnection { connection in
                    asking ? try connection.pipeline([[Data("ASKING".utf8)], command])[1] : try connection.command(command)
                }
            } catch {
                if case .cluster = topology.withLock({ $0.map }) { topology.withLock { $0.stale = true } }
                throw error
            }
            guard let message = reply.errorMessage else { return reply }
            if message.hasPrefix("MOVED "), let (slot, address) = Self.redirection(message) {
                topology.withLock { state in
                    if case .cluster(var slots, let primaries) = state.map {
                        slots[slot] = address
                        state.map = .cluster(slots: slots, primaries: primaries.contains(address) ? primaries : primaries + [address])
                    }
                    state.stale = true
                }
                target = address
                asking = false
            } else if message.hasPrefix("ASK "), let (_, address) = Self.redirection(message) {
                target = address
                asking = true
            } else if message.hasPrefix("TRYAGAIN") || message.hasPrefix("CLUSTERDOWN") {
                Thread.sleep(forTimeInterval: 0.05)
                asking = false
            } else {
                return reply
            }
        }
        throw WebImageError(.storeFailed, "redis: too many cluster redirections for one command", isTransient: true)
    }

    private func pool(_ address: RedisAddress) -> RedisNodePool {
        pools.withLock { pools in
            if let pool = pools[address] { return pool }
            let pool = RedisNodePool(address: address, settings: settings)
            pools[address] = pool
            return pool
        }
    }

    /// The topology, discovered on first use and read again after a redirection
    /// or a failure in a cluster.
    func currentTopology() throws -> Topology {
        let (map, stale) = topology.withLock { ($0.map, $0.stale) }
        switch map {
        case .standalone: return map
        case .cluster where !stale: return map
        default: break
        }
        do {
            let discovered = try discover(known: map)
            topology.withLock { $0 = (discovered, false) }
            return discovered
        } catch {
            if case .cluster = map { return map }  // keep routing by the old map
            throw error
        }
    }

    private func discover(known: Topology) throws -> Topology {
        var candidates = settings.seeds
        if case .cluster(_, let primaries) = known { candidates = primaries + candidates.filter { !primaries.contains($0) } }
        var lastError: (any Error)?
        for seed in candidates {
            do {
                let reply = try pool(seed).withConnection { try $0.command([Data("CLUSTER".utf8), Data("SLOTS".utf8)]) }
                if let message = reply.errorMessage {
                    guard settings.seeds.count == 1, message.contains("cluster support disabled") else {
                        throw WebImageError(.storeFailed, "redis \(seed): CLUSTER SLOTS: \(message)")
                    }
                    return .standalone(seed)
                }
                return try Self.slotMap(reply, seed: seed)
            } catch {
                lastError = error
            }
        }
        throw lastError ?? WebImageError(.storeFailed, "redis: no seed address")
    }

    /// The slot map from a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id], replicas…], …]`.
    static func slotMap(_ reply: RedisValue, seed: RedisAddress) throws -> Topology {
        guard case .array(let ranges) = reply, !ranges.isEmpty else {
            throw WebImageError(.storeFailed, "redis \(seed): CLUSTER SLOTS answered no slots")
        }
        var slots = [RedisAddress?](repeating: nil, count: 16384)
        var primaries: [RedisAddress] = []
        for range in ranges {
            guard case .array(let fields) = range, fields.count >= 3,
                  case .integer(let start) = fields[0], case .integer(let end) = fields[1],
                  case .array(let node) = fields[2], node.count >= 2, case .integer(let port) = node[1],
                  (0...16383).contains(start), (start...16383).contains(end)
            else { throw WebImageError(.storeFailed, "redis \(seed): CLUSTER SLOTS reply not understood") }
            var host = node[0].text ?? ""
            if host.isEmpty { host = seed.host }  // a node that does not know its own address
            let address = RedisAddress(host: host, port: port)
            if !primaries.contains(address) { primaries.append(address) }
            for slot in start...end { slots[slot] = address }
        }
        return .cluster(slots: slots, primaries: primaries)
    }

    static func node(for key: Data, in topology: Topology) -> RedisAddress {
        switch topology {
        case .standalone(let address): return address
        case .cluster(let slots, let primaries): return slots[Int(hashSlot(key))] ?? primaries[0]
        case .unknown: preconditionFailure("routing before the topology is known")
        }
    }

    /// `MOVED 3999 127.0.0.1:6381` or `ASK …`: the slot and the address.
    static func redirection(_ message: String) -> (Int, RedisAddress)? {
        let parts = message.split(separator: " ")
        guard parts.count == 3, let slot = Int(parts[1]), (0..<16384).contains(slot),
              let colon = parts[2].lastIndex(of: ":"), let port = Int(parts[2][parts[2].index(after: colon)...]) else { return nil }
        var host = String(parts[2][..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (slot, RedisAddress(host: host, port: port))
    }

    // MARK: Hash slots

    /// The cluster hash slot of a key: CRC16 (XMODEM) of the key, or of the part
    /// between the first `{` and the next `}` when that part is not empty, mod 16384.
    static func hashSlot(_ key: Data) -> UInt16 {
        var part = key[...]
        if let open = key.firstIndex(of: UInt8(ascii: "{")),
           let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1 {
            part = key[(open + 1)..<close]
        }
        return crc16(part) & 0x3FFF
    }

    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return crc
    }
}
