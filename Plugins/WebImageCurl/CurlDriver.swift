internal import CCurl
import DequeModule
import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage

/// One thread that owns a curl multi handle: it adds queued transfers up to the
/// concurrency limit, drives them with `curl_multi_perform`, completes finished
/// ones and sleeps in `curl_multi_poll` until there is work. Other threads only
/// hand it transfers and cancellations through a lock and wake it with
/// `curl_multi_wakeup`, so every curl call happens on this thread.
final class CurlDriver: Sendable {
    private struct Inbox {
        var submitted: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var stopped = false
    }

    private let inbox = Lock(Inbox())
    /// Transfers waiting for a slot, and transfers running.
    let counts = Lock<(queued: Int, active: Int)>((0, 0))
    /// The longest the driver's loop spent in one of its steps (its sleep in
    /// `curl_multi_poll` ends within a second), and which step. Every transfer waits while a step runs, and curl
    /// checks a transfer's timeout before it reads the transfer's socket: a
    /// driver held for longer than a timeout fails transfers whose answers have
    /// arrived. Kept for tests and diagnosis (``CurlLoader/longestDriverStep``).
    let longestStep = Lock<(duration: Duration, step: String)>((.zero, ""))
    /// `@unchecked`: the multi handle is used by the driver thread, except for
    /// `curl_multi_wakeup`, which libcurl documents as safe from any thread.
    private struct Multi: @unchecked Sendable { let handle: UnsafeMutableRawPointer }
    private let multi: Multi

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()

