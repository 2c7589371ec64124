import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// A Hummingbird application served on a free loopback port for the length of a
/// test: what HummingbirdTesting's `.live` setup does, without that module, whose
/// AsyncHTTPClient and SwiftNIO SSL (BoringSSL's 400 C files) were about a third
/// of the tests' first build. The requests go over `RawHTTP`, a plain socket.
enum LiveServer {
    /// The address a test's application listens on: loopback, a port the kernel picks.
    static let configuration = ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0))

    /// Builds the application with `make` (which passes the given `onServerRunning`
    /// to the application's init, and `configuration` as its configuration), runs it
    /// until the server listens, calls `body` with its port, then shuts it down
    /// gracefully, whether `body` returned or threw.
    static func run<App: ApplicationProtocol & Service, Value: Sendable>(
        _ make: (_ onServerRunning: @escaping @Sendable (any Channel) async -> Void) -> App,
        _ body: (Int) async throws -> Value
    ) async throws -> Value {
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
        let app = make { channel in
            portSink.yield(channel.localAddress?.port ?? 0)
            portSink.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [app], logger: Logger(label: "live-server")))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next(), port > 0 else {
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                throw LiveServerError.noPort
            }
            do {
                let value = try await body(port)
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return value
            } catch {
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
        }
    }
}

/// The server stopped, or listened on no port, before it answered anything.
struct LiveServerError: Error { static let noPort = LiveServerError() }
