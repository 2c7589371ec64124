public import Hummingbird
import HTTPTypes
import NIOCore
public import WebImageHTTP

extension RouterMethods {
    /// Mounts an `ImageEndpoint` in a Hummingbird 2 router: `GET` and `HEAD` of
    /// `thumbnail`, `placeholder` and `info` under `path`; any other method on
    /// those paths is answered `405 Method Not Allowed` with `Allow: GET, HEAD`.
    ///
    /// ```swift
    /// let router = Router()
    /// router.add(middleware: RequestMetricsMiddleware())
    /// router.addImageRoutes(ImageEndpoint(manager: manager, settings: settings), at: "/img")
    /// // GET /img/thumbnail?url=…&w=256&h=256
    /// ```
    ///
    /// The request's head goes to the endpoint as it came (method, path with query,
    /// header fields); its body is never read. With a ``ConnectionRequestContext``
    /// (``ImageRequestContext``) and ``ClientDisconnectHandler`` on the connection,
    /// as ``ImageServer`` has them, a request whose client goes away is cancelled.
    @discardableResult
    public func addImageRoutes(_ endpoint: ImageEndpoint, at path: RouterPath = "") -> Self {
        let group = self.group(path)
        // The endpoint answers 405 with Allow itself: every method reaches it.
        let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .delete, .patch, .options, .trace, .connect]
        for name in ["thumbnail", "placeholder", "info"] {
            for method in methods {
                group.on(RouterPath(stringLiteral: name), method: method) { request, context in
                    let head = request.head
                    if let channel = (context as? any ConnectionRequestContext)?.channel, let watch = ConnectionWatch.of(channel) {
                        return Response(await watch.run { await endpoint.respond(to: head) })
                    }
                    return Response(await endpoint.respond(to: head))
                }
            }
        }
        return self
    }
}

extension Response {
    /// An `ImageResponse` as Hummingbird's response (the bytes are copied once,
    /// into the buffer the server writes).
    public init(_ response: ImageResponse) {
        self.init(status: response.status, headers: response.headerFields,
                  body: response.body.isEmpty ? ResponseBody() : ResponseBody(byteBuffer: ByteBuffer(bytes: response.body)))
    }
}