    init(maxConcurrent: Int, maxPerHost: Int? = nil, order: CurlLoader.Order) {
        _ = Self.globalInit
        multi = Multi(handle: curl_multi_init())
        _ = CCurl_multi_setopt_long(multi.handle, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = CCurl_multi_setopt_long(multi.handle, CURLMOPT_MAXCONNECTS, max(16, maxConcurrent * 2))
        let thread = Thread { [self] in run(maxConcurrent: maxConcurrent, maxPerHost: maxPerHost.map { max(1, $0) }, order: order) }
        thread.name = "webimage.curl"
        thread.start()
    }

    /// Hands a transfer to the driver. Only the submission that finds the inbox
    /// empty wakes the driver: one that finds it full knows a wake-up is already on
    /// its way (from the submitter before it) and that the driver has not yet
    /// drained the inbox, so a burst of submissions costs one wake-up, not one each.
    func submit(_ transfer: CurlTransfer) {
        let outcome = inbox.withLock { inbox -> (accepted: Bool, wake: Bool) in
            guard !inbox.stopped else { return (false, false) }
            let wake = inbox.submitted.isEmpty && inbox.cancelled.isEmpty
            inbox.submitted.append(transfer)
            counts.withLock { $0.queued += 1 }
            return (true, wake)
        }
        guard outcome.accepted else {
            transfer.finish(.failure(WebImageError(.cancelled, "the loader has shut down")))
            return
        }
        if outcome.wake { curl_multi_wakeup(multi.handle) }
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.markCancelled()
        let wake = inbox.withLock { inbox -> Bool in
            defer { inbox.cancelled.append(transfer) }
            return inbox.submitted.isEmpty && inbox.cancelled.isEmpty
        }
        if wake { curl_multi_wakeup(multi.handle) }
    }

    func shutdown() {
        inbox.withLock { $0.stopped = true }
        curl_multi_wakeup(multi.handle)
    }

    // MARK: The driver thread

    /// What the driver thread owns: the queues, the running transfers, and easy
    /// handles of finished transfers, reset and kept for the next ones (making and
    /// freeing one per transfer costs the one driver thread dearly).
    private struct Loop {
        var pending: PendingQueues
        var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
        var spares: [UnsafeMutableRawPointer] = []
        let maxConcurrent: Int
    }

    private func run(maxConcurrent: Int, maxPerHost: Int?, order: CurlLoader.Order) {
        var loop = Loop(pending: PendingQueues(order: order, maxPerHost: maxPerHost), maxConcurrent: maxConcurrent)
        let clock = ContinuousClock()
        var longest = Duration.zero
        var mark = clock.now
        /// Times the step that ended now (two clock reads a step, against a
        /// `curl_multi_perform` that costs microseconds at least).
        func step(_ name: StaticString) {
            let now = clock.now
            let took = now - mark
            mark = now
            if took > longest {
                longest = took
                longestStep.withLock { $0 = (took, "\(name)") }
            }
        }
        while true {
            mark = clock.now
            let (submitted, cancelled, stopped) = inbox.withLock { inbox in
                defer { inbox.submitted.removeAll(); inbox.cancelled.removeAll() }
                return (inbox.submitted, inbox.cancelled, inbox.stopped)
            }
            for transfer in submitted {
                // Cancelled before it got here (its cancellation may have been taken
                // in an earlier pass, while it was new): never started.
                guard transfer.state == .new, !transfer.isCancelled else {
                    counts.withLock { $0.queued -= 1 }
                    transfer.state = .done
                    transfer.finish(.failure(WebImageError(.cancelled, "cancelled")))
                    continue
                }
                transfer.state = .queued
                loop.pending.push(transfer)
            }
            for transfer in cancelled { cancel(transfer, &loop) }
            step("taking submitted and cancelled transfers")
            if stopped { return stop(&loop) }
            expireHeld(&loop)
            startQueued(&loop)
            step("starting queued transfers")
            var running: Int32 = 0
            curl_multi_perform(multi.handle, &running)
            step("curl_multi_perform")
            let finished = collectFinished(&loop)
            step("completing finished transfers")
            // Finished transfers made room for queued ones: start them now. Sleeping
            // here would wait out the poll timeout whenever every running transfer
            // had finished at once, since no socket would wake the poll.
            if finished && !loop.pending.isEmpty { continue }
            curl_multi_poll(multi.handle, nil, 0, 1000, nil)
            step("curl_multi_poll (up to 1 s)")
        }
    }

    /// A transfer its caller cancelled: out of curl if running, skipped if queued.
    private func cancel(_ transfer: CurlTransfer, _ loop: inout Loop) {
        switch transfer.state {
        case .active:
            if let easy = transfer.easy, loop.active.removeValue(forKey: easy) != nil {
                curl_multi_remove_handle(multi.handle, easy)
                counts.withLock { $0.active -= 1 }
                loop.pending.finished(transfer)
            }
            transfer.release()
        case .queued:
            counts.withLock { $0.queued -= 1 }  // left in its queue, skipped when reached
        case .new, .done:
            break
        }
        transfer.state = .done
        transfer.finish(.failure(WebImageError(.cancelled, "cancelled")))
    }

    /// Shutdown: every transfer fails, every handle is freed.
    private func stop(_ loop: inout Loop) {
        for transfer in loop.pending.drain() + Array(loop.active.values) {
            if let easy = transfer.easy { curl_multi_remove_handle(multi.handle, easy) }
            transfer.release()
            transfer.finish(.failure(WebImageError(.cancelled, "the loader has shut down")))
        }
        loop.spares.forEach { curl_easy_cleanup($0) }
        curl_multi_cleanup(multi.handle)
    }

    /// Transfers whose origin stalled, or that waited too long in all, fail.
    private func expireHeld(_ loop: inout Loop) {
        for expired in loop.pending.expireHeld(now: .now) {
            counts.withLock { $0.queued -= 1 }
            let transfer = expired.held.transfer
            transfer.state = .done
            if let refusal = expired.refusal {
                transfer.finish(.failure(refusal))
                continue
            }
            let why = expired.stalled
                ? "\(expired.host) finished none of its \(loop.pending.maxPerHost ?? 0) transfers in \(expired.held.timeout)"
                : "\(expired.host) is too busy: still none after \(expired.held.timeout * PendingQueues.maxWaitInTimeouts)"
            transfer.finish(.failure(WebImageError(.timedOut, "\(transfer.request.url.absoluteString) waited for a download slot: \(why)")))
        }
    }

    /// Starts queued transfers while there is room: higher priority first, then FIFO or LIFO.
    private func startQueued(_ loop: inout Loop) {
        while loop.active.count < loop.maxConcurrent, let transfer = loop.pending.pop() {
            counts.withLock { $0.queued -= 1 }
            if let refusal = transfer.request.stillAdmitted?() {
                transfer.state = .done
                transfer.finish(.failure(refusal))
                continue
            }
            do {
                let easy = try transfer.prepare(reusing: loop.spares.popLast())
                transfer.state = .active
                loop.pending.started(transfer)
                loop.active[easy] = transfer
                counts.withLock { $0.active += 1 }
                curl_multi_add_handle(multi.handle, easy)
            } catch {
                transfer.state = .done
                transfer.release()
                transfer.finish(.failure(error))
            }
        }
    }

    /// Completes the transfers curl finished, keeping their handles as spares;
    /// returns whether any finished.
    private func collectFinished(_ loop: inout Loop) -> Bool {
        var remaining: Int32 = 0
        var finished = false
        while let message = curl_multi_info_read(multi.handle, &remaining) {
            guard CCurl_msg_done(message) != 0, let easy = CCurl_msg_easy(message),
                  let transfer = loop.active.removeValue(forKey: easy) else { continue }
            let code = CCurl_msg_result(message)
            curl_multi_remove_handle(multi.handle, easy)
            counts.withLock { $0.active -= 1 }
            loop.pending.finished(transfer)
            transfer.state = .done
            transfer.complete(code)
            if let handle = transfer.detachHandle() {
                if loop.spares.count < loop.maxConcurrent * 2 {
                    curl_easy_reset(handle)
                    loop.spares.append(handle)
                } else {
                    curl_easy_cleanup(handle)
                }
            }
            finished = true
        }
        return finished
    }
}

/// Queued transfers, one queue per priority, so the next one is found in O(1)
/// however many wait. Cancelled transfers stay in place and are skipped. Each queue
/// is a `Deque`, so a transfer taken from it is released at once (an array with a
/// head index kept taken transfers, and their finished response bodies, alive
/// until it compacted).
///
/// With a per-host limit, a transfer whose host already runs `maxPerHost` is set
/// aside in its host's own queue (``held``) and started, before anything newer,
/// when one of that host's transfers ends: an origin that never answers can hold
/// `maxPerHost` slots, never all of them. A held transfer fails as timed out when
/// its host finished nothing for the transfer's whole timeout (a stalled origin
/// does not keep a growing queue waiting), or after ``maxWaitInTimeouts`` of its
/// timeouts in all (an origin that answers, but slower than loads of it arrive,
/// cannot keep requests waiting without end). A burst of one site's images that
/// drains within that is served whole.
struct PendingQueues {
    let order: CurlLoader.Order
    let maxPerHost: Int?
    private var queues: [Deque<CurlTransfer>] = [[], [], []]
    /// Running transfers per host, counted only with a per-host limit.
    private var running: [String: Int] = [:]
    /// Transfers that found their host full, oldest first, each with the time it
    /// was held and its own timeout.
    private(set) var held: [String: Deque<Held>] = [:]
    /// When each host with held transfers last finished one: progress that gives
    /// its queue another timeout.
    private var lastFinished: [String: ContinuousClock.Instant] = [:]

