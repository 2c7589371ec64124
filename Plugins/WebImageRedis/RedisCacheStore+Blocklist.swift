import Foundation
public import WebImage

/// The fleet's failed-URL blocklist in the same Redis as its shared cache tier:
/// one key per URL, `prefix + "failed:" + SHA-256(url)` in hex, holding
/// `FailureRecord.encoded()` and expiring with the blocklist's TTL (`SET … PX`).
/// A read is `GET` and `PTTL` pipelined, so a host copies a failure for exactly
/// as long as it still stands in Redis, whatever the hosts' clocks say.
extension RedisCacheStore: SharedFailureStore {
    /// Where the blocklist's keys start.
    var failurePrefix: Data { prefix + Data("failed:".utf8) }

    /// The Redis key a URL's failure is kept under.
    public func failureKey(forURL url: String) -> String { configuration.prefix + "failed:" + SHA256Digest.hex(url) }

    func failureKey(_ url: String) -> Data { Data(failureKey(forURL: url).utf8) }

    public func failure(forURL url: String) async throws -> (record: FailureRecord, remaining: Duration)? {
        let key = failureKey(url)
        let replies: [RedisValue]
        do { replies = try await client.pipeline([(key, [Data("GET".utf8), key]), (key, [Data("PTTL".utf8), key])]) } catch {
            throw storeError(error, "GET")
        }
        if let message = replies.lazy.compactMap(\.errorMessage).first { throw WebImageError(.storeFailed, "redis GET: \(message)") }
        // No value, or a key without expiry (-1: not ours), or gone in between (-2).
        guard replies.count == 2, let value = replies[0].data, case .integer(let milliseconds) = replies[1], milliseconds > 0 else { return nil }
        guard let record = FailureRecord(encoded: value) else { return nil }
        return (record, .milliseconds(milliseconds))
    }

    public func recordFailure(_ record: FailureRecord, forURL url: String, ttl: Duration) async throws {
        let milliseconds = max(1, ttl.wholeMilliseconds)
        let key = failureKey(url)
        let reply: RedisValue
        do { reply = try await client.run([Data("SET".utf8), key, record.encoded(), Data("PX".utf8), Data(String(milliseconds).utf8)], key: key) } catch {
            throw storeError(error, "SET")
        }
        if let message = reply.errorMessage { throw WebImageError(.storeFailed, "redis SET: \(message)") }
    }

    public func removeFailure(forURL url: String) async throws {
        let key = failureKey(url)
        do { _ = try await client.run([Data("UNLINK".utf8), key], key: key) } catch { throw storeError(error, "UNLINK") }
    }

    public func removeAllFailures() async throws {
        try await scan(under: failurePrefix) { connection, keys in
            let replies = try connection.pipeline(keys.map { [Data("UNLINK".utf8), $0] })
            if let message = replies.lazy.compactMap(\.errorMessage).first {
                throw WebImageError(.storeFailed, "redis UNLINK: \(message)")
            }
        }
    }
}
