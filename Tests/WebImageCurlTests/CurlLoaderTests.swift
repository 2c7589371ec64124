import Foundation
import WebImageTestSupport
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage
import WebImageCurl
import WebImageTesting

/// Every test starts its own server on a free loopback port.
func withServer(_ body: (TestHTTPServer) async throws -> Void) async throws {
    let server = try await TestHTTPServer.start()
    do { try await body(server) } catch {
        await server.shutdown()
        throw error
    }
    await server.shutdown()
}


func load(_ loader: CurlLoader, _ url: URL, _ configure: (inout LoadRequest) -> Void = { _ in }) async throws -> LoadResponse {
    var request = LoadRequest(url: url)
    configure(&request)
    return try await loader.load(request) { _ in }
}

@Suite("CurlLoader against a real HTTP server", .timeLimit(.minutes(TestTiming.scale > 1 ? 8 : 2)))
struct CurlLoaderTests {
    @Test("passes LoaderConformance")
    func conformance() async throws {
        try await withServer { server in
            // The slow load takes 20 s: the check cancels it after 200 ms, and a loaded
            // CI machine can starve the checking task for seconds before it gets to
            // cancel (with 3 s, the load once finished first).
            try await LoaderConformance(loader: CurlLoader(configuration: .init(timeout: .seconds(60))), fixtures: .init(
                existing: server.url("/bytes/4096"), existingData: TestHTTPServer.bytes(4096),
                missing: server.url("/status/404"), slow: server.url("/slow/20000/c")
            )).run()
        }
    }

    @Test("a loader starts its driver thread and libcurl with its first transfer, not when it is made")
    func startsOnFirstTransfer() async throws {
        try await withServer { server in
            let loader = CurlLoader()
            #expect(!loader.isStarted, "a process that only reads files must not pay for curl_global_init")
            #expect(loader.longestDriverStep.duration == .zero)
            let response = try await load(loader, server.url("/bytes/100"))
            #expect(response.data == TestHTTPServer.bytes(100))
            #expect(loader.isStarted)
            // The driver times its steps, which a failing test reports.
            #expect(await eventually { loader.longestDriverStep.duration > .zero && !loader.longestDriverStep.step.isEmpty })
        }
    }

    @Test("200 with and without Content-Length, chunked, gzip")
    func bodies() async throws {
        try await withServer { server in
            let loader = CurlLoader()
            #expect(try await load(loader, server.url("/bytes/70000")).data == TestHTTPServer.bytes(70000))
            #expect(try await load(loader, server.url("/chunked/70000")).data == TestHTTPServer.bytes(70000))
            let gzip = try await load(loader, server.url("/gzip"))
            #expect(!TestHTTPServer.gzipBody.isEmpty && gzip.data == TestHTTPServer.bytes(5000), "decoded from gzip")
            #expect(server.stats.withLock { $0.requests.last?.headers["accept-encoding"] }?.contains("gzip") == true)
        }
    }

    @Test("304 with ETag; 404 permanent notFound; 500 transient")
    func statuses() async throws {
        try await withServer { server in
            let loader = CurlLoader()
            let first = try await load(loader, server.url("/etag"))
            #expect(first.statusCode == 200 && first.etag == "\"v1\"" && first.lastModified != nil)
            let again = try await load(loader, server.url("/etag")) { $0.ifNoneMatch = "\"v1\"" }
            #expect(again.isNotModified && again.data.isEmpty)
            let missing = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/status/404")) }
            #expect(missing?.code == .notFound && missing?.isTransient == false && missing?.statusCode == 404)
            let broken = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/status/500")) }
            #expect(broken?.code == .badStatus && broken?.isTransient == true && broken?.statusCode == 500)
            let forbidden = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/status/403")) }
            #expect(forbidden?.isTransient == false)
        }
    }

    @Test("redirects: 5 followed, 6 refused, file:// refused, loops stopped")
    func redirects() async throws {
        try await withServer { server in
            let loader = CurlLoader()
            let five = try await load(loader, server.url("/redirect/5"))
            #expect(five.data == TestHTTPServer.bytes(100) && five.url.path == "/bytes/100")
            let six = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/redirect/6")) }
            #expect(six?.code == .badStatus && six?.isTransient == false && six?.message.contains("redirected more than 5") == true)
            let file = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/redirect-file")) }
            #expect(file?.code == .forbidden, "\(String(describing: file))")
            let loop = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/loop")) }
            #expect(loop?.code == .badStatus)
        }
    }