    struct Held {
        let transfer: CurlTransfer
        let since: ContinuousClock.Instant
        let timeout: Duration
    }

    /// The longest a held transfer waits for its origin however it progresses,
    /// in its own timeouts: a minute at the default 15 s.
    static let maxWaitInTimeouts = 4

    init(order: CurlLoader.Order, maxPerHost: Int? = nil) {
        self.order = order
        self.maxPerHost = maxPerHost
    }

    var isEmpty: Bool { queues.allSatisfy(\.isEmpty) && held.isEmpty }

    /// What the per-host limit counts: scheme, host and port.
    static func hostKey(_ url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(url.port ?? (scheme == "http" ? 80 : 443))"
    }

    mutating func push(_ transfer: CurlTransfer) {
        queues[transfer.request.priority.rawValue].append(transfer)
    }

    /// The next transfer to start: one held for a host that has room now, else the
    /// highest priority queued one, oldest (FIFO) or newest (LIFO), whose host has room.
    mutating func pop() -> CurlTransfer? {
        guard let maxPerHost else { return popQueued() }
        for host in Array(held.keys) where running[host, default: 0] < maxPerHost {
            while let transfer = held[host]?.popFirst()?.transfer {
                if transfer.state == .queued {
                    if held[host]?.isEmpty == true { release(host) }
                    return transfer
                }
            }
            release(host)
        }
        while let transfer = popQueued() {
            let host = Self.hostKey(transfer.request.url)
            if running[host, default: 0] < maxPerHost { return transfer }
            let timeout = transfer.request.timeout ?? transfer.configuration.timeout
            held[host, default: []].append(Held(transfer: transfer, since: .now, timeout: timeout))
        }
        return nil
    }

