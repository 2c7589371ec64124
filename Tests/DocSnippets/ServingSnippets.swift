// The Swift snippets of docs/serving.md, compiled with the tests. Each region
// between `snippet-begin: NAME` and `snippet-end` is, with the lines between
// `snippet-pause` and `snippet-resume` left out and the function's indentation
// removed, a ```swift block of the page, character for character
// (DocSnippetsTests checks it). Nothing here runs: it binds port 8080.

// snippet-begin: hummingbird-app
import Hummingbird
import Metrics
import Prometheus
import ServiceLifecycle
import WebImageHTTP
import WebImageHummingbird
import WebImageKit
// snippet-pause

/// serving.md's Hummingbird app: routes, presets, a fallback, metrics and a graceful stop.
package func hummingbirdApp() async throws {
// snippet-resume

    // Metrics: swift-metrics into a Prometheus registry, served at /metrics.
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

    // The manager, its cache, the endpoint's settings, presets and fallback image: images.json.
    let endpoint = try await ImageEndpoint.configured(file: "images.json")

    let router = Router()
    router.add(middleware: RequestMetricsMiddleware())  // Hummingbird's request metrics, without wrapping the body
    router.addImageRoutes(endpoint, at: "/img")  // GET/HEAD /img/thumbnail, /img/placeholder, /img/info
    router.get("/metrics") { _, _ in
        await endpoint.recordGauges()
        return registry.emitToString() + ProcessMetrics.exposition()
    }
    // Thumbnails the memory tier holds, answered on the event loop before the router (the same answer).
    let fastPath = MemoryHitFastPath(endpoint: endpoint, mountedAt: "/img")
    let app = Application(
        router: router,
        server: .http1(configuration: .init(additionalChannelHandlers: [fastPath.channelHandler()])),
        configuration: .init(address: .hostname("0.0.0.0", port: 8080)))

    // SIGTERM: the server stops taking requests, loads in flight finish, the cache closes.
    let services = ServiceGroup(configuration: .init(
        services: [ImageManagerService(endpoint.manager), app],
        gracefulShutdownSignals: [.sigterm, .sigint], logger: app.logger))
    try await services.run()
// snippet-end
}

/// MemoryHitFastPath's DocC example (its doc comment shows the region below).
package func memoryHitFastPathApp(endpoint: ImageEndpoint, router: Router<BasicRequestContext>) -> some ApplicationProtocol {
// snippet-begin: memory-hit-fast-path
    let fastPath = MemoryHitFastPath(endpoint: endpoint, mountedAt: "/img", serverName: "my-service")
    let app = Application(
        router: router,  // with router.addImageRoutes(endpoint, at: "/img")
        server: .http1(configuration: .init(additionalChannelHandlers: [fastPath.channelHandler()])))
// snippet-end
    return app
}
