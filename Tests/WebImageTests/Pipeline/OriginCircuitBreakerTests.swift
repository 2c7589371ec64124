import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage

/// A monotonic clock the test moves by hand.
final class ManualInstant: Sendable {
    private let start = ContinuousClock.now
    private let offset = Lock<Duration>(.zero)
    var source: @Sendable () -> ContinuousClock.Instant { { self.start + self.offset.withLock { $0 } } }
    func advance(_ duration: Duration) { offset.withLock { $0 += duration } }
}

@Suite("Origin circuit breaker")
struct OriginCircuitBreakerTests {
    let a = URL(string: "https://A.example/one.jpg")!
    let aOther = URL(string: "https://a.example:443/two.jpg")!
    let b = URL(string: "https://b.example/one.jpg")!

    @Test("origins: scheme, host and port, lowercased and made explicit; no host, no origin")
    func origins() throws {
        #expect(OriginCircuitBreaker.origin(of: a) == "https://a.example:443")
        #expect(OriginCircuitBreaker.origin(of: aOther) == OriginCircuitBreaker.origin(of: a))
        #expect(OriginCircuitBreaker.origin(of: URL(string: "http://a.example/x")!) == "http://a.example:80")
        #expect(OriginCircuitBreaker.origin(of: URL(string: "http://a.example:8080/x")!) == "http://a.example:8080")
        #expect(OriginCircuitBreaker.origin(of: URL(fileURLWithPath: "/srv/a.jpg")) == nil)
        let breaker = OriginCircuitBreaker(failureThreshold: 1)
        #expect(try breaker.admit(URL(fileURLWithPath: "/srv/a.jpg")) == nil, "file: URLs are never refused")
    }

