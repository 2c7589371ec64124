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
    private var waitingForRequest: Scheduled<Void>?
    private var waitingForReader: Scheduled<Void>?

    /// - Parameter limit: how long a connection may wait for its next request,
    ///   or for its client to read, before it is closed.
    public init(limit: TimeAmount) { self.limit = limit }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startWaitingForRequest(context) }
    }

    public func handlerRemoved(context: ChannelHandlerContext) { cancelAll() }

    public func channelActive(context: ChannelHandlerContext) {
        startWaitingForRequest(context)
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        cancelAll()
        context.fireChannelInactive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) {
            unanswered += 1
            waitingForRequest?.cancel()
            waitingForRequest = nil
        }
        context.fireChannelRead(data)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            unanswered = max(0, unanswered - 1)
            if unanswered == 0 { startWaitingForRequest(context) }
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

    private func startWaitingForRequest(_ context: ChannelHandlerContext) {
        guard waitingForRequest == nil else { return }
        let channel = context.channel
        waitingForRequest = context.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
    }

    private func cancelAll() {
        waitingForRequest?.cancel()
        waitingForRequest = nil
        waitingForReader?.cancel()
        waitingForReader = nil
    }
}
