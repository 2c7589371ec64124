public import Foundation
public import Logging
import Metrics
import Synchronization

/// Fails loads from an origin that keeps failing, at once, for a while: a circuit
/// breaker per origin (scheme, host and port).
///
/// The failed-URL blocklist (``FailedURLBlocklist``) remembers URLs that failed
/// *permanently*; an origin that is down (connections refused, timeouts, 502,
/// 503, 504, 408, 429) fails *transiently* and is blocked nowhere, so every load of it waits up
/// to `loader.timeout` and holds a download slot meanwhile. On a server loading
/// URLs its users choose, a few hosts that never answer are enough to queue
/// everybody else's loads behind them. This breaker stops that:
///
/// - **Closed** (the normal state): loads go to the origin. Each failure that
///   says the origin cannot serve adds one to the origin's count; any other
///   answer (a 200, a 304, a 404, a 500) resets it. A 500, a 501 and the 5xx
///   other than 502–504 are answers about the URL asked, not the origin's
///   health: a server that answers them is up. They stay transient for the
///   load (it is not blocklisted), but a stranger who finds one URL of an origin
///   that answers 500 cannot close the origin for everybody with it.
/// - **Open**: after ``failureThreshold`` transient failures in a row, loads of
///   the origin fail at once with ``WebImageError/Code/originUnavailable`` for
///   ``cooldown``, without reaching the loader.
///   An origin that answers 429 or 503 with `Retry-After` opens at once, for
///   the pause it asked (at most ``maxCooldown``; a trial's answer too, instead
///   of the doubled cooldown): it said when to come back.
/// - **Half-open**: after the cooldown, one load goes through as a trial while
///   the others still fail at once. Its success closes the circuit; its failure
///   opens it again for twice the last cooldown (up to ``maxCooldown``).
///
/// Only origins with a failure count are remembered, at most ``capacity`` (past
/// it the one failing longest ago goes), so a week of hostile URLs cannot grow
/// it. URLs without a host (`file:`) never trip it. `.retryFailed` does not
/// bypass it: it is about the URL, this is about the origin.
///
/// Off unless configured: ``ImageManager/Configuration/originBreaker``, or
/// `loader.circuitBreaker.failures` and `loader.circuitBreaker.cooldown` in
/// configuration. Metrics: `webimage_origin_breaker_opened_total`,
/// `webimage_origin_breaker_rejected_total`.
public final class OriginCircuitBreaker: Sendable {
    /// The defaults of ``init(failureThreshold:cooldown:maxCooldown:capacity:logger:clock:)``.
    public static let defaultFailureThreshold = 5
    public static let defaultCooldown: Duration = .seconds(30)
    public static let defaultMaxCooldown: Duration = .seconds(300)

    /// Transient failures in a row that open an origin's circuit. Default 5.
    public let failureThreshold: Int
    /// How long an opened circuit refuses loads before a trial. Default 30 s.
    public let cooldown: Duration
    /// The longest cooldown after failed trials. Default 5 minutes.
    public let maxCooldown: Duration
    /// The most origins remembered at once. Default 10 000.
    public let capacity: Int
    private let clock: @Sendable () -> ContinuousClock.Instant
    private let logger: Logger
    private let opened = Counter(label: "webimage_origin_breaker_opened_total")
    private let rejected = Counter(label: "webimage_origin_breaker_rejected_total")

    private struct Circuit {
        var failures = 0
        var lastFailure: ContinuousClock.Instant
        /// When the circuit is open: when the next trial may go.
        var openUntil: ContinuousClock.Instant?
        var lastCooldown: Duration = .zero
        var trialInFlight = false
    }

    private let circuits = Lock<[String: Circuit]>([:])

    /// What ``admit(_:)`` lets through: the origin and whether this load is the
    /// half-open circuit's one trial. Hand it back to ``report(_:outcome:)``.
    public struct Admission: Sendable {
        public let origin: String
        public let isTrial: Bool
    }

