import ArgumentParser
import Configuration
import Foundation
import Logging
import Metrics
import WebImage
import WebImageConfiguration
import WebImageHTTP
import WebImageKit

extension ServeCommand {
    /// `allocator` is read before the command runs (``ServeAllocator``); it is
    /// known here so that `WEBIMAGE_ALLOCATOR` and `--set allocator=…` pass the key check.
    /// (Known in a build without `serve` too: the other commands accept these in
    /// the environment, which a service's container shares with them.)
    static let keys: Set<String> = ["http.host", "http.port", "http.memoryHitsOnEventLoop", "http.maxConnections", "http.maxConnectionsPerClient",
                                    "http.idleTimeout", "allocator"]
}
#if WEBIMAGE_SERVE
import Prometheus
import WebImageHummingbird

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve thumbnails over HTTP: /thumbnail, /placeholder, /info, /health, /metrics.",
        discussion: """
        Configured like every command (--config, --set, WEBIMAGE_*): http.host (127.0.0.1), \
        http.port (8080), http.maxConnections (1024), http.maxConnectionsPerClient (0: off), \
        http.idleTimeout (60s), and the \
        thumbnail.* keys in docs/serving.md. thumbnail.allowedHosts \
        is empty by default: every image is refused until it names the hosts to fetch from. \
        Stops gracefully on SIGTERM or SIGINT (thumbnail.shutdownGrace).
        """
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        // Metadata rendered only into lines written, not on every request's id.
        LoggingSystem.bootstrap { LineLogHandler(label: $0) }
        var logger = Logger(label: "webimage.serve")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let server: ImageServer
        do {
            let flags = try global.flags()
            let (config, presets) = try await ConfigLayers.service(file: global.configFile, flags: flags, extraKeys: Self.keys)
            if let allocator = ConfigValues(config).text("allocator") {
                guard ServeAllocator.values.contains(allocator) else {
                    throw ConfigValues(config).invalid("allocator", allocator, "jemalloc or system")
                }
                if allocator == "system", ServeAllocator.jemallocIsLoaded {
                    logger.warning("allocator=system is read before the configuration file: set WEBIMAGE_ALLOCATOR=system or --set allocator=system")
                }
            }
            let values = ConfigValues(config)
            let host = values.text("http.host") ?? "127.0.0.1"
            let port = try values.int("http.port", minimum: 0) ?? 8080
            guard port <= 65_535 else { throw values.invalid("http.port", String(port), "a port number") }
            let endpoint = try ImageEndpoint.configured(config: config, presetNames: presets, logger: logger)
            var configured = ImageServer(endpoint: endpoint,
                                         host: host, port: port, metrics: { registry.emitToBuffer() }, logger: logger)
            configured.answersMemoryHitsOnEventLoop = try values.bool("http.memoryHitsOnEventLoop") ?? true
            // 0 turns either bound off.
            if let most = try values.int("http.maxConnections", minimum: 0) { configured.maxConnections = most == 0 ? nil : most }
            if let most = try values.int("http.maxConnectionsPerClient", minimum: 0) { configured.maxConnectionsPerClient = most == 0 ? nil : most }
            if let idle = try values.duration("http.idleTimeout") {
                // Under a second a client's next request on a kept connection would find it closed.
                guard idle == .zero || idle >= .seconds(1) else {
                    throw values.invalid("http.idleTimeout", values.text("http.idleTimeout") ?? "", "at least 1s, or 0 for no limit")
                }
                configured.idleTimeout = idle == .zero ? nil : idle
            }
            server = configured
        } catch let error as WebImageError {
            Terminal.error("configuration: \(error.message)")
            throw ExitCode(2)
        }
        // Exits 0 either way: loads ended when the grace period ran out were
        // answered 503, which is what the grace period is for (the log says
        // finishedWithinGrace).
        // Said once, so that an operator can see which allocator took effect.
        if ServeAllocator.jemallocIsLoaded {
            logger.info("allocator", metadata: ["allocator": "jemalloc", "MALLOC_CONF": "\(ServeAllocator.startedWith ?? "")"])
        } else {
            logger.notice("allocator", metadata: ["allocator": "system malloc",
                                                  "why": "\(ServeAllocator.whySystem ?? "WEBIMAGE_ALLOCATOR=system")"])
        }
        do {
            _ = try await server.run(onServerRunning: { port in
                FileHandle.standardOutput.write(Data("listening on http://\(server.host.contains(":") ? "[\(server.host)]" : server.host):\(port)\n".utf8))
            })
        } catch let error as WebImageError where error.code == .invalidArgument {
            // It could not listen: the address comes from http.host and http.port.
            Terminal.error("http.host, http.port: \(error.message)")
            throw ExitCode(2)
        }
    }
}
#else
/// `serve` in a tool built without the server (`make demo` builds it so, with
/// `WEBIMAGE_TOOL_WITHOUT_SERVE` set; see Package.swift): it says how to build
/// the tool that has it, and exits 2.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve thumbnails over HTTP (not in this build: `swift build --product webimage` builds it)."
    )

    /// Whatever follows `serve`, so that the answer is the same for every form of it.
    @Argument(parsing: .allUnrecognized) var arguments: [String] = []

    func run() async throws {
        Terminal.error("""
            this webimage was built without `serve` (make demo leaves the HTTP server out, to build faster). \
            Build the full tool with `swift build --product webimage`, then run `$(swift build --show-bin-path)/webimage serve` again.
            """)
        throw ExitCode(2)
    }
}
#endif
