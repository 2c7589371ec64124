public import ServiceLifecycle
public import WebImage

/// Runs an ``ImageManager`` as a swift-service-lifecycle `Service`: on graceful
/// shutdown (SIGTERM, SIGINT, or the group's trigger) it calls
/// `ImageManager.shutdown(gracePeriod:)`, so loads in flight and the store writes
/// they left running finish before the process exits.
///
/// Put it before the services that use the manager: a `ServiceGroup` shuts its
/// services down in reverse order, so the HTTP server stops taking requests first.
///
/// ```swift
/// let group = ServiceGroup(configuration: .init(
///     services: [ImageManagerService(manager), app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
/// try await group.run()
/// ```
public struct ImageManagerService: Service {
    public let manager: ImageManager
    /// The longest the shutdown waits for loads and writes. Default 30 s.
    public var gracePeriod: Duration

    public init(_ manager: ImageManager, gracePeriod: Duration = .seconds(30)) {
        self.manager = manager
        self.gracePeriod = gracePeriod
    }

    /// Waits for graceful shutdown (or cancellation), then shuts the manager down.
    public func run() async throws {
        try? await gracefulShutdown()
        await manager.shutdown(gracePeriod: gracePeriod)
    }
}
