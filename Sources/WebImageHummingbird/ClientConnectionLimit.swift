import CoreMetrics
#if canImport(Glibc)
import Glibc
#endif
public import NIOCore
public import NIOHTTPTypes
import Synchronization

/// How many connections each client address has open, and the most one may
/// (`http.maxConnectionsPerClient`). One instance is shared by every
/// connection of a server; ``ClientConnectionLimitHandler`` asks it.
///
/// A client is its IPv4 address, or its IPv6 address's /64 (the block one
/// subscriber is usually given, whose other addresses cost nothing to use):
/// the port is not part of it.
/// An address leaves the table when its last connection closes, so the table
/// holds no more entries than there are connections open.
public final class ClientConnectionCounts: Sendable {
    /// The most connections one address may have open at once.
    public let limit: Int
    private let counts = Mutex<[String: Int]>([:])
    private let refusedCounter = Counter(label: "http_connections_refused_total", dimensions: [("reason", "per_client")])

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Counts a new connection from `client`, or says it is one too many (and
    /// counts nothing).
    package func enter(_ client: String) -> Bool {
        let admitted = counts.withLock { counts -> Bool in
            let open = counts[client, default: 0]
            guard open < limit else { return false }
            counts[client] = open + 1
            return true
        }
        if !admitted { refusedCounter.increment() }
        return admitted
    }

    package func leave(_ client: String) {
        counts.withLock { counts in
            guard let open = counts[client] else { return }
            counts[client] = open > 1 ? open - 1 : nil
        }
    }

    /// Connections open from `client` now.
    public func open(from client: String) -> Int { counts.withLock { $0[client] ?? 0 } }

    /// Addresses with a connection open now.
    public var clients: Int { counts.withLock { $0.count } }
}

/// Closes a new connection at once when its client address already has
/// ``ClientConnectionCounts/limit`` open, so that one client cannot take every
/// place under `http.maxConnections`: the others' requests go on being read.
///
/// The connection is closed before anything is read from it, without an answer
/// (the client sees its connection closed, as when a server is full); each one
/// counts in `http_connections_refused_total{reason="per_client"}`. Behind a
/// proxy or load balancer every connection comes from the proxy's address, so
/// leave the limit off there and limit clients in the proxy (nginx's
/// `limit_conn`).
public final class ClientConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart

    private let counts: ClientConnectionCounts
    /// The address this connection is counted under, once it is.
    private var counted: String?
    private var judged = false

    public init(counts: ClientConnectionCounts) {
        self.counts = counts
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { judge(context) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        judge(context)
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) { release() }

    private func judge(_ context: ChannelHandlerContext) {
        guard !judged else { return }
        judged = true
        // A connection without an IP address (a Unix socket) is not limited.
        guard let client = context.channel.remoteAddress.flatMap(Self.client(of:)) else { return }
        if counts.enter(client) {
            counted = client
        } else {
            context.close(promise: nil)
        }
    }

    /// The key a connection from `address` is counted under: an IPv4 address
    /// (also one an IPv6 socket sees as `::ffff:a.b.c.d`), or an IPv6 /64.
    static func client(of address: SocketAddress) -> String? {
        switch address {
        case .v4: return address.ipAddress
        case .v6:
            guard let text = address.ipAddress else { return nil }
            var raw = in6_addr()
            guard inet_pton(AF_INET6, text, &raw) == 1 else { return text }
            let bytes = withUnsafeBytes(of: raw) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                return bytes[12...].map(String.init).joined(separator: ".")
            }
            return stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":") + "::/64"
        default: return nil
        }
    }

    private func release() {
        if let counted { counts.leave(counted) }
        counted = nil
    }
}
