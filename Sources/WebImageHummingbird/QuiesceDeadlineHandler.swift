public import NIOCore

/// Closes a connection that is still open a while after the server began its
/// graceful shutdown.
///
/// On SIGTERM Hummingbird stops listening, closes idle connections, and waits for
/// every other connection to finish its answers. A client that pipelines
/// requests and never reads their answers never lets that write finish, so the
/// process never exited (it held the shutdown for as long as the client held the
/// connection). This handler sees the server's quiesce event and closes its
/// connection `after` it, if it is still open then: ``ImageServer`` installs it
/// with `thumbnail.shutdownGrace` plus a second, so every answer that could end
/// within the grace period has had it.
public final class QuiesceDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny

    private let after: TimeAmount

    public init(after: TimeAmount) { self.after = after }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            let channel = context.channel
            context.eventLoop.scheduleTask(in: after) { channel.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }
}
