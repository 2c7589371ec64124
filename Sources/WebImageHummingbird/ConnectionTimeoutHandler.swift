import CWebImageSystem
#if canImport(Glibc)
import Glibc
#endif
public import NIOCore
public import NIOHTTPTypes

/// Closes a connection that waits too long: for its next request, or for its
/// client to read an answer.
///
/// Two clocks, one limit (`http.idleTimeout` in `webimage serve`):
/// - **Waiting for a request.** From the moment the connection opens, and from
///   each moment no request is left unanswered, the next request's head must
///   arrive within the limit. An idle keep-alive connection and a client that
///   sends its head a byte at a time (a slow-header attack) are both closed then.
///   A request that is being answered is never timed out here: the manager's
///   deadlines bound the work. Nor is a connection whose answers are all
///   written but not all sent, while its client goes on reading them.
/// - **Waiting for the client to read.** While the connection cannot take more
///   bytes (its write buffer is over NIO's high-water mark), the clock runs; if
///   the client reads nothing at all for the limit, the connection is closed. A
///   client that pipelines requests and never reads its answers would otherwise
///   hold what was read and written for it for as long as it liked. A client that
///   goes on reading is not closed while it reads (as nginx's `send_timeout`): an
///   answer of a few hundred KB to a phone on a poor link can keep the buffer
///   full for longer than the limit. The clock looks every quarter of the limit,
///   so a client that stopped is closed between one and one and a quarter limits
///   after it last read. It holds no more meanwhile
///   than a client that does not read at all: the fast path writes nothing to a
///   connection that cannot take more, and Hummingbird's writer waits for it.
///   "Read" is judged by what the client's TCP stack acknowledged (on Linux),
///   else by NIO's buffer shrinking. A TCP stack acknowledges new bytes as its
///   application frees room, in steps of up to its receive buffer: a client that
///   reads less than that in a limit counts as not reading (at the default 60 s
///   and Linux's default 128 KB buffer, slower than about 2–3 KB/s).
///
/// It sits after the HTTP codec, before ``MemoryHitFastPath``'s handler and
/// Hummingbird's, so it sees every request and every answer, whichever of them
/// writes it.
public final class ConnectionTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart
    public typealias OutboundIn = HTTPResponsePart
    public typealias OutboundOut = HTTPResponsePart

    private let limit: TimeAmount
    /// Requests whose head was read and whose answer has not ended.
    private var unanswered = 0
    /// Since when no request has been waiting for its answer.
    private var idleSince = NIODeadline.uptimeNanoseconds(0)
    /// One timer per connection, not one per request: when it fires it closes an
    /// idle connection or sets itself again (scheduling and cancelling a task for
    /// every answer cost 7 % of a warm request's rate).
    private var waitingForRequest: Scheduled<Void>?
    private var waitingForReader: Scheduled<Void>?
    /// What the reader clock last measured, and the body bytes written since.
    private var atCheck = ReaderProgress(acknowledged: 0, buffered: 0)
    private var writtenSinceCheck = 0
    /// When the reader clock started, or last saw the client read.
    private var lastReadAt = NIODeadline.uptimeNanoseconds(0)
    private let measure: (any Channel) -> ReaderProgress?

    /// - Parameter limit: how long a connection may wait for its next request,
    ///   or for its client to read, before it is closed.
    public convenience init(limit: TimeAmount) {
        self.init(limit: limit, measure: ReaderProgress.measure)
    }

    /// For tests: `measure` says how far the client has read.
    package init(limit: TimeAmount, measure: @escaping (any Channel) -> ReaderProgress?) {
        self.limit = limit
        self.measure = measure
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startClock(context) }
    }

    public func handlerRemoved(context: ChannelHandlerContext) { cancelAll() }

    public func channelActive(context: ChannelHandlerContext) {
        startClock(context)
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        cancelAll()
        context.fireChannelInactive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { unanswered += 1 }
        context.fireChannelRead(data)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .end:
            unanswered = max(0, unanswered - 1)
            if unanswered == 0 { idleSince = context.eventLoop.now }
        case .body(let buffer) where waitingForReader != nil:
            writtenSinceCheck += buffer.readableBytes
        default:
            break
        }
        context.write(data, promise: promise)
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            waitingForReader?.cancel()
            waitingForReader = nil
        } else {
            startReaderClock(context)
        }
        context.fireChannelWritabilityChanged()
    }

    /// Starts the reader clock, unless it runs. It looks every quarter of the
    /// limit: a client that read anything since the last look has read now; one
    /// that has not read for the whole limit is closed (so within a quarter of the
    /// limit past it). It stops once nothing waits on the client: the connection
    /// can take bytes and NIO holds none.
    private func startReaderClock(_ context: ChannelHandlerContext) {
        guard waitingForReader == nil else { return }
        atCheck = measure(context.channel) ?? ReaderProgress(acknowledged: 0, buffered: 0)
        writtenSinceCheck = 0
        lastReadAt = context.eventLoop.now
        lookAtReader(context, at: lastReadAt + step)
    }

    private var step: TimeAmount { .nanoseconds(max(limit.nanoseconds / 4, 1)) }

    private func lookAtReader(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        waitingForReader = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            let (handler, context) = (handler.value, bound.value)
            handler.waitingForReader = nil
            let now = context.eventLoop.now
            let progress = handler.measure(context.channel)
            if let progress, progress.hasRead(since: handler.atCheck, written: handler.writtenSinceCheck) {
                handler.atCheck = progress
                handler.writtenSinceCheck = 0
                handler.lastReadAt = now
            }
            if now - handler.lastReadAt >= handler.limit {
                context.close(promise: nil)
            } else if context.channel.isWritable, (progress?.buffered ?? 0) == 0 {
                return  // nothing waits on the client
            } else {
                handler.lookAtReader(context, at: min(now + handler.step, handler.lastReadAt + handler.limit))
            }
        }
    }

    private func startClock(_ context: ChannelHandlerContext) {
        guard waitingForRequest == nil else { return }
        idleSince = context.eventLoop.now
        check(context, at: idleSince + limit)
    }

    /// At `deadline`: closes the connection if it has waited the whole limit for a
    /// request, else looks again when it could have.
    private func check(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let loop = context.eventLoop.assumeIsolated()
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        waitingForRequest = loop.scheduleTask(deadline: deadline) {
            let (handler, context) = (handler.value, bound.value)
            handler.waitingForRequest = nil
            let now = context.eventLoop.now
            if handler.unanswered > 0 {
                handler.check(context, at: now + handler.limit)
            } else if now >= handler.idleSince + handler.limit {
                // Every answer was written, but NIO may still hold some of them (the
                // kernel's buffer it need not: a close sends that before its FIN).
                // The reader clock judges a client still reading them, not this one.
                if (handler.measure(context.channel)?.buffered ?? 0) > 0 {
                    handler.startReaderClock(context)
                    handler.check(context, at: now + handler.limit)
                } else {
                    context.close(promise: nil)
                }
            } else {
                handler.check(context, at: handler.idleSince + handler.limit)
            }
        }
    }

    private func cancelAll() {
        waitingForRequest?.cancel()
        waitingForRequest = nil
        waitingForReader?.cancel()
        waitingForReader = nil
    }
}

