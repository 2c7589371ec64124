public import Hummingbird
public import NIOCore
import Synchronization

/// A request context that knows its connection, so that ``Hummingbird/RouterMethods/addImageRoutes(_:at:)``
/// can stop the work of a request whose client went away.
///
/// ``ImageRequestContext`` is one; a context of your own conforms by keeping the
/// channel its source gives:
///
/// ```swift
/// struct MyContext: RequestContext, ConnectionRequestContext {
///     var coreContext: CoreRequestContextStorage
///     let channel: any Channel
///
///     init(source: ApplicationRequestContextSource) {
///         coreContext = CoreRequestContextStorage(source: source)
///         channel = source.channel
///     }
/// }
/// ```
///
/// The cancelling also needs ``ClientDisconnectHandler`` in the connection's
/// channel handlers, as ``ImageServer`` installs it.
public protocol ConnectionRequestContext {
    /// The connection the request came on.
    var channel: any Channel { get }
}

/// ``ImageServer``'s request context: Hummingbird's basic one, plus the connection.
public struct ImageRequestContext: RequestContext, ConnectionRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        channel = source.channel
    }
}

/// Cancels the requests a connection is answering when its client closes its
/// end (or resets the connection): their loads stop, and they leave
/// `thumbnail.maxInFlight` at once instead of at their ends. Without it, a
/// client that sends a request for a slow origin and closes, again and again,
/// holds every place with one connection at a time.
///
/// Hummingbird runs a request's handler to its end whatever its connection
/// does; ``Hummingbird/RouterMethods/addImageRoutes(_:at:)`` runs the endpoint's work in a task this
/// handler cancels, when the request's context is a ``ConnectionRequestContext``.
/// One per connection (Hummingbird's `additionalChannelHandlers` makes one each).
public final class ClientDisconnectHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny
    let watch = ConnectionWatch()

    public init() {}

    public func handlerAdded(context: ChannelHandlerContext) {
        ConnectionWatch.register(watch, for: context.channel)
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        ConnectionWatch.unregister(context.channel)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        ConnectionWatch.unregister(context.channel)
        watch.close()
        context.fireChannelInactive()
    }

    /// The client's end of the stream (a FIN). Hummingbird allows half-closed
    /// connections, so a client that closed its socket shows only this until the
    /// server writes to it; like nginx (its 499), the requests are given up then.
    /// A client that half-closes after its request and waits for the answer
    /// (`nc -N`) is taken as gone too.
    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed? = event as? ChannelEvent { watch.close() }
        context.fireUserInboundEventTriggered(event)
    }
}

/// One connection's requests in progress, cancelled together when it closes.
/// Found by channel: one registry for the process, an entry per open connection
/// with a ``ClientDisconnectHandler`` (nothing is added per request to the
/// channel itself, whose close callbacks would pile up on a keep-alive connection).
final class ConnectionWatch: Sendable {
    private struct State {
        var closed = false
        var next: UInt64 = 0
        var running: [UInt64: @Sendable () -> Void] = [:]
    }

    private let state = Mutex(State())
    private static let watches = Mutex<[ObjectIdentifier: ConnectionWatch]>([:])

    static func register(_ watch: ConnectionWatch, for channel: any Channel) {
        watches.withLock { $0[ObjectIdentifier(channel)] = watch }
    }

    static func unregister(_ channel: any Channel) {
        _ = watches.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// The watch of `channel`, if a ``ClientDisconnectHandler`` is in its pipeline and it is open.
    static func of(_ channel: any Channel) -> ConnectionWatch? {
        watches.withLock { $0[ObjectIdentifier(channel)] }
    }

    /// Cancels every request in progress, and any that starts after.
    func close() {
        let running = state.withLock { state -> [@Sendable () -> Void] in
            state.closed = true
            defer { state.running.removeAll() }
            return Array(state.running.values)
        }
        for cancel in running { cancel() }
    }

    /// `body`'s result, run in a task that the connection's close cancels (and the
    /// caller's cancellation too).
    func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
        let task = Task { await body() }
        let (id, closed) = state.withLock { state -> (UInt64, Bool) in
            state.next &+= 1
            if !state.closed { state.running[state.next] = { task.cancel() } }
            return (state.next, state.closed)
        }
        if closed { task.cancel() }
        let value = await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
        _ = state.withLock { $0.running.removeValue(forKey: id) }
        return value
    }
}
