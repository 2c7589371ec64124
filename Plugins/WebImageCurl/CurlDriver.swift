internal import CCurl
import Foundation
import Synchronization
import WebImage

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

    private let inbox = Mutex(Inbox())
    /// Transfers waiting for a slot, and transfers running.
    let counts = Mutex<(queued: Int, active: Int)>((0, 0))
    /// `@unchecked`: the multi handle is used by the driver thread, except for
    /// `curl_multi_wakeup`, which libcurl documents as safe from any thread.
    private struct Multi: @unchecked Sendable { let handle: UnsafeMutableRawPointer }
    private let multi: Multi

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()

    init(maxConcurrent: Int, order: CurlLoader.Order) {
        _ = Self.globalInit
        multi = Multi(handle: curl_multi_init())
        _ = CCurl_multi_setopt_long(multi.handle, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = CCurl_multi_setopt_long(multi.handle, CURLMOPT_MAXCONNECTS, max(16, maxConcurrent * 2))
        let thread = Thread { [self] in run(maxConcurrent: maxConcurrent, order: order) }
        thread.name = "webimage.curl"
        thread.start()
    }

    func submit(_ transfer: CurlTransfer) {
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopped else { return false }
            inbox.submitted.append(transfer)
            counts.withLock { $0.queued += 1 }
            return true
        }
        if accepted { curl_multi_wakeup(multi.handle) } else {
            transfer.finish(.failure(WebImageError(.cancelled, "the loader has shut down")))
        }
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.markCancelled()
        inbox.withLock { $0.cancelled.append(transfer) }
        curl_multi_wakeup(multi.handle)
    }

    func shutdown() {
        inbox.withLock { $0.stopped = true }
        curl_multi_wakeup(multi.handle)
    }

    // MARK: The driver thread

    private func run(maxConcurrent: Int, order: CurlLoader.Order) {
        var pending: [CurlTransfer] = []
        var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
        var sequence = 0
        while true {
            let (submitted, cancelled, stopped) = inbox.withLock { inbox in
                defer { inbox.submitted.removeAll(); inbox.cancelled.removeAll() }
                return (inbox.submitted, inbox.cancelled, inbox.stopped)
            }
            for transfer in submitted {
                sequence += 1
                transfer.sequence = sequence
                pending.append(transfer)
            }
            for transfer in cancelled {
                if let easy = transfer.easy, active.removeValue(forKey: easy) != nil {
                    curl_multi_remove_handle(multi.handle, easy)
                    transfer.release()
                    counts.withLock { $0.active -= 1 }
                } else if pending.contains(where: { $0 === transfer }) {
                    pending.removeAll { $0 === transfer }
                    counts.withLock { $0.queued -= 1 }
                }
                transfer.finish(.failure(WebImageError(.cancelled, "cancelled")))
            }
            if stopped {
                for transfer in pending + Array(active.values) {
                    if let easy = transfer.easy { curl_multi_remove_handle(multi.handle, easy) }
                    transfer.release()
                    transfer.finish(.failure(WebImageError(.cancelled, "the loader has shut down")))
                }
                curl_multi_cleanup(multi.handle)
                return
            }

            // Start queued transfers: higher priority first, then FIFO or LIFO.
            while active.count < maxConcurrent, !pending.isEmpty {
                let index = pending.indices.max { a, b in
                    let x = pending[a], y = pending[b]
                    if x.request.priority != y.request.priority { return x.request.priority < y.request.priority }
                    return order == .fifo ? x.sequence > y.sequence : x.sequence < y.sequence
                }!
                let transfer = pending.remove(at: index)
                counts.withLock { $0.queued -= 1 }
                if transfer.isCancelled { continue }
                do {
                    let easy = try transfer.prepare()
                    active[easy] = transfer
                    counts.withLock { $0.active += 1 }
                    curl_multi_add_handle(multi.handle, easy)
                } catch {
                    transfer.release()
                    transfer.finish(.failure(error))
                }
            }

            var running: Int32 = 0
            curl_multi_perform(multi.handle, &running)
            var remaining: Int32 = 0
            while let message = curl_multi_info_read(multi.handle, &remaining) {
                guard CCurl_msg_done(message) != 0, let easy = CCurl_msg_easy(message),
                      let transfer = active.removeValue(forKey: easy) else { continue }
                let code = CCurl_msg_result(message)
                curl_multi_remove_handle(multi.handle, easy)
                counts.withLock { $0.active -= 1 }
                transfer.complete(code)
            }
            curl_multi_poll(multi.handle, nil, 0, 1000, nil)
        }
    }
}