    @Test("N transient failures in a row open the circuit for the cooldown; an answer in between resets the count")
    func opens() throws {
        let clock = ManualInstant()
        let breaker = OriginCircuitBreaker(failureThreshold: 3, cooldown: .seconds(30), clock: clock.source)
        for _ in 0..<2 { breaker.report(try #require(try breaker.admit(a)), outcome: .failed) }
        breaker.report(try #require(try breaker.admit(a)), outcome: .answered)
        #expect(breaker.count == 0, "a healthy origin is not remembered")
        for _ in 0..<2 { breaker.report(try #require(try breaker.admit(a)), outcome: .failed) }
        breaker.report(try #require(try breaker.admit(a)), outcome: .neutral)
        #expect(!breaker.isOpen(for: a), "two failures, then a cancellation: still closed")
        breaker.report(try #require(try breaker.admit(aOther)), outcome: .failed)
        #expect(breaker.isOpen(for: a), "the third failure in a row, on another path of the origin, opens it")

        let refused = #expect(throws: WebImageError.self) { try breaker.admit(a) }
        #expect(refused?.code == .originUnavailable && refused?.isTransient == true)
        #expect(refused?.message.contains("https://a.example:443") == true && refused?.message.contains("30 s") == true, "\(String(describing: refused))")
        #expect(refused?.retryAfter == .seconds(30), "the cooldown left, for a Retry-After")
        #expect(try breaker.admit(b) != nil, "other origins are not affected")
        clock.advance(.seconds(29))
        let later = #expect(throws: WebImageError.self) { try breaker.admit(a) }
        #expect(later?.retryAfter == .seconds(1))
    }

    @Test("loads admitted before the circuit opened, still queued, are refused once it opens (the manager hands the loader this check)")
    func queuedRefusal() throws {
        let clock = ManualInstant()
        let breaker = OriginCircuitBreaker(failureThreshold: 2, cooldown: .seconds(30), clock: clock.source)
        let queued = try #require(try breaker.admit(a))
        #expect(breaker.refusal(for: a) == nil)
        for _ in 0..<2 { breaker.report(try #require(try breaker.admit(a)), outcome: .failed) }
        let refusal = try #require(breaker.refusal(for: aOther))
        #expect(refusal.code == .originUnavailable && refusal.retryAfter == .seconds(30))
        #expect(breaker.refusal(for: b) == nil)
        #expect(OriginCircuitBreaker.outcome(of: refusal) == .neutral, "a refusal is no new failure of the origin")
        breaker.report(queued, outcome: OriginCircuitBreaker.outcome(of: refusal))
        clock.advance(.seconds(31))
        #expect(breaker.refusal(for: a) == nil, "due a trial: a queued load may go")
    }

    @Test("the manager gives its loader the breaker's check for queued loads")
    func managerWiresRefusal() async throws {
        let loader = TestLoader()
        loader.serve("test://host/a.timg", data: TestCoder.encode(width: 2, height: 2))
        var configuration = ImageManager.Configuration()
        configuration.coders.register(TestCoder(), name: "test")
        configuration.loaders.register(loader, name: "test", schemes: ["test"])
        configuration.originBreaker = OriginCircuitBreaker(failureThreshold: 1)
        _ = try await ImageManager(configuration: configuration).loadImage(with: URL(string: "test://host/a.timg")!)
        let check = try #require(loader.requests.first?.stillAdmitted)
        #expect(check() == nil)
    }

    @Test("after the cooldown one trial goes; its success closes, its failure reopens for twice as long, up to the maximum")
    func halfOpen() throws {
        let clock = ManualInstant()
        let breaker = OriginCircuitBreaker(failureThreshold: 1, cooldown: .seconds(10), maxCooldown: .seconds(25), clock: clock.source)
        breaker.report(try #require(try breaker.admit(a)), outcome: .failed)
        clock.advance(.seconds(10))
        let trial = try #require(try breaker.admit(a))
        #expect(trial.isTrial)
        let waiting = #expect(throws: WebImageError.self) { try breaker.admit(a) }
        #expect(waiting?.message.contains("trial") == true, "only one trial at a time")
        #expect(waiting?.retryAfter == nil, "a trial's end is unknown")
        breaker.report(trial, outcome: .failed)
        clock.advance(.seconds(19))
        #expect(throws: WebImageError.self, "reopened for 20 s") { try breaker.admit(a) }
        clock.advance(.seconds(1))
        breaker.report(try #require(try breaker.admit(a)), outcome: .failed)
        clock.advance(.seconds(24))
        #expect(throws: WebImageError.self, "then 25 s, the maximum, not 40") { try breaker.admit(a) }
        clock.advance(.seconds(1))
        let cancelled = try #require(try breaker.admit(a))
        breaker.report(cancelled, outcome: .neutral)
        let next = try #require(try breaker.admit(a))
        #expect(next.isTrial, "a cancelled trial lets the next load try")
        breaker.report(next, outcome: .answered)
        #expect(breaker.count == 0 && !breaker.isOpen(for: a))
        let after = try #require(try breaker.admit(a))
        #expect(!after.isTrial, "closed again")
        breaker.report(after, outcome: .failed)
        #expect(breaker.isOpen(for: a), "and a new run of failures opens it with the first cooldown again")
        clock.advance(.seconds(10))
        #expect(try breaker.admit(a)?.isTrial == true)
    }

    @Test("Retry-After: delta-seconds or an HTTP date; anything else, past or zero is no pause")
    func retryAfterParsing() {
        let now = Date(timeIntervalSince1970: 1_792_000_000)   // 2026-10-15T... GMT
        #expect(WebImageError.retryAfter(parsing: "120", now: now) == .seconds(120))
        #expect(WebImageError.retryAfter(parsing: " 5 ", now: now) == .seconds(5))
        #expect(WebImageError.retryAfter(parsing: "99999999", now: now) == .seconds(86_400), "at most a day")
        #expect(WebImageError.retryAfter(parsing: String(repeating: "1", count: 65), now: now) == nil)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let inNinety = formatter.string(from: now.addingTimeInterval(90))
        #expect(WebImageError.retryAfter(parsing: inNinety, now: now) == .seconds(90), "\(inNinety)")
        for bad in ["0", "-5", "", "soon", "1.5", "99999999999999999999999", "12 GMT", formatter.string(from: now.addingTimeInterval(-60)),
                    "Wed, 32 Oct 2026 07:28:00 GMT", "\u{0}120"] {
            #expect(WebImageError.retryAfter(parsing: bad, now: now) == nil, "\(bad)")
        }
    }

    @Test("an origin that asks for a pause (429 or 503 with Retry-After) is open at once for it, at most the longest cooldown")
    func backOff() throws {
        let clock = ManualInstant()
        let breaker = OriginCircuitBreaker(failureThreshold: 5, cooldown: .seconds(30), maxCooldown: .seconds(300), clock: clock.source)
        breaker.report(try #require(try breaker.admit(a)), outcome: .backOff(.seconds(60)))
        let refused = #expect(throws: WebImageError.self) { try breaker.admit(a) }
        #expect(refused?.code == .originUnavailable && refused?.retryAfter == .seconds(60), "one answer was enough: \(String(describing: refused))")
        clock.advance(.seconds(60))
        let trial = try #require(try breaker.admit(a))
        #expect(trial.isTrial)
        breaker.report(trial, outcome: .backOff(.seconds(3600)))
        #expect((try? breaker.admit(a)) == nil)
        clock.advance(.seconds(299))
        #expect(breaker.isOpen(for: a), "an hour asked, five minutes (the longest cooldown) given")
        clock.advance(.seconds(1))
        let second = try #require(try breaker.admit(a))
        breaker.report(second, outcome: .backOff(.seconds(10)))
        clock.advance(.seconds(10))
        #expect(!breaker.isOpen(for: a), "a trial's Retry-After beats the doubled cooldown: ten seconds asked, ten given")
        breaker.report(try #require(try breaker.admit(a)), outcome: .answered)
        #expect(breaker.count == 0)
        // A status without Retry-After is one failure among five; with it, a pause.
        #expect(OriginCircuitBreaker.outcome(ofStatus: 503) == .failed)
        #expect(OriginCircuitBreaker.outcome(ofStatus: 429, retryAfter: "7") == .backOff(.seconds(7)))
        #expect(OriginCircuitBreaker.outcome(ofStatus: 503, retryAfter: "soon") == .failed)
        #expect(OriginCircuitBreaker.outcome(ofStatus: 504, retryAfter: "7") == .failed, "only 429 and 503 ask for a pause")
        // The origin's health, not one URL's: 502-504 count; a 500, 501 or any other 5xx is an answer about the URL.
        for status in [502, 503, 504, 408, 429] { #expect(OriginCircuitBreaker.outcome(ofStatus: status) == .failed, "\(status)") }
        for status in [500, 501, 505, 507, 511, 599] { #expect(OriginCircuitBreaker.outcome(ofStatus: status) == .answered, "\(status)") }
        #expect(OriginCircuitBreaker.outcome(ofStatus: 500, retryAfter: "7") == .answered)
        #expect(OriginCircuitBreaker.outcome(ofStatus: 200, retryAfter: "7") == .answered)
        // A loader's error carries it the same way.
        let overloaded = WebImageError.httpStatus(503, url: "https://a.example/x", retryAfter: "45")
        #expect(overloaded.retryAfter == .seconds(45) && overloaded.isTransient && overloaded.message.contains("Retry-After 45 s"))
        #expect(OriginCircuitBreaker.outcome(of: overloaded) == .backOff(.seconds(45)))
        #expect(WebImageError.httpStatus(500, url: "https://a.example/x", retryAfter: "45").retryAfter == nil)
        #expect(OriginCircuitBreaker.outcome(of: WebImageError.httpStatus(503, url: "https://a.example/x")) == .failed)
        // A library of this process that cannot be loaded (libcurl) says nothing of the origin.
        #expect(OriginCircuitBreaker.outcome(of: WebImageError(.libraryUnavailable, "libcurl cannot be loaded")) == .neutral)
    }

    @Test("with the manager: an origin's 503 asking a longer pause than maxCooldown is reported with maxCooldown, as the refusals after it are")
    func longPauseCapped() async throws {
        let clock = ManualInstant()
        let breaker = OriginCircuitBreaker(cooldown: .seconds(30), maxCooldown: .seconds(300), clock: clock.source)
        let h = Harness { $0.originBreaker = breaker }
        h.loader.serve("test://host/busy.timg", .init(data: Data("busy".utf8), status: 503, headers: ["retry-after": "3600"]))
        let first = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("busy.timg")) }
        #expect(first?.statusCode == 503 && first?.retryAfter == .seconds(300), "\(String(describing: first))")
        let next = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("busy.timg"), options: .retryFailed) }
        #expect(next?.code == .originUnavailable && next?.retryAfter == .seconds(300), "\(String(describing: next))")
        // The same when the loader throws the status (as the HTTP loader does) rather than returning it.
        let thrown = Harness { $0.originBreaker = OriginCircuitBreaker(cooldown: .seconds(30), maxCooldown: .seconds(300), clock: clock.source) }
        thrown.loader.serve("test://host/busy.timg", .init(data: Data(), error: WebImageError.httpStatus(429, url: "test://host/busy.timg", retryAfter: "3600")))
        let thrownFirst = await #expect(throws: WebImageError.self) { try await thrown.manager.loadImage(with: thrown.url("busy.timg")) }
        #expect(thrownFirst?.statusCode == 429 && thrownFirst?.retryAfter == .seconds(300), "\(String(describing: thrownFirst))")
        await thrown.manager.shutdown()
        // Without a breaker the origin's own word (at most a day) is passed on.
        let plain = Harness { $0.originBreaker = nil }
        plain.loader.serve("test://host/busy.timg", .init(data: Data("busy".utf8), status: 503, headers: ["retry-after": "3600"]))
        let unbroken = await #expect(throws: WebImageError.self) { try await plain.manager.loadImage(with: plain.url("busy.timg")) }
        #expect(unbroken?.retryAfter == .seconds(3600))
        await h.manager.shutdown()
        await plain.manager.shutdown()
    }

    @Test("it remembers at most its capacity of origins, dropping the one failing longest ago")
    func bounded() throws {
        let clock = ManualInstant()
        let breaker = OriginCircuitBreaker(failureThreshold: 2, capacity: 100, clock: clock.source)
        for i in 0..<1000 {
            breaker.report(try #require(try breaker.admit(URL(string: "https://h\(i).example/x")!)), outcome: .failed)
            clock.advance(.milliseconds(1))
        }
        #expect(breaker.count == 100)
        breaker.report(try #require(try breaker.admit(URL(string: "https://h999.example/x")!)), outcome: .failed)
        #expect(breaker.isOpen(for: URL(string: "https://h999.example/x")!), "recent ones are kept")
        breaker.report(try #require(try breaker.admit(URL(string: "https://h0.example/x")!)), outcome: .failed)
        #expect(!breaker.isOpen(for: URL(string: "https://h0.example/x")!), "the oldest was forgotten, its count started again")
        breaker.removeAll()
        #expect(breaker.count == 0 && !breaker.isOpen(for: URL(string: "https://h999.example/x")!))
    }

    @Test("with the manager: a dead origin fails at once after the threshold, without reaching the loader; .retryFailed does not bypass it")
    func manager() async throws {
        let clock = ManualInstant()
        let breaker = OriginCircuitBreaker(failureThreshold: 2, cooldown: .seconds(30), clock: clock.source)
        let h = Harness { $0.originBreaker = breaker }
        for name in ["down-1.timg", "down-2.timg"] {
            h.loader.serve("test://host/\(name)", .init(data: Data(), error: WebImageError(.timedOut, "no answer", isTransient: true)))
        }
        h.loader.serve("test://host/fine.timg", data: TestCoder.encode(width: 2, height: 2))
        for name in ["down-1.timg", "down-2.timg"] {
            let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url(name)) }
            #expect(error?.code == .timedOut)
        }
        #expect(h.loader.requestCount == 2)
        for options: ImageOptions in [[], .retryFailed] {
            let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("fine.timg"), options: options) }
            #expect(error?.code == .originUnavailable)
        }
        #expect(h.loader.requestCount == 2, "the origin was not asked while its circuit was open")
        #expect(h.manager.blocklist.blockingError(for: "test://host/fine.timg") == nil, "an open circuit blocks no URL")
        clock.advance(.seconds(30))
        let trial = try await h.manager.loadImage(with: h.url("fine.timg"))
        #expect(trial.image?.pixelSize == PixelSize(2) && h.loader.requestCount == 3)
        #expect(!breaker.isOpen(for: h.url("down-1.timg")) && breaker.count == 0, "the trial's success closed it")
        await h.manager.shutdown()
    }
}