/// How far a client has read its answers, as ``ConnectionTimeoutHandler`` judges it.
package struct ReaderProgress: Sendable, Equatable {
    /// The bytes the client's TCP stack has acknowledged (Linux's `tcpi_bytes_acked`;
    /// 0 where the kernel or the channel does not say).
    package var acknowledged: UInt64
    /// The bytes waiting in NIO's write buffer.
    package var buffered: Int

    package init(acknowledged: UInt64, buffered: Int) {
        self.acknowledged = acknowledged
        self.buffered = buffered
    }

    /// Whether the client read anything since `earlier`, with `written` body bytes
    /// written to the buffer meanwhile. Acknowledgements are the measure: the
    /// buffer alone lags behind the kernel's send buffer, which the autotuning of
    /// Linux can grow to megabytes, so a client reading steadily from it leaves
    /// NIO's buffer untouched for a while. The buffer counts where there are no
    /// acknowledgements (heads are not counted in `written`: a client that read
    /// less than the heads written meanwhile counts as having read nothing).
    func hasRead(since earlier: ReaderProgress, written: Int) -> Bool {
        acknowledged > earlier.acknowledged || buffered < earlier.buffered + written
    }

    /// What `channel` says: its buffer, and its socket's `TCP_INFO` where it is a
    /// TCP socket on Linux. Nil where it says neither.
    static func measure(_ channel: any Channel) -> ReaderProgress? {
        guard let buffered = try? channel.syncOptions?.getOption(.bufferedWritableBytes) else { return nil }
        var progress = ReaderProgress(acknowledged: 0, buffered: buffered)
        #if os(Linux)
        if let socket = channel as? any SocketOptionProvider {
            // On the channel's event loop the future is complete when it returns.
            let info: EventLoopFuture<TCPInfoBytes> = socket.unsafeGetSocketOption(level: SocketOptionLevel(IPPROTO_TCP),
                                                                                   name: SocketOptionName(TCP_INFO))
            let result = Box()
            info.assumeIsolated().whenSuccess { bytes in
                result.acknowledged = withUnsafeBytes(of: bytes) { CWI_tcp_bytes_acked($0.baseAddress!) }
            }
            progress.acknowledged = result.acknowledged
        }
        #endif
        return progress
    }

    /// A zeroed buffer for `getsockopt(TCP_INFO)` (CWI_TCP_INFO_CAPACITY bytes).
    private typealias TCPInfoBytes = InlineArray<64, UInt64>
    private final class Box { var acknowledged: UInt64 = 0 }
}