    /// What a load told about its origin.
    public enum Outcome: Sendable, Equatable {
        /// The origin answered with something other than a transient failure.
        case answered
        /// A failure that says the origin cannot serve: refused, reset, timed
        /// out, 502, 503, 504, 408, 429.
        case failed
        /// The origin asked for a pause: a 429 or 503 with `Retry-After`. A
        /// transient failure that also opens the circuit at once, for the pause
        /// asked (at most ``OriginCircuitBreaker/maxCooldown``) — a polite client
        /// does not retry before then, and a fleet of them does not hammer an
        /// origin that said it is overloaded.
        case backOff(Duration)
        /// Nothing to say about the origin: cancelled, refused before sending, …
        case neutral
    }

    /// - Parameters:
    ///   - failureThreshold: transient failures in a row that open a circuit (at least 1).
    ///   - cooldown: how long an opened circuit refuses loads.
    ///   - maxCooldown: the longest cooldown after failed trials (at least `cooldown`).
    ///   - capacity: the most origins remembered at once.
    ///   - logger: where circuits opening and closing are logged.
    ///   - clock: the time, for tests.
    public init(failureThreshold: Int = defaultFailureThreshold, cooldown: Duration = defaultCooldown, maxCooldown: Duration = defaultMaxCooldown,
                capacity: Int = 10_000, logger: Logger = Logger(label: "webimage.breaker"),
                clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.failureThreshold = max(1, failureThreshold)
        self.cooldown = max(.zero, cooldown)
        self.maxCooldown = max(self.cooldown, maxCooldown)
        self.capacity = max(1, capacity)
        self.logger = logger
        self.clock = clock
    }

