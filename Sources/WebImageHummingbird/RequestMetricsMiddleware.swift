public import Hummingbird
import HTTPTypes
import Metrics
import Synchronization

/// Hummingbird's request metrics, under the names and dimensions of its own
/// `MetricsMiddleware` (`hb_requests`, `http_server_request_duration` (a histogram in seconds),
/// `hb_request_errors`, `http_server_active_requests`), recorded when the
/// response is made rather than after its body is written.
///
/// Hummingbird's middleware learns when the body was written by wrapping it in a
/// closure, which turns a response of one buffer (every answer of the image
/// endpoint) from Hummingbird's single write into its streamed one: that cost a
/// warm thumbnail request about a fifth of its throughput. Here the duration is
/// the time to the response, not to its last byte, and a request stops counting
/// as active when its response is handed to the server.
public struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    private let cache = RequestMetricsCache()

    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let active = cache.active(request.method)
        active.increment()
        defer { active.decrement() }
        do {
            let response = try await next(request, context)
            let metrics = cache.endpoint(context.endpointPath ?? "Unknown", request.method, response.status)
            metrics.requests.increment()
            metrics.duration.recordNanoseconds(RequestMetricsCache.nanoseconds(since: started))
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            let metrics = cache.endpoint(context.endpointPath ?? "NotFound", request.method, status)
            metrics.requests.increment()
            metrics.errors.increment()
            throw error
        }
    }

}

/// The metric handles by route, method and status, made once each (a handle made
/// per request is a lookup in the metrics backend).
final class RequestMetricsCache: Sendable {
    struct Endpoint: Sendable {
        let requests: Counter
        let duration: Timer
        let errors: Counter
    }

    private struct Key: Hashable {
        let route: String
        let method: HTTPRequest.Method
        let status: Int
    }

    private let endpoints = Mutex<[Key: Endpoint]>([:])

    static func nanoseconds(since start: ContinuousClock.Instant) -> Int64 {
        let elapsed = ContinuousClock.now - start
        return elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
    }
    private let methods = Mutex<[HTTPRequest.Method: Meter]>([:])

    func active(_ method: HTTPRequest.Method) -> Meter {
        methods.withLock { methods in
            if let meter = methods[method] { return meter }
            let meter = Meter(label: "http.server.active_requests", dimensions: [("http.request.method", method.description)])
            methods[method] = meter
            return meter
        }
    }

    func endpoint(_ route: String, _ method: HTTPRequest.Method, _ status: HTTPResponse.Status) -> Endpoint {
        let key = Key(route: route, method: method, status: status.code)
        return endpoints.withLock { endpoints in
            if let endpoint = endpoints[key] { return endpoint }
            let dimensions = [("http.route", route), ("http.request.method", method.description), ("http.response.status_code", String(status.code))]
            let endpoint = Endpoint(
                requests: Counter(label: "hb.requests", dimensions: dimensions),
                duration: Timer(label: "http.server.request.duration", dimensions: dimensions, preferredDisplayUnit: .seconds),
                errors: Counter(label: "hb.request.errors", dimensions: [("http.route", route), ("http.request.method", method.description),
                                                                          ("error.type", String(status.code))]))
            endpoints[key] = endpoint
            return endpoint
        }
    }
}
