public import ServiceLifecycle
public import UnixSignals
@_spi(WebImageInternal) public import WebImage
import Logging
import Synchronization

/// Runs an `ImageManager` as a swift-service-lifecycle `Service`: on graceful
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
/// `shutDown`, the server answers them, and the group finishes. `run()` itself
/// returns only when the group asks it to (its graceful shutdown reaches this
/// service) or cancels it, since a service that returns on its own makes a
/// `ServiceGroup` fail with "a service has finished unexpectedly".
public struct ImageManagerService: Service {
    public let manager: ImageManager
    /// The longest the shutdown waits for loads and writes. Default 30 s.
    public var gracePeriod: Duration
    /// Signals that start the shutdown at once, before the group reaches this service.
    public var signals: [UnixSignal]
    private let outcome = Outcome()

    public init(_ manager: ImageManager, gracePeriod: Duration = .seconds(30), signals: [UnixSignal] = [.sigterm, .sigint]) {
        self.manager = manager
        self.gracePeriod = gracePeriod
        self.signals = signals
    }

    /// Whether the manager's shutdown finished everything in flight within
    /// ``gracePeriod``; nil until the shutdown has ended.
    public var finishedWithinGrace: Bool? { outcome.result.withLock { $0 } }

    /// Waits for the group's graceful shutdown (or cancellation), then returns
    /// once the manager has shut down. One of ``signals`` starts the manager's
    /// shutdown early; `run()` still waits for the group.
    public func run() async throws {
        let (signals, manager, grace, outcome) = (signals, manager, gracePeriod, outcome)
        await withTaskGroup(of: Void.self) { group in
            if !signals.isEmpty {
                group.addTask {
                    for await _ in await UnixSignalsSequence(trapping: signals) {
                        guard outcome.claim() else { return }
                        manager.configuration.logger.info("stopping on a signal", metadata: ["gracePeriod": "\(grace)"])
                        outcome.finish(await manager.shutdown(gracePeriod: grace))
                        return
                    }
                }
            }
            try? await gracefulShutdown()
            if outcome.claim() {
                // No signal started the shutdown: stop watching for one and shut down here.
                group.cancelAll()
                outcome.finish(await manager.shutdown(gracePeriod: grace))
            }
            // Else the signal's shutdown is under way in the child task: the group waits for it.
        }
    }

    /// Who shuts the manager down (the first to claim), and how it ended.
    private final class Outcome: Sendable {
        let claimed = Atomic<Bool>(false)
        let result = Lock<Bool?>(nil)
        func claim() -> Bool { !claimed.exchange(true, ordering: .acquiringAndReleasing) }
        func finish(_ value: Bool) { result.withLock { $0 = value } }
    }
}