    /// The origin of a URL as the breaker counts it: `scheme://host:port`,
    /// lowercased, the port made explicit; nil for a URL without a host.
    public static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else { return nil }
        let port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
        return "\(scheme)://\(host):\(port)"
    }

    /// Lets a load of `url` go to its origin, or refuses it while the origin's
    /// circuit is open (or half-open with its trial in flight).
    /// - Returns: nil for a URL without an origin (nothing to report).
    /// - Throws: ``WebImageError/Code/originUnavailable`` (transient, so no
    ///   blocklist records it), with ``WebImageError/retryAfter`` set to the
    ///   cooldown left (nil while a trial is in flight: its end is unknown).
    public func admit(_ url: URL) throws -> Admission? {
        guard let origin = Self.origin(of: url) else { return nil }
        let now = clock()
        let verdict = circuits.withLock { circuits -> (trial: Bool, refusedFor: Duration?) in
            guard var circuit = circuits[origin], let openUntil = circuit.openUntil else { return (false, nil) }
            if now < openUntil { return (false, openUntil - now) }
            if circuit.trialInFlight { return (false, .zero) }
            circuit.trialInFlight = true
            circuits[origin] = circuit
            return (true, nil)
        }
        if let wait = verdict.refusedFor {
            rejected.increment()
            let when = wait > .zero ? "for another \(Self.describe(wait))" : "while a trial request finds out whether it is back"
            throw WebImageError(.originUnavailable, "\(origin) failed \(Self.times(failureThreshold)); its loads fail at once \(when) (\(url.absoluteString))",
                                isTransient: true, retryAfter: wait > .zero ? wait : nil)
        }
        return Admission(origin: origin, isTrial: verdict.trial)
    }

    /// Tells the breaker how a load it admitted went.
    public func report(_ admission: Admission, outcome: Outcome) {
        let now = clock()
        let event = circuits.withLock { circuits -> String? in
            switch outcome {
            case .answered:
                guard let circuit = circuits.removeValue(forKey: admission.origin) else { return nil }
                return circuit.openUntil == nil ? nil : "closed"
            case .neutral:
                if admission.isTrial { circuits[admission.origin]?.trialInFlight = false }
                return nil
            case .failed, .backOff:
                var circuit = circuits[admission.origin] ?? Circuit(lastFailure: now)
                if circuits[admission.origin] == nil, circuits.count >= capacity,
                   let oldest = circuits.min(by: { $0.value.lastFailure < $1.value.lastFailure }) {
                    circuits[oldest.key] = nil
                }
                circuit.failures += 1
                circuit.lastFailure = now
                var event: String?
                if admission.isTrial, circuit.trialInFlight {
                    circuit.lastCooldown = min(maxCooldown, circuit.lastCooldown * 2)
                    circuit.openUntil = now + circuit.lastCooldown
                    circuit.trialInFlight = false
                    event = "reopened"
                } else if circuit.openUntil == nil, circuit.failures >= failureThreshold {
                    circuit.lastCooldown = cooldown
                    circuit.openUntil = now + cooldown
                    event = "opened"
                }
                if case .backOff(let asked) = outcome, asked > .zero {
                    // The origin's word beats the count and the doubling: open now,
                    // for the pause it asked.
                    let pause = min(asked, maxCooldown)
                    if event == nil, circuit.openUntil == nil { event = "opened" }
                    circuit.openUntil = now + pause
                    circuit.lastCooldown = pause
                }
                circuits[admission.origin] = circuit
                return event
            }
        }
        guard let event else { return }
        if event == "opened" { opened.increment() }
        logger.log(level: event == "closed" ? .info : .warning, "origin circuit \(event)", metadata: ["origin": "\(admission.origin)"])
    }

    /// The error a load of `url` already admitted, and still queued, fails with
    /// when its origin's circuit has opened since; nil while it is closed or due a
    /// trial. Counted as a rejection, like a refused admission.
    public func refusal(for url: URL) -> WebImageError? {
        guard let origin = Self.origin(of: url) else { return nil }
        let now = clock()
        let wait = circuits.withLock { circuits -> Duration? in
            guard let openUntil = circuits[origin]?.openUntil, now < openUntil else { return nil }
            return openUntil - now
        }
        guard let wait else { return nil }
        rejected.increment()
        return WebImageError(.originUnavailable, "\(origin) failed \(Self.times(failureThreshold)) while \(url.absoluteString) waited for it; its loads fail at once for another \(Self.describe(wait))",
                             isTransient: true, retryAfter: wait)
    }

    /// Whether loads of `url`'s origin fail at once now (open, not yet due a trial).
    public func isOpen(for url: URL) -> Bool {
        guard let origin = Self.origin(of: url) else { return false }
        let now = clock()
        return circuits.withLock { circuits in circuits[origin]?.openUntil.map { now < $0 } ?? false }
    }

    /// Origins remembered: those with failures, open or not.
    public var count: Int { circuits.withLock { $0.count } }

    /// Closes every circuit and forgets every count.
    public func removeAll() { circuits.withLock { $0.removeAll() } }

    /// The outcome a loader's error means for its origin: a 429 or 503 that
    /// carried a `Retry-After` (``WebImageError/retryAfter``) asks for a pause;
    /// a 5xx other than 502, 503 and 504 is an answer about its URL.
    public static func outcome(of error: WebImageError) -> Outcome {
        if error.statusCode == 429 || error.statusCode == 503, let pause = error.retryAfter, pause > .zero { return .backOff(pause) }
        if let status = error.statusCode, (500...599).contains(status), !(502...504).contains(status) { return .answered }
        // The breaker's own refusal of a queued load says nothing new about the origin.
        // Nor does a library of this process that cannot be loaded (libcurl).
        if [.cancelled, .forbidden, .invalidURL, .shutDown, .originUnavailable, .libraryUnavailable].contains(error.code) { return .neutral }
        return error.isTransient ? .failed : .answered
    }

    /// The outcome an HTTP response means for its origin: that of the error
    /// ``WebImageError/httpStatus(_:url:retryAfter:now:)`` makes of it (a 429 or
    /// 503 with a `Retry-After` asks for a pause; 502, 503, 504, 408 and 429
    /// failed), and answered for a 2xx, a 304, and a 500 or any other 5xx.
    /// - Parameters:
    ///   - status: the response's HTTP status.
    ///   - retryAfter: its `Retry-After` header, if any.
    ///   - now: the time an HTTP-date `Retry-After` is measured from.
    public static func outcome(ofStatus status: Int, retryAfter: String? = nil, now: Date = Date()) -> Outcome {
        if (200..<300).contains(status) || status == 304 { return .answered }
        return outcome(of: WebImageError.httpStatus(status, url: "", retryAfter: retryAfter, now: now))
    }

    /// "once", "3 times in a row".
    private static func times(_ count: Int) -> String { count == 1 ? "once" : "\(count) times in a row" }

    private static func describe(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds >= 1 ? "\(Int(seconds.rounded(.up))) s" : "\(Int((seconds * 1000).rounded(.up))) ms"
    }
}
