import Configuration
import Foundation
import Logging
import Metrics
import Prometheus
import ThumbnailService
import WebImageKit

// ThumbnailServer [CONFIG.json]
// Reads the configuration file named on the command line, else $THUMBNAIL_SERVER_CONFIG,
// else ./thumbnail-server.json if present; WEBIMAGE_* variables override it.
// Stops gracefully on SIGTERM or SIGINT: in-flight requests finish (or are ended
// after thumbnail.shutdownGrace), then the cache writes they started, then it exits 0.

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
MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

do {
    let config = try await ThumbnailSettings.reader(file: file)
    let settings = try ThumbnailSettings(config: config, presetNames: try ThumbnailSettings.presetNames(file: file))
    let manager = try ConfigLayers.manager(config: config)
    let service = try ThumbnailService(manager: manager, settings: settings, metrics: registry, logger: logger)
    if settings.allowedHosts.patterns.isEmpty {
        logger.warning("thumbnail.allowedHosts is empty: every /thumbnail request will be refused with 403")
    }
    logger.info("configuration", metadata: ["file": "\(file ?? "none")", "allowedHosts": "\(settings.allowedHosts)",
                                            "store": "\(manager.store.map { String(describing: type(of: $0)) } ?? "none")"])
    // Exit 0 either way: loads ended at the grace period's end were answered 503,
    // which is what the grace period is for (the log says finishedWithinGrace).
    _ = try await service.run { port in
        FileHandle.standardOutput.write(Data("listening on http://\(settings.host):\(port)\n".utf8))
    }
} catch {
    FileHandle.standardError.write(Data("ThumbnailServer: \(error)\n".utf8))
    exit(2)
}
