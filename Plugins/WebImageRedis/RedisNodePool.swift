import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage

/// The connections to one Redis server, reused, and what is known of its health.
///
/// A failure (connect refused, timeout, broken connection) marks the server down
/// for ``RedisClient/Settings/retryDelay``: until then every call fails at once,
/// so a dead or stalled server costs each load nothing, not a timeout each. A
/// connection that fails after sitting idle (the server restarted) is replaced
/// by a fresh one on the spot before the server is called down.
final class RedisNodePool: Sendable {
    let address: RedisAddress
    private let settings: RedisClient.Settings

    private struct State {
        var idle: [RedisConnection] = []
        var downUntil: ContinuousClock.Instant?
        var lastError = ""
    }
    private let state = Lock(State())

    init(address: RedisAddress, settings: RedisClient.Settings) {
        self.address = address
        self.settings = settings
    }

    /// Runs `body` with a connection (blocking; call on the client's threads).
    func withConnection<T>(_ body: (RedisConnection) throws -> T) throws -> T {
        let (reused, down) = state.withLock { state -> (RedisConnection?, String?) in
            if let until = state.downUntil, ContinuousClock.now < until {
                return (nil, state.lastError)
            }
            return (state.idle.popLast(), nil)
        }
        if let down {
            throw WebImageError(.storeFailed, "redis \(address) is unavailable (\(down)); retrying after \(settings.configuration.retryDelay)", isTransient: true)
        }
        if let reused {
            do {
                let value = try body(reused)
                return finish(reused, value)
            } catch let error as RedisIOError {
                // Idle connections die when the server restarts: drop them all and
                // try once on a fresh one before calling the server down.
                state.withLock { $0.idle.removeAll() }
                _ = error  // the fresh connection below says whether the server is down
            }
        }
        let connection: RedisConnection
        do {
            connection = try RedisConnection(address, credentials: settings.credentials,
                                             connectTimeout: settings.configuration.connectTimeout, commandTimeout: settings.configuration.commandTimeout)
        } catch let error as RedisIOError {
            throw markDown(error)
        }
        do {
            let value = try body(connection)
            return finish(connection, value)
        } catch let error as RedisIOError {
            throw markDown(error)
        }
    }

    private func finish<T>(_ connection: RedisConnection, _ value: T) -> T {
        state.withLock { state in
            state.downUntil = nil
            if !connection.isBroken, state.idle.count < settings.configuration.maxConnections { state.idle.append(connection) }
        }
        return value
    }

    private func markDown(_ error: RedisIOError) -> WebImageError {
        state.withLock { state in
            state.downUntil = ContinuousClock.now + settings.configuration.retryDelay
            state.lastError = error.message
        }
        return WebImageError(.storeFailed, error.message, isTransient: true)
    }

    /// Whether the last call failed and the retry delay has not passed.
    var isDown: Bool { state.withLock { $0.downUntil.map { ContinuousClock.now < $0 } ?? false } }

    /// Closes the idle connections.
    func close() { state.withLock { $0.idle.removeAll() } }
}
