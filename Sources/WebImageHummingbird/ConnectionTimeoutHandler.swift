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
///   deadlines bound the work.
/// - **Waiting for the client to read.** While the connection cannot take more
///   bytes (its write buffer is over NIO's high-water mark), an answer makes no
///   progress; if that lasts the limit, the connection is closed. A client that
///   pipelines requests and never reads its answers would otherwise hold what
///   was read and written for it for as long as it liked.
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

    /// - Parameter limit: how long a connection may wait for its next request,
    ///   or for its client to read, before it is closed.
    public init(limit: TimeAmount) { self.limit = limit }

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
        if case .end = unwrapOutboundIn(data) {
            unanswered = max(0, unanswered - 1)
            if unanswered == 0 { idleSince = context.eventLoop.now }
        }
        context.write(data, promise: promise)
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            waitingForReader?.cancel()
            waitingForReader = nil
        } else if waitingForReader == nil {
            let channel = context.channel
            waitingForReader = context.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
        }
        context.fireChannelWritabilityChanged()
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
                context.close(promise: nil)
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
