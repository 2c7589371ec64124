import NIOCore
import NIOHTTP1

/// Before the HTTP decoder: reads a connection's first request line as its bytes
/// pass, for what NIO's decoder waits on or forgets.
///
/// - An HTTP/0.9 request (`GET /path`, no version) is refused at once with the
///   `505` the decoder gives other versions. The decoder takes such a line for a
///   head whose fields have not come yet, so the client, which waits for its
///   answer, got nothing until `http.idleTimeout`.
/// - `PRI` in any line but HTTP/2's preface (`PRI * HTTP/2.0`) is refused as
///   a method HTTP/1.1 does not have (`PRI /x HTTP/1.0` also waited).
/// - A line ended by LF alone is refused as not HTTP/1.1 (400), which the
///   decoder answered as another HTTP version (505).
/// - Whether the line is a `HEAD`'s is told to `ConnectionOptionsHandler`, so
///   that a first request the decoder cannot read is refused without a body when
///   it is one: once the decoder failed, its method is not known otherwise.
///
/// Once the line has ended (or it is longer than ``maxLine``, which the decoder
/// bounds itself) the handler leaves the pipeline: later requests on the
/// connection pass nothing through it. Those, after a first sound one, are not
/// checked: one in HTTP/0.9 waits for the idle timeout as a half-sent head does.
final class FirstRequestLineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The most bytes of the line read before the check gives up (to the decoder).
    static let maxLine = 8 << 10
    private let options: ConnectionOptionsHandler
    /// The line's bytes so far, without the empty lines before it (RFC 9112 §2.2).
    private var line: [UInt8] = []
    private var refused = false

    init(options: ConnectionOptionsHandler) { self.options = options }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        let buffer = unwrapInboundIn(data)
        var ended = false
        buffer.withUnsafeReadableBytes { bytes in
            for byte in bytes {
                if byte == UInt8(ascii: "\n") {
                    if line.isEmpty || line == [UInt8(ascii: "\r")] { line.removeAll(); continue }
                    ended = true
                    break
                }
                line.append(byte)
                if line.count > Self.maxLine { ended = true; break }
            }
        }
        guard ended else { return context.fireChannelRead(data) }
        let crlf = line.last == UInt8(ascii: "\r")
        if crlf { line.removeLast() }
        options.firstIsHead = line.starts(with: "HEAD ".utf8)
        if let error = Self.problem(line, crlf: crlf) {
            refused = true
            context.fireErrorCaught(error)
            return
        }
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// What the decoder would not answer about a request line, as the parser's
    /// error for it, or nil.
    static func problem(_ line: [UInt8], crlf: Bool) -> HTTPParserError? {
        guard line.count <= maxLine else { return nil }
        let spaces = line.lazy.filter { $0 == UInt8(ascii: " ") }.count
        if line.starts(with: "PRI ".utf8), !line.elementsEqual("PRI * HTTP/2.0".utf8) { return .invalidMethod }
        // `method SP target`: HTTP/0.9's simple request.
        if spaces == 1, line.first != UInt8(ascii: " "), line.last != UInt8(ascii: " ") { return .invalidVersion }
        // A line ended by LF alone, which the parser reports as another HTTP version (505).
        if !crlf { return .lfExpected }
        return nil
    }
}