    private mutating func popQueued() -> CurlTransfer? {
        for priority in (0..<3).reversed() {
            while let transfer = order == .fifo ? queues[priority].popFirst() : queues[priority].popLast() {
                if transfer.state == .queued { return transfer }
            }
        }
        return nil
    }

    /// Takes out the held transfers whose host finished nothing for their whole
    /// timeout (since they were held, or since the host last finished a transfer,
    /// whichever is later) — `stalled` — or that have waited ``maxWaitInTimeouts``
    /// of their timeouts, and the cancelled ones before them. Each host's queue is
    /// checked from its head, so one waits at most until the one before it expires
    /// or starts. The driver fails the expired ones as timed out.
    mutating func expireHeld(now: ContinuousClock.Instant) -> [(held: Held, host: String, stalled: Bool, refusal: WebImageError?)] {
        guard !held.isEmpty else { return [] }
        var expired: [(held: Held, host: String, stalled: Bool, refusal: WebImageError?)] = []
        for host in Array(held.keys) {
            let progress = lastFinished[host]
            while let first = held[host]?.first {
                // Refused since it was queued (its origin's circuit opened): it fails now.
                let refusal = first.transfer.state == .queued ? first.transfer.request.stillAdmitted?() : nil
                let stalled = max(first.since, progress ?? first.since) + first.timeout <= now
                // The whole wait counts from when the transfer was queued, not from
                // when it reached its origin's queue.
                let tooLong = first.transfer.created + first.timeout * Self.maxWaitInTimeouts <= now
                guard first.transfer.state != .queued || refusal != nil || stalled || tooLong else { break }
                held[host]?.removeFirst()
                if first.transfer.state == .queued { expired.append((first, host, stalled, refusal)) }
            }
            if held[host]?.isEmpty == true { release(host) }
        }
        return expired
    }

    /// Forgets a host whose queue emptied.
    private mutating func release(_ host: String) {
        held[host] = nil
        lastFinished[host] = nil
    }

    /// Counts a transfer that started against its host's limit.
    mutating func started(_ transfer: CurlTransfer) {
        guard maxPerHost != nil else { return }
        running[Self.hostKey(transfer.request.url), default: 0] += 1
    }

    /// Gives back the host slot of a transfer that ended (finished or cancelled).
    mutating func finished(_ transfer: CurlTransfer) {
        guard maxPerHost != nil else { return }
        let host = Self.hostKey(transfer.request.url)
        let left = running[host, default: 1] - 1
        running[host] = left > 0 ? left : nil
        if held[host] != nil { lastFinished[host] = .now }
    }

    mutating func drain() -> [CurlTransfer] {
        defer {
            queues = [[], [], []]
            held = [:]
            lastFinished = [:]
        }
        return (queues.flatMap { $0 } + held.values.flatMap { $0.map(\.transfer) }).filter { $0.state == .queued }
    }
}
