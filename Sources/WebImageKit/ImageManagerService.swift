public import ServiceLifecycle
public import UnixSignals
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
///
/// A group shuts the HTTP server down first and waits for its requests, and
/// those wait on the manager's loads: a load waiting on a silent origin would
/// hold the exit for its whole timeout. With `signals` (SIGTERM and SIGINT by
/// default) the manager's grace period starts when the signal arrives, whatever
/// the group's order: loads still running when it ends fail with
/// `shutDown`, the server answers them, and the group finishes.
public struct ImageManagerService: Service {
    public let manager: ImageManager
    /// The longest the shutdown waits for loads and writes. Default 30 s.
    public var gracePeriod: Duration
    /// Signals that start the shutdown at once, before the group reaches this service.
    public var signals: [UnixSignal]

    public init(_ manager: ImageManager, gracePeriod: Duration = .seconds(30), signals: [UnixSignal] = [.sigterm, .sigint]) {
        self.manager = manager
        self.gracePeriod = gracePeriod
        self.signals = signals
    }

    /// Waits for graceful shutdown, cancellation or one of ``signals``, then
    /// shuts the manager down.
    public func run() async throws {
        let signals = signals
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await gracefulShutdown() }
            if !signals.isEmpty {
                group.addTask {
                    for await _ in await UnixSignalsSequence(trapping: signals) { return }
                }
            }
            await group.next()
            group.cancelAll()
        }
        await manager.shutdown(gracePeriod: gracePeriod)
    }
}