    @Test("the caller's URL policy judges every redirect hop: an allowed origin cannot lead to a host that is not allowed")
    func policyAtEveryHop() async throws {
        try await withServer { allowed in
            try await withServer { other in
                let loader = CurlLoader()
                let port = allowed.port
                let policy: URLPolicy = { $0.port == port ? nil : "is not on the allow-list" }
                let target = allowed.url("/redirect-to/127.0.0.1:\(other.port)/bytes/100")
                let refused = await #expect(throws: WebImageError.self) { try await load(loader, target) { $0.urlPolicy = policy } }
                #expect(refused?.code == .forbidden && refused?.message.contains("redirected to http://127.0.0.1:\(other.port)/bytes/100, which is not on the allow-list") == true,
                        "\(String(describing: refused))")
                #expect(other.requestCount(path: "/bytes/100") == 0, "the refused hop is never requested")
                // Hops within the allowed origin are followed, at most five, as without a policy.
                let within = try await load(loader, allowed.url("/redirect/3")) { $0.urlPolicy = policy }
                #expect(within.data == TestHTTPServer.bytes(100))
                let six = await #expect(throws: WebImageError.self) { try await load(loader, allowed.url("/redirect/6")) { $0.urlPolicy = policy } }
                #expect(six?.code == .badStatus)
                // A redirect to file:// (no host) is another scheme: refused, not a bad answer.
                let file = await #expect(throws: WebImageError.self) { try await load(loader, allowed.url("/redirect-file")) { $0.urlPolicy = policy } }
                #expect(file?.code == .forbidden && file?.message.contains("another scheme") == true, "\(String(describing: file))")
                // The first URL is judged too.
                let first = await #expect(throws: WebImageError.self) { try await load(loader, other.url("/bytes/10")) { $0.urlPolicy = policy } }
                #expect(first?.code == .forbidden)
                // Without a policy the same redirect is followed.
                #expect(try await load(loader, target).data == TestHTTPServer.bytes(100))
            }
        }
    }

    @Test("an origin that answers without a status line (HTTP/0.9, raw image bytes, garbage) is loadFailed saying so, not a refused redirect")
    func notHTTP() async throws {
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data(repeating: 7, count: 200)
        for reply in [Data("GARBAGE\r\n\r\n".utf8), jpeg] {
            let origin = try RawHTTP.RawReplier(reply: reply)
            defer { origin.stop() }
            let error = await #expect(throws: WebImageError.self) { try await load(CurlLoader(), URL(string: "http://127.0.0.1:\(origin.port)/a.jpg")!) }
            #expect(error?.code == .loadFailed && error?.message.contains("did not answer in HTTP") == true && error?.isTransient == false,
                    "\(String(describing: error))")
        }
    }

    @Test("two Content-Length headers that differ are loadFailed naming both (RFC 9112 framing), not a body cut at one of them; the same value twice is one length")
    func conflictingLengths() async throws {
        let conflicting = try RawHTTP.RawReplier(reply: Data("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 6\r\n\r\nabcdef".utf8))
        defer { conflicting.stop() }
        let error = await #expect(throws: WebImageError.self) { try await load(CurlLoader(), URL(string: "http://127.0.0.1:\(conflicting.port)/a.jpg")!) }
        #expect(error?.code == .loadFailed && error?.isTransient == false && error?.message.contains("3 and 6") == true, "\(String(describing: error))")
        let repeated = try RawHTTP.RawReplier(reply: Data("HTTP/1.1 200 OK\r\nContent-Length: 6\r\ncontent-length: 6\r\n\r\nabcdef".utf8))
        defer { repeated.stop() }
        #expect(try await load(CurlLoader(), URL(string: "http://127.0.0.1:\(repeated.port)/a.jpg")!).data == Data("abcdef".utf8))
    }

    @Test("a failure says what curl saw (its error buffer), not only its class: headers over curl's limit, a refused port")
    func curlsOwnAccount() async throws {
        let padding = (0..<400).map { "X-Pad-\($0): \(String(repeating: "a", count: 1000))\r\n" }.joined()
        let origin = try RawHTTP.RawReplier(reply: Data("HTTP/1.1 200 OK\r\n\(padding)Content-Length: 3\r\n\r\nabc".utf8))
        defer { origin.stop() }
        let headers = await #expect(throws: WebImageError.self) { try await load(CurlLoader(), URL(string: "http://127.0.0.1:\(origin.port)/a.jpg")!) }
        #expect(headers?.code == .loadFailed && headers?.message.contains("Too large response headers") == true, "\(String(describing: headers))")
        // A port nobody listens on: curl names the address and port it tried.
        let closed = try RawHTTP.RawReplier(reply: Data())
        let port = closed.port
        closed.stop()
        let refused = await #expect(throws: WebImageError.self) { try await load(CurlLoader(), URL(string: "http://127.0.0.1:\(port)/a.jpg")!) }
        #expect(refused?.code == .loadFailed && refused?.message.contains("127.0.0.1 port \(port)") == true, "\(String(describing: refused))")
    }

    @Test("a server that stalls after headers times out within its bound")
    func stall() async throws {
        try await withServer { server in
            let loader = CurlLoader(configuration: .init(timeout: .seconds(1)))
            let started = ContinuousClock.now
            let error = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/stall")) }
            let elapsed = ContinuousClock.now - started
            #expect(error?.code == .timedOut && error?.isTransient == true)
            // Not before the bound; and it does end (the server never does). The upper
            // bound is generous: a busy machine once took over 5 s to report a 1 s timeout.
            #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(60), "took \(elapsed)")
        }
    }

    @Test("over the size limit: stopped early; a truncated body is an error")
    func sizeLimits() async throws {
        try await withServer { server in
            // A timeout far from anything this test waits for: a truncated body must
            // be loadFailed however slowly a busy machine runs the server.
            let loader = CurlLoader(configuration: .init(timeout: .seconds(300), maxResponseSize: 1 << 20))
            let declared = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/big")) }
            #expect(declared?.code == .tooLarge && declared?.isTransient == false)
            let streamed = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/big-chunked")) }
            #expect(streamed?.code == .tooLarge)
            let perRequest = await #expect(throws: WebImageError.self) {
                try await load(loader, server.url("/bytes/5000")) { $0.maxResponseSize = 1000 }
            }
            #expect(perRequest?.code == .tooLarge)
            let truncated = await #expect(throws: WebImageError.self) { try await load(loader, server.url("/truncated")) }
            #expect(truncated?.code == .loadFailed, "\(String(describing: truncated)); the driver's longest step: \(loader.longestDriverStep); the origin: \(server.timeline)")
        }
    }

    @Test("200 concurrent requests with 6 allowed: never more than 6 at the server")
    func concurrencyLimit() async throws {
        try await withServer { server in
            let loader = CurlLoader(configuration: .init(maxConcurrentDownloads: 6))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask { _ = try await load(loader, server.url("/slow/20/\(index)")) }
                }
                try await group.waitForAll()
            }
            let stats = server.stats.withLock { $0 }
            #expect(stats.arrivals.count == 200)
            #expect(stats.maxInFlight <= 6 && stats.maxInFlight >= 5, "max in flight \(stats.maxInFlight)")
        }
    }

    @Test("FIFO and LIFO order observed at the server", arguments: [CurlLoader.Order.fifo, .lifo])
    func order(_ order: CurlLoader.Order) async throws {
        try await withServer { server in
            var configuration = CurlLoader.Configuration(maxConcurrentDownloads: 1, order: order)
            configuration.timeout = .seconds(90)
            let loader = CurlLoader(configuration: configuration)
            // The first transfer holds the only slot until the gate opens, however slow the machine.
            var tasks = [Task { try await load(loader, server.url("/gate/first")) }]
            #expect(await eventually { !server.stats.withLock { $0.arrivals.isEmpty } })
            for index in 0..<5 {
                tasks.append(Task { try await load(loader, server.url("/slow/10/\(index)")) })
                // Queued in submission order: wait (boundedly) until the loader holds this one.
                #expect(await eventually { loader.statistics.queued >= index + 1 })
            }
            #expect(loader.statistics.queued == 5)
            server.openGate()
            for task in tasks { _ = try await task.value }
            let arrivals = server.stats.withLock { $0.arrivals }
            #expect(arrivals == ["first"] + (order == .fifo ? ["0", "1", "2", "3", "4"] : ["4", "3", "2", "1", "0"]))
        }
    }

    @Test("an origin that never answers holds maxConcurrentDownloadsPerHost slots, not all: other origins' loads go on")
    func perHostLimit() async throws {
        try await withServer { stalled in
            try await withServer { other in
                var configuration = CurlLoader.Configuration(maxConcurrentDownloads: 4)
                configuration.maxConcurrentDownloadsPerHost = 2
                configuration.timeout = .seconds(90)
                let loader = CurlLoader(configuration: configuration)
                let held = (0..<5).map { index in Task { try await load(loader, stalled.url("/gate/\(index)")) } }
                #expect(await eventually { loader.statistics.active == 2 && loader.statistics.queued == 3 })
                #expect(loader.statistics.active == 2 && loader.statistics.queued == 3, "two run, three wait for their origin")
                // The other origin (another port: another host key) gets the two slots left.
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<6 { group.addTask { try await load(loader, other.url("/slow/10/\(index)")).statusCode } }
                    for try await status in group { #expect(status == 200) }
                }
                #expect(other.stats.withLock { $0.arrivals.count } == 6, "served while the stalled origin held its two slots")
                #expect(stalled.stats.withLock { $0.arrivals.count } == 2, "still two at the stalled origin")
                // A transfer waiting for its origin can be cancelled.
                held[4].cancel()
                let cancelled = await #expect(throws: WebImageError.self) { try await held[4].value }
                #expect(cancelled?.code == .cancelled)
                stalled.openGate()
                for task in held.prefix(4) { #expect(try await task.value.statusCode == 200) }
                #expect(stalled.stats.withLock { $0.arrivals.count } == 4, "the cancelled one never reached the origin")
                #expect(loader.statistics.queued == 0 && loader.statistics.active == 0)
            }
        }
    }

    /// Four slots, one per origin, FIFO: the per-origin queue's tests.
    func oneSlotPerOrigin(timeout: Duration) -> CurlLoader {
        var configuration = CurlLoader.Configuration(maxConcurrentDownloads: 4, timeout: timeout, order: .fifo)
        configuration.maxConcurrentDownloadsPerHost = 1
        return CurlLoader(configuration: configuration)
    }

    @Test("a transfer that waits its whole timeout for its origin's busy slots fails as timed out, and never reaches the origin")
    func perHostWaitIsBounded() async throws {
        try await withServer { stalled in
            let loader = oneSlotPerOrigin(timeout: .seconds(90))
            let holder = Task { try await load(loader, stalled.url("/gate/holder")) }
            // Running, and at the origin: the check below must not race its arrival.
            #expect(await eventually { loader.statistics.active == 1 && stalled.arrivalCount == 1 })
            let waiting = await #expect(throws: WebImageError.self) {
                try await load(loader, stalled.url("/gate/waiter")) { $0.timeout = .milliseconds(300) }
            }
            #expect(waiting?.code == .timedOut && waiting?.message.contains("download slot") == true, "\(String(describing: waiting))")
            #expect(stalled.stats.withLock { $0.arrivals } == ["holder"])
            #expect(loader.statistics.queued == 0)
            stalled.openGate()
            let holderStatus = try await holder.value.statusCode
            #expect(holderStatus == 200)
        }
    }

    @Test("a transfer held for its origin fails at once when the caller stops admitting it (its origin's circuit opened), unstarted")
    func heldTransferRefusedWhenCircuitOpens() async throws {
        try await withServer { stalled in
            let loader = oneSlotPerOrigin(timeout: .seconds(90))
            let holder = Task { try await load(loader, stalled.url("/gate/holder")) }
            // Running, and at the origin: the check at the end must not race its arrival.
            #expect(await eventually { loader.statistics.active == 1 && stalled.arrivalCount == 1 })
            let open = Atomic<Bool>(false)
            let admitted: @Sendable () -> WebImageError? = {
                open.load(ordering: .relaxed) ? WebImageError(.originUnavailable, "the circuit opened", isTransient: true) : nil
            }
            let waiter = Task { try await load(loader, stalled.url("/gate/waiter")) { $0.stillAdmitted = admitted } }
            #expect(await eventually { loader.statistics.queued == 1 })
            let openedAt = ContinuousClock.now
            open.store(true, ordering: .relaxed)
            let refused = await #expect(throws: WebImageError.self) { try await waiter.value }
            #expect(refused?.code == .originUnavailable, "\(String(describing: refused))")
            #expect(ContinuousClock.now - openedAt < .seconds(60), "within the driver's next wake (1 s), not the 90 s timeout")
            #expect(stalled.stats.withLock { $0.arrivals } == ["holder"], "the refused transfer never reached the origin")
            stalled.openGate()
            let holderStatus = try await holder.value.statusCode
            #expect(holderStatus == 200)
        }
    }

    @Test("an origin that keeps answering serves a queue that takes longer than one timeout to drain")
    func perHostWaitCountsProgress() async throws {
        try await withServer { server in
            // One slot, 400 ms a request, a 2 s timeout: the eighth waits 2.8 s for
            // its slot, yet the origin finished a transfer every 400 ms. A wait bounded
            // from when a transfer was queued failed the last ones; a busy origin is
            // not a stalled one (a burst of thumbnails of one site is the common case).
            // The cap of four timeouts (8 s) is almost three times the drain.
            let loader = oneSlotPerOrigin(timeout: .seconds(2))
            let started = ContinuousClock.now
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<8 { group.addTask { try await load(loader, server.url("/slow/400/\(index)")).statusCode } }
                for try await status in group { #expect(status == 200) }
            }
            #expect(ContinuousClock.now - started > .seconds(2), "one at a time: the queue outlasted the timeout")
            #expect(server.stats.withLock { $0.arrivals.count } == 8)
        }
    }

    @Test("an origin slower than the loads arriving for it: a held transfer gives up after four of its timeouts in all")
    func perHostWaitIsCapped() async throws {
        try await withServer { server in
            // One slot, 250 ms a request, a 4 s timeout: the origin never stalls for a
            // timeout, but 80 loads take 20 s to drain; from about the 65th on they
            // would wait past the 16 s cap. The timeout is sixteen requests long, so
            // that an origin slowed by a busy machine (a 250 ms answer took over 2 s
            // beside two CPU burners and the whole suite) is still not a stalled one.
            // (Both scaled by TestTiming under a sanitizer.)
            let loader = oneSlotPerOrigin(timeout: TestTiming.scaled(.seconds(4)))
            let delay = TestTiming.milliseconds(250)
            let first = Task { try await load(loader, server.url("/slow/\(delay)/first")) }
            // Its arrival, not `active == 1`: on a busy machine the 250 ms transfer
            // can start and finish between two polls, and active is 0 again.
            #expect(await eventually { server.stats.withLock { $0.arrivals.contains("first") } })
            let rest = (1..<80).map { index in Task { try await load(loader, server.url("/slow/\(delay)/\(index)")) } }
            let firstStatus = try await first.value.statusCode
            #expect(firstStatus == 200)
            let last = await #expect(throws: WebImageError.self) { try await rest[78].value }
            #expect(last?.code == .timedOut && last?.message.contains("too busy") == true, "\(String(describing: last))")
            for task in rest { _ = try? await task.value }
            #expect(!server.stats.withLock { $0.arrivals }.contains("79"), "the last never reached the origin")
            #expect(loader.statistics.queued == 0 && loader.statistics.active == 0)
        }
    }

    @Test("high priority jumps the queue")
    func priority() async throws {
        try await withServer { server in
            var configuration = CurlLoader.Configuration(maxConcurrentDownloads: 1)
            configuration.timeout = .seconds(90)
            let loader = CurlLoader(configuration: configuration)
            var tasks = [Task { try await load(loader, server.url("/gate/first")) }]
            #expect(await eventually { !server.stats.withLock { $0.arrivals.isEmpty } })
            let priorities: [(String, LoadRequest.Priority)] = [("low", .low), ("normal", .normal), ("high", .high)]
            for (index, (name, priority)) in priorities.enumerated() {
                tasks.append(Task { try await load(loader, server.url("/slow/10/\(name)")) { $0.priority = priority } })
                #expect(await eventually { loader.statistics.queued >= index + 1 })
            }
            #expect(loader.statistics.queued == 3)
            server.openGate()
            for task in tasks { _ = try await task.value }
            #expect(server.stats.withLock { $0.arrivals } == ["first", "high", "normal", "low"])
        }
    }

    @Test("queued transfers start as soon as the running ones finish, not after the poll timeout")
    func noStallBetweenBatches() async throws {
        try await withServer { server in
            // With one slot, every transfer finishes alone; a driver that slept in
            // curl_multi_poll after each would leave about a second between every two
            // finishes. The median gap says so whatever else the machine does: a
            // pause of the whole machine (CI saw one of 16 s) widens a gap or two,
            // not the median.
            let loader = CurlLoader(configuration: .init(maxConcurrentDownloads: 1))
            let times = try await withThrowingTaskGroup(of: ContinuousClock.Instant.self) { group in
                for _ in 0..<30 {
                    group.addTask {
                        _ = try await load(loader, server.url("/bytes/100"))
                        return .now
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }.sorted()
            let gaps = zip(times.dropFirst(), times).map { $0 - $1 }.sorted()
            #expect(gaps.count == 29 && gaps[gaps.count / 2] < .milliseconds(500), "gaps between finishes: \(gaps)")
            #expect(loader.statistics.queued == 0 && loader.statistics.active == 0)
        }
    }

    @Test("100 sequential requests reuse connections")
    func connectionReuse() async throws {
        try await withServer { server in
            let loader = CurlLoader()
            for _ in 0..<100 { _ = try await load(loader, server.url("/bytes/1000")) }
            let opened = server.stats.withLock { $0.connectionsOpened }
            #expect(opened <= 5, "\(opened) connections for 100 requests")
        }
    }

    @Test("a load cancelled at any moment around its start ends at once and never runs: none is left holding a slot for its timeout")
    func cancelledAroundStart() async throws {
        try await withServer { silent in
            var configuration = CurlLoader.Configuration(maxConcurrentDownloads: 64, timeout: .seconds(300))
            configuration.maxConcurrentDownloadsPerHost = 64
            let loader = CurlLoader(configuration: configuration)
            for round in 0..<20 {
                let tasks = (0..<40).map { index in
                    Task { try await load(loader, silent.url("/gate/\(round)-\(index)")) }
                }
                // Cancelled while some have not started, some are being submitted, some run.
                for (index, task) in tasks.enumerated() {
                    if index % 4 == 0 { await Task.yield() }
                    task.cancel()
                }
                for task in tasks {
                    let outcome = await task.result
                    #expect(throws: (any Error).self, "a cancelled load does not succeed") { try outcome.get() }
                }
            }
            // Every transfer is out of curl (a cancelled one that started anyway would
            // hold its slot and connection until its 300 s timeout).
            #expect(await eventually { loader.statistics.active == 0 && loader.statistics.queued == 0 }, "\(loader.statistics)")
            silent.openGate()
        }
    }

    @Test("cancelling mid-body frees the transfer; the server sees the connection close")
    func cancellation() async throws {
        try await withServer { server in
            // A timeout far beyond the bound below: only cancellation can end the load in time.
            let loader = CurlLoader(configuration: .init(timeout: .seconds(600)))
            let progressAfterCancel = Lock(0)
            let cancelledFlag = Lock(false)
            let task = Task {
                try await loader.load(LoadRequest(url: server.url("/stall"))) { _ in
                    if cancelledFlag.withLock({ $0 }) { progressAfterCancel.withLock { $0 += 1 } }
                }
            }
            #expect(await eventually { server.requestCount(path: "/stall") > 0 })
            try await Task.sleep(for: .milliseconds(100))  // the headers and first bytes arrive: a transfer in its body
            let closedBefore = server.stats.withLock { $0.connectionsClosed }
            cancelledFlag.withLock { $0 = true }
            task.cancel()
            let started = ContinuousClock.now
            let error = await #expect(throws: WebImageError.self) { try await task.value }
            #expect(error?.code == .cancelled)
            // /stall never finishes: without cancellation the load would last until the 600 s timeout.
            #expect(ContinuousClock.now - started < .seconds(60))
            var closed = false
            for _ in 0..<200 where !closed {
                closed = server.stats.withLock { $0.connectionsClosed } > closedBefore
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(closed, "the server saw the connection close")
            // A window for a late progress report to show itself (a busy machine can only hide one, never invent one).
            try await Task.sleep(for: .milliseconds(100))
            #expect(progressAfterCancel.withLock { $0 } == 0, "no progress after cancel")
        }
    }

    @Test("the SSRF guard refuses internal addresses after resolution")
    func ssrfGuard() async throws {
        try await withServer { server in
            let guarded = CurlLoader(configuration: .init(blockPrivateAddresses: true))
            for host in ["127.0.0.1", "localhost"] {
                let url = URL(string: "http://\(host):\(server.port)/bytes/10")!
                let error = await #expect(throws: WebImageError.self) { try await load(guarded, url) }
                #expect(error?.code == .forbidden && error?.isTransient == false, "\(host): \(String(describing: error))")
            }
            #expect(server.stats.withLock { $0.requests.isEmpty }, "no request reached the server")
            let unguarded = try await load(CurlLoader(), server.url("/bytes/10"))
            #expect(unguarded.data.count == 10, "off by default")
        }
    }

    @Test("exempt ranges let an internal origin through the guard, and only that range")
    func ssrfGuardExemptions() async throws {
        try await withServer { server in
            var configuration = CurlLoader.Configuration(blockPrivateAddresses: true)
            configuration.exemptAddresses = [try #require(CurlLoader.AddressRange("127.0.0.1/32"))]
            let loader = CurlLoader(configuration: configuration)
            let allowed = try await load(loader, server.url("/bytes/10"))
            #expect(allowed.data.count == 10)
            // 127.0.0.2 is loopback too (the server listens on 127.0.0.1 only, so the
            // guard must refuse before any connection is tried: forbidden, not refused).
            let other = await #expect(throws: WebImageError.self) {
                try await load(loader, URL(string: "http://127.0.0.2:\(server.port)/bytes/10")!)
            }
            #expect(other?.code == .forbidden, "\(String(describing: other))")
            let wide = CurlLoader.AddressRange("10.0.0.0/8")
            #expect(wide?.description == "10.0.0.0/8")
            #expect(CurlLoader.AddressRange("fd00::/8")?.description == "fd00::/8")
            #expect(CurlLoader.AddressRange("::1")?.description == "::1/128")
            for bad in ["", "10.0.0.0/33", "10.0.0/8", "fd00::/129", "host.example", "1.2.3.4/x", "1.2.3.4/8/9"] {
                #expect(CurlLoader.AddressRange(bad) == nil, "'\(bad)' is not a range")
            }
        }
    }

    @Test("request headers, Accept, and refusal of URLs it cannot load")
    func headers() async throws {
        try await withServer { server in
            let loader = CurlLoader()
            _ = try await load(loader, server.url("/bytes/1")) { $0.headers = ["Authorization": "Bearer x", "Accept": "image/webp"] }
            let seen = try #require(server.stats.withLock { $0.requests.last?.headers })
            #expect(seen["authorization"] == "Bearer x" && seen["accept"] == "image/webp")
            #expect(!loader.canLoad(URL(string: "ftp://x/y")!) && !loader.canLoad(URL(fileURLWithPath: "/etc/passwd")))
            let refused = await #expect(throws: WebImageError.self) { try await load(loader, URL(string: "ftp://127.0.0.1/x")!) }
            #expect(refused?.code == .invalidURL)
            let unresolvable = await #expect(throws: WebImageError.self) { try await load(loader, URL(string: "http://nonexistent.invalid/x")!) }
            #expect(unresolvable?.code == .loadFailed && unresolvable?.isTransient == true)
        }
    }

    @Test("with the manager: each URL of a load is judged once (the one asked for before any tier, each hop by the loader), and a refused URL is not served from a tier either")
    func managerJudgesOnce() async throws {
        try await withServer { server in
            let configuration = ImageManager.Configuration()
            configuration.loaders.registerCurl()
            let manager = ImageManager(configuration: configuration)
            let asked = Lock<[String]>([])
            var context = ImageContext()
            context.urlPolicy = { url in
                asked.withLock { $0.append(url.path) }
                return nil
            }
            let url = server.url("/redirect/2")
            let loaded = try await manager.loadImage(with: url, options: .avoidDecode, context: context)
            #expect(loaded.data == TestHTTPServer.bytes(100))
            #expect(asked.withLock { $0 } == ["/redirect/2", "/redirect/1", "/bytes/100"], "each URL once, in order")
            // In the memory tier now; a policy that refuses the host refuses it there too.
            #expect(try await manager.loadImage(with: url, options: .avoidDecode, context: context).cacheType == .memory)
            context.urlPolicy = { _ in "is not allowed any more" }
            let refused = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: url, options: .avoidDecode, context: context) }
            #expect(refused?.code == .forbidden && refused?.message.contains("is not allowed any more") == true, "\(String(describing: refused))")
            let header = await #expect(throws: WebImageError.self) { try await manager.info(for: url, context: context) }
            #expect(header?.code == .forbidden)
            #expect(server.requestCount(path: "/redirect/2") == 1)
        }
    }

    @Test("with the manager: 100 concurrent loads of one URL make one request")
    func managerCoalescing() async throws {
        try await withServer { server in
            let configuration = ImageManager.Configuration()
            configuration.loaders.registerCurl()
            let manager = ImageManager(configuration: configuration)
            let url = server.url("/slow/200/shared")
            let results = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<100 { group.addTask { try await manager.loadImage(with: url, options: .avoidDecode).data?.count ?? 0 } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.count == 100 && results.allSatisfy { $0 == 100 })
            #expect(server.requestCount(path: "/slow/200/shared") == 1)
            let accept = server.stats.withLock { $0.requests.last?.headers["accept"] }
            #expect(accept == "image/webp,image/avif,image/*;q=0.8")
        }
    }

    @Test("8, then 64, loads of an origin that accepts and never answers hold none of the originals' budget: another origin's load is answered while they wait; large bodies are charged as they arrive")
    func silentOriginKeepsBudget() async throws {
        try await withServer { silent in
            try await withServer { healthy in
                var configuration = ImageManager.Configuration()
                // serve's limits: four downloads per origin; a budget of two large bodies.
                var curl = CurlLoader.Configuration(maxConcurrentDownloads: 6)
                curl.maxConcurrentDownloadsPerHost = 4
                curl.timeout = .seconds(300)
                // The manager's timeout is each load's, ahead of the loader's.
                configuration.timeout = .seconds(300)
                let loader = CurlLoader(configuration: curl)
                configuration.loaders.registerCurl(loader)
                configuration.originalsBudget = 8 << 20
                configuration.maxResponseSize = 8 << 20
                let manager = ImageManager(configuration: configuration)
                for count in [8, 64] {
                    let held = (0..<count).map { index in
                        Task { try await manager.loadImage(with: silent.url("/gate/\(count)-\(index)"), options: .avoidDecode) }
                    }
                    #expect(await eventually { silent.stats.withLock { $0.arrivals.count } >= 4 })
                    #expect(manager.originalsInFlight.bytes == 0 && manager.originalsInFlight.waiting == 0,
                            "\(count) unanswered loads hold \(manager.originalsInFlight)")
                    // Bounded by the suite's time limit only: it must not wait for the silent ones.
                    let answer = try await manager.loadImage(with: healthy.url("/bytes/4000/\(count)"), options: .avoidDecode)
                    #expect(answer.data?.count == 4000)
                    for task in held { task.cancel() }
                    for task in held { _ = try? await task.value }
                    silent.stats.withLock { $0.arrivals.removeAll() }
                }
                // Large bodies: three of 3 MB at once through an 8 MiB budget.
                let bodies = await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<3 { group.addTask { try await manager.loadImage(with: healthy.url("/big/3000000/\(index)"), options: .avoidDecode).data?.count ?? 0 } }
                    do {
                        return try await group.reduce(into: []) { $0.append($1) }
                    } catch {
                        Issue.record("\(error); the driver's longest step: \(loader.longestDriverStep); \(loader.statistics); the origin: \(healthy.timeline)")
                        return []
                    }
                }
                #expect(bodies == [3_000_000, 3_000_000, 3_000_000])
                let usage = manager.originalsInFlight
                #expect(usage.peak >= 3_000_000 && usage.peak <= 9_000_000, "\(usage)")
                // Given back when the shared download's last reference goes, which can be
                // a moment after the callers have their answers.
                #expect(await eventually { manager.originalsInFlight.bytes == 0 }, "\(manager.originalsInFlight)")
            }
        }
    }

    @Test("responses that declare large bodies and send a trickle hold about 1 MiB each of the originals' budget, not what they declare: another origin's load is admitted meanwhile")
    func trickleKeepsBudget() async throws {
        try await withServer { trickling in
            try await withServer { healthy in
                var configuration = ImageManager.Configuration()
                var curl = CurlLoader.Configuration(maxConcurrentDownloads: 32)
                curl.timeout = .seconds(600)
                configuration.loaders.registerCurl(CurlLoader(configuration: curl))
                configuration.originalsBudget = 8 << 20
                configuration.maxResponseSize = 64 << 20
                let manager = ImageManager(configuration: configuration)
                // Four responses declaring 60 MB each, 10 bytes sent.
                let held = (0..<4).map { index in
                    Task { try await manager.loadImage(with: trickling.url("/stall/60000000/\(index)"), options: .avoidDecode) }
                }
                #expect(await eventually { manager.originalsInFlight.bytes >= 4 << 20 }, "each charged ahead of what arrived: \(manager.originalsInFlight)")
                #expect(manager.originalsInFlight.bytes <= 4 * ((1 << 20) + 30), "not the 240 MB declared: \(manager.originalsInFlight)")
                // Bounded by the suite's time limit only: it must not wait for the trickles.
                let answer = try await manager.loadImage(with: healthy.url("/bytes/4000/after"), options: .avoidDecode)
                #expect(answer.data?.count == 4000)
                for task in held { task.cancel() }
                for task in held { _ = try? await task.value }
                #expect(await eventually { manager.originalsInFlight.bytes == 0 })
            }
        }
    }

    @Test("a body curl decodes (Content-Encoding) is charged to the originals' budget by its decoded bytes, not the few on the wire; whole, it is the zeros it stands for")
    func decodedBodyCharged() async throws {
        try await withServer { server in
            // The encoding itself, whole: curl inflates it to 1 + 258 × 100 zero bytes.
            let response = try await load(CurlLoader(), server.url("/deflate/100/whole"))
            #expect(response.data == Data(count: 1 + 258 * 100))

            var configuration = ImageManager.Configuration()
            configuration.loaders.registerCurl(CurlLoader(configuration: .init(maxConcurrentDownloads: 4, timeout: .seconds(600))))
            configuration.originalsBudget = 64 << 20
            let manager = ImageManager(configuration: configuration)
            // 16 MB of zeros in about 100 KB of deflate, held short of its end.
            let held = Task { try await manager.loadImage(with: server.url("/deflate/65000/a"), options: .avoidDecode) }
            #expect(await eventually { manager.originalsInFlight.bytes >= 16_000_000 }, "charged by what it decoded: \(manager.originalsInFlight)")
            held.cancel()
            _ = try? await held.value
            #expect(await eventually { manager.originalsInFlight.bytes == 0 })
        }
    }

    @Test("a URL that names a user, asked for or redirected to, is refused, with and without a URL policy, and nothing is kept")
    func redirectWithUser() async throws {
        try await withServer { server in
            let target = "u:p@127.0.0.1:\(server.port)/bytes/100"
            for policy in [false, true] {
                var configuration = ImageManager.Configuration()
                configuration.loaders.registerCurl()
                if policy { configuration.urlPolicy = { _ in nil } }
                let manager = ImageManager(configuration: configuration)
                let error = await #expect(throws: WebImageError.self) {
                    try await manager.loadImage(with: server.url("/redirect-to/\(target)"), options: .avoidDecode)
                }
                #expect(error?.code == .forbidden && error?.message.contains("names a user") == true, "policy \(policy): \(String(describing: error))")
            }
            #expect(server.requestCount(path: "/bytes/100") == 1, "curl following itself went there; the loader following with a policy never sends the credentials")
            // Asked for directly: refused before anything is sent, saying so without
            // the password, not as a redirect.
            let configuration = ImageManager.Configuration()
            configuration.loaders.registerCurl()
            let direct = await #expect(throws: WebImageError.self) {
                try await ImageManager(configuration: configuration).loadImage(with: URL(string: "http://\(target)")!, options: .avoidDecode)
            }
            #expect(direct?.code == .forbidden && direct?.message.contains("names a user") == true && direct?.message.contains("redirect") == false
                    && direct?.message.contains("u:p") == false, "\(String(describing: direct))")
            #expect(server.requestCount(path: "/bytes/100") == 1, "nothing sent")
        }
    }

    @Test("with the manager and an origin breaker: an origin answering 503 is refused after the threshold, others are not, a trial closes it")
    func managerOriginBreaker() async throws {
        try await withServer { server in
            let other = try await TestHTTPServer.start(host: "127.0.0.2")
            let start = ContinuousClock.now
            let offset = Lock<Duration>(.zero)
            let breaker = OriginCircuitBreaker(failureThreshold: 3, cooldown: .seconds(30), clock: { start + offset.withLock { $0 } })
            var configuration = ImageManager.Configuration()
            configuration.loaders.registerCurl()
            configuration.originBreaker = breaker
            let manager = ImageManager(configuration: configuration)
            for _ in 0..<3 {
                let error = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: server.url("/status/503")) }
                #expect(error?.code == .badStatus && error?.statusCode == 503)
            }
            let before = server.stats.withLock { $0.requests.count }
            let refused = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: server.url("/bytes/100"), options: .avoidDecode) }
            #expect(refused?.code == .originUnavailable, "\(String(describing: refused))")
            #expect(server.stats.withLock { $0.requests.count } == before, "no request reached the origin while its circuit was open")
            let elsewhere = try await manager.loadImage(with: other.url("/bytes/100"), options: .avoidDecode)
            #expect(elsewhere.data?.count == 100, "another origin (same host name, another address) is not affected")
            offset.withLock { $0 += .seconds(30) }
            let trial = try await manager.loadImage(with: server.url("/bytes/100"), options: .avoidDecode)
            #expect(trial.data?.count == 100 && breaker.count == 0, "the trial reached the origin and closed the circuit")

            // One 429 with Retry-After opens it at once, for the pause asked.
            let asked = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: server.url("/status/429/90")) }
            #expect(asked?.statusCode == 429)
            let paused = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: server.url("/bytes/101"), options: .avoidDecode) }
            #expect(paused?.code == .originUnavailable && paused?.retryAfter == .seconds(90), "\(String(describing: paused))")
            offset.withLock { $0 += .seconds(90) }
            // An HTTP date works too, and a 503 without one is only a failure among three.
            let inAMinute = Date().addingTimeInterval(61)
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let dated = "/status/503/" + formatter.string(from: inAMinute).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            _ = try? await manager.loadImage(with: server.url(dated))
            let datedPause = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: server.url("/bytes/102"), options: .avoidDecode) }
            let seconds = datedPause?.retryAfter?.components.seconds ?? 0
            #expect(datedPause?.code == .originUnavailable && (50...61).contains(seconds), "\(String(describing: datedPause))")
            await manager.shutdown()
            await other.shutdown()
        }
    }
}
