import Configuration
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import Synchronization
import UnixSignals
import ThumbnailService
import WebImageKit

// ThumbnailServer [CONFIG.json]
// Reads the configuration file named on the command line, else $THUMBNAIL_SERVER_CONFIG,
// else ./thumbnail-server.json if present; WEBIMAGE_* variables override it.
// Stops gracefully on SIGTERM or SIGINT: in-flight requests finish, then the cache
// writes they started, then it exits 0.

let arguments = CommandLine.arguments.dropFirst()
if arguments.contains("--help") || arguments.contains("-h") {
    print("usage: ThumbnailServer [CONFIG.json]   (see Examples/ThumbnailServer/README.md)")
    exit(0)
}
let environment = ProcessInfo.processInfo.environment
let file = arguments.first ?? environment["THUMBNAIL_SERVER_CONFIG"]
    ?? (FileManager.default.fileExists(atPath: "thumbnail-server.json") ? "thumbnail-server.json" : nil)

var logger = Logger(label: "thumbnail-server")
logger.logLevel = environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info

let registry = PrometheusCollectorRegistry()
/// Whether SIGTERM or SIGINT started the shutdown.
let signalled = Atomic<Bool>(false)
MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

do {
    let config = try await ThumbnailSettings.reader(file: file)
    let settings = try ThumbnailSettings(config: config)
    let manager = try ConfigLayers.manager(config: config)
    let service = try ThumbnailService(manager: manager, settings: settings, metrics: registry)
    if settings.allowedHosts.patterns.isEmpty {
        logger.warning("thumbnail.allowedHosts is empty: every /thumbnail request will be refused with 403")
    }
    logger.info("configuration", metadata: ["file": "\(file ?? "none")", "allowedHosts": "\(settings.allowedHosts)",
                                            "store": "\(manager.store.map { String(describing: type(of: $0)) } ?? "none")"])
    let app = service.application(logger: logger) { port in
        FileHandle.standardOutput.write(Data("listening on http://\(settings.host):\(port)\n".utf8))
    }
    // On SIGTERM or SIGINT the manager's grace period starts at once, beside the
    // server's own drain: the drain waits on the manager's loads, and when the
    // grace period ends the loads still running are ended (answered 503), so a
    // silent origin cannot hold the exit (thumbnail.shutdownGrace).
    let grace = Task {
        for await _ in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
            signalled.store(true, ordering: .relaxed)
            logger.info("stopping", metadata: ["gracePeriod": "\(settings.shutdownGrace)"])
            return await manager.shutdown(gracePeriod: settings.shutdownGrace)
        }
        return true
    }
    try await app.runService()
    // The server has stopped taking requests and answered those in flight. After a
    // signal, the manager's shutdown is under way: wait for it (the cache writes
    // finish, or the grace period ends). Without one, stop watching for signals.
    if !signalled.load(ordering: .relaxed) { grace.cancel() }
    let withinGrace = await grace.value
    let clean = await manager.shutdown(gracePeriod: settings.shutdownGrace) && withinGrace
    logger.info("stopped", metadata: ["finishedWithinGrace": "\(clean)"])
} catch {
    FileHandle.standardError.write(Data("ThumbnailServer: \(error)\n".utf8))
    exit(2)
}
