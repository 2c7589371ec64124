internal import CCurl
import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage

/// One request's state. Callbacks and `prepare`/`complete` run on the driver
/// thread only; `attach`, `markCancelled` and `finish` may come from any thread
/// and go through locks.
///
/// `@unchecked Sendable`: the mutable fields below the locks are touched only by
/// the driver thread (curl calls its callbacks there).
final class CurlTransfer: @unchecked Sendable {
    let request: LoadRequest
    let configuration: CurlLoader.Configuration
    /// What this request sends beyond a plain GET (a method, a body, a signature).
    let call: CurlCall
    private let progress: @Sendable (LoadProgress) -> Void
    private let continuation = Lock<CheckedContinuation<LoadResponse, any Error>?>(nil)
    private let cancelled = Atomic<Bool>(false)

    // Driver thread only.
    enum State { case new, queued, active, done }
    var state = State.new
    private(set) var easy: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var body = Data()
    private var headers: [String: String] = [:]
    private var tooLarge = false
    /// The two values of a response's `Content-Length` headers that differ.
    private var conflictingLengths: (String, String)?
    private var lastReport = ContinuousClock.now
    private var reported: Int64 = -1
    /// The address the SSRF guard refused, and why (driver thread).
    private var refusal: (address: String, reason: String)?
    /// Whether curl follows redirects itself. Off when the loader follows them, as
    /// it does behind a proxy with the guard on, to check each hop's target.
    let followsRedirects: Bool
    /// curl's own account of a failure (CURLOPT_ERRORBUFFER), which names what
    /// `curl_easy_strerror` only classifies: "Too large response headers" rather
    /// than "Out of memory". Lives as long as the transfer; a handle handed back for
    /// reuse is reset, which forgets it.
    private let errorBuffer: UnsafeMutablePointer<CChar> = {
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        buffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        return buffer
    }()
    private var limit: Int64 { min(request.maxResponseSize ?? configuration.maxResponseSize, configuration.maxResponseSize) }

    /// When the transfer was made (just before it was queued): a held transfer's
    /// whole wait is counted from here.
    let created = ContinuousClock.now

    init(request: LoadRequest, configuration: CurlLoader.Configuration, followsRedirects: Bool = true, call: CurlCall = CurlCall(),
         progress: @escaping @Sendable (LoadProgress) -> Void) {
        self.request = request
        self.configuration = configuration
        self.call = call
        self.followsRedirects = followsRedirects
        self.progress = progress
    }

    deinit {
        release()
        errorBuffer.deallocate()
    }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func attach(_ continuation: CheckedContinuation<LoadResponse, any Error>) {
        self.continuation.withLock { $0 = continuation }
    }

    func markCancelled() { cancelled.store(true, ordering: .releasing) }

    /// Resumes the caller once; later calls do nothing.
    func finish(_ result: Result<LoadResponse, any Error>) {
        continuation.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }?.resume(with: result)
    }

    /// Frees the easy handle and header list.
    func release() {
        body = Data()
        if let easy { curl_easy_cleanup(easy) }
        if let headerList { curl_slist_free_all(headerList) }
        easy = nil
        headerList = nil
    }

    /// Hands the easy handle back for reuse (the driver resets it), freeing the rest.
    func detachHandle() -> UnsafeMutableRawPointer? {
        defer { easy = nil }
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
        return easy
    }

    /// Configures an easy handle: a reset one from the driver, or a new one.
    func prepare(reusing spare: UnsafeMutableRawPointer? = nil) throws -> UnsafeMutableRawPointer {
        guard let easy = spare ?? curl_easy_init() else { throw WebImageError(.loadFailed, "curl_easy_init failed") }
        self.easy = easy
        let context = Unmanaged.passUnretained(self).toOpaque()
        let scheme = request.url.scheme?.lowercased() ?? "https"
        let timeout = request.timeout ?? configuration.timeout
        let checks: [CURLcode] = [
            CCurl_setopt_string(easy, CURLOPT_URL, request.url.absoluteString),
            CCurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer),
            CCurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1),
            CCurl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https"),
            CCurl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, followsRedirects ? 1 : 0),
            CCurl_setopt_long(easy, CURLOPT_MAXREDIRS, configuration.maxRedirects),
            // Never to another scheme: an https URL does not follow a redirect to http, nor to file://.
            CCurl_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, scheme),
            CCurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(timeout.wholeMilliseconds)),
            CCurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(min(timeout, configuration.connectTimeout).wholeMilliseconds)),
            CCurl_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, ""),
            CCurl_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limit)),
            CCurl_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)),
            // Wait for a multiplexed HTTP/2 connection rather than opening another (TLS only).
            CCurl_setopt_long(easy, CURLOPT_PIPEWAIT, scheme == "https" ? 1 : 0),
            CCurl_setopt_string(easy, CURLOPT_USERAGENT, configuration.userAgent),
            CCurl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, configuration.allowInsecureTLS ? 0 : 1),
            CCurl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, configuration.allowInsecureTLS ? 0 : 2),
            CCurl_set_write(easy, { data, size, count, context in
                Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue().receive(data, size * count)
            }, context),
            CCurl_set_header(easy, { data, size, count, context in
                Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue().header(data, size * count)
            }, context),
            CCurl_set_progress(easy, { context, total, now, _, _ in
                Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue().report(received: Int64(now), expected: Int64(total))
            }, context),
        ]
        if let failed = checks.first(where: { $0 != CURLE_OK }) {
            throw WebImageError(.loadFailed, "configuring curl: \(String(cString: curl_easy_strerror(failed)))")
        }
        // The SSRF guard: the loader's, or this request's (a service's URL from a stranger).
        let guarded = configuration.blockPrivateAddresses || request.refusesPrivateAddresses
        if let proxy = configuration.proxy {
            guard CCurl_setopt_string(easy, CURLOPT_PROXY, proxy) == CURLE_OK else {
                throw WebImageError(.invalidArgument, "the proxy '\(proxy)' is not one curl accepts")
            }
        } else if guarded {
            // The environment's proxies (http_proxy, HTTPS_PROXY, ALL_PROXY) would take
            // the request past the guard, which would only see the proxy's address.
            _ = CCurl_setopt_string(easy, CURLOPT_PROXY, "")
        }
        if guarded && configuration.proxy == nil {
            // Every address curl connects to, after DNS and on every redirect hop.
            _ = CCurl_set_opensocket(easy, { context, _, address in
                guard let context, let address else { return CURL_SOCKET_BAD }
                return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue().openSocket(address)
            }, context)
        }
        try call.apply(to: easy)
        var fields = request.headers
        if let etag = request.ifNoneMatch { fields["If-None-Match"] = etag }
        if let date = request.ifModifiedSince { fields["If-Modified-Since"] = date }
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
            headerList = curl_slist_append(headerList, "\(name): \(value)")
        }
        if let headerList { _ = CCurl_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList) }
        return easy
    }

    // MARK: Callbacks (driver thread)

    /// The SSRF guard: a socket for a permitted address, none for a refused one.
    private func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        let socketAddress = CCurl_sockaddr_address(address)!
        if let reason = configuration.addressPolicy.refusal(for: socketAddress) {
            refusal = (AddressPolicy.text(of: socketAddress), reason)
            return CURL_SOCKET_BAD
        }
        return socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
    }

    private func receive(_ data: UnsafeMutablePointer<CChar>?, _ count: Int) -> Int {
        guard !isCancelled, let data else { return 0 }
        guard Int64(body.count + count) <= limit else {
            tooLarge = true
            return 0  // stops the transfer at once
        }
        body.append(UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: count)
        return count
    }

    private func header(_ data: UnsafeMutablePointer<CChar>?, _ count: Int) -> Int {
        guard !isCancelled, let data else { return 0 }
        // Parsed from the bytes: this runs for every header line of every response,
        // on the one driver thread, so it avoids Foundation's string machinery.
        let line = UnsafeRawBufferPointer(start: data, count: count)
        if count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"), line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/") {
            headers.removeAll(keepingCapacity: true)  // a new response (after a redirect or a 100 Continue)
            return count
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return count }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var start = colon + 1, end = count
        while start < end, isSpace(line[start]) { start += 1 }
        while end > start, isSpace(line[end - 1]) { end -= 1 }
        let name = String(decoding: line[..<colon].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        let value = String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<end]), as: UTF8.self)
        if name == "content-length", let earlier = headers[name], earlier != value {
            // RFC 9112 §6.3: the body's end is not known. curl would read up to one of
            // them, and a short body would reach the decoder as a broken image.
            conflictingLengths = (earlier, value)
            return 0
        }
        headers[name] = value
        if name == "content-length", let length = Int64(value) {
            if length > limit {
                tooLarge = true
                return 0
            }
            body.reserveCapacity(Int(length))
        }
        return count
    }

    private func report(received: Int64, expected: Int64) -> Int32 {
        if isCancelled { return 1 }
        // curl counts the bytes on the wire; a body it decodes (`Content-Encoding:
        // gzip`) is larger in memory, and what it holds is what is reported (and
        // charged to the originals' budget): 64 KB of gzip can be 63 MiB of body.
        let received = max(received, Int64(body.count))
        let now = ContinuousClock.now
        guard received != reported, received > 0, now - lastReport >= configuration.progressInterval || received == expected else { return 0 }
        reported = received
        lastReport = now
        progress(LoadProgress(received: received, expected: expected > 0 ? expected : nil))
        return 0
    }

    // MARK: Completion (driver thread)

    /// Resumes the caller with the response or the error. The driver takes the
    /// handle back afterwards.
    func complete(_ code: CURLcode) {
        // The caller owns the body from here on; the transfer keeps none of it.
        defer { body = Data() }
        guard let easy, !isCancelled else {
            finish(.failure(WebImageError(.cancelled, "cancelled")))
            return
        }
        var status = 0
        _ = CCurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var effective: UnsafeMutablePointer<CChar>?
        _ = CCurl_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &effective)
        let url = request.url.absoluteString
        // Parse the final URL only when a redirect changed it.
        let finalURL = effective.flatMap { pointer in
            let text = String(cString: pointer)
            return text == url ? request.url : URL(string: text)
        } ?? request.url
        guard code == CURLE_OK else {
            finish(.failure(error(for: code, status: status, url: url, target: finalURL.absoluteString)))
            return
        }
        if call.acceptsAnyStatus, !(200..<300).contains(status) {
            // The caller reads the answer itself (an S3 error document).
            finish(.success(LoadResponse(data: body, statusCode: status, headers: headers, url: finalURL)))
            return
        }
        if !followsRedirects, (300..<400).contains(status), status != 304 {
            finish(.success(LoadResponse(data: Data(), statusCode: status, headers: headers, url: finalURL)))
            return
        }
        if status == 304 {
            finish(.success(LoadResponse(data: Data(), statusCode: 304, headers: headers, url: finalURL)))
            return
        }
        guard (200..<300).contains(status) else {
            finish(.failure(WebImageError.httpStatus(status, url: url, retryAfter: headers["retry-after"])))
            return
        }
        if Int64(body.count) != reported {
            progress(LoadProgress(received: Int64(body.count), expected: Int64(body.count)))
        }
        finish(.success(LoadResponse(data: body, statusCode: status, headers: headers, url: finalURL)))
    }

    private func error(for code: CURLcode, status: Int, url: String, target: String) -> WebImageError {
        let text = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
        if let refusal {
            let hop = target == url ? url : "\(url) redirected to \(target), which"
            return WebImageError(.forbidden, "\(hop) resolves to \(refusal.address), which the SSRF guard refuses (\(refusal.reason))")
        }
        if let (first, second) = conflictingLengths {
            return WebImageError(.loadFailed, "\(url) answered with two Content-Length headers that differ (\(first) and \(second)), so its body's end is not known",
                                 isTransient: false)
        }
        if tooLarge || code == CURLE_FILESIZE_EXCEEDED {
            return WebImageError(.tooLarge, "\(url) is larger than the limit of \(limit) bytes")
        }
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return WebImageError(.timedOut, "\(url) did not finish within \(request.timeout ?? configuration.timeout): \(text)")
        case CURLE_TOO_MANY_REDIRECTS:
            return WebImageError(.badStatus, "\(url) redirected more than \(configuration.maxRedirects) times", isTransient: false)
        case CURLE_UNSUPPORTED_PROTOCOL where (300..<400).contains(status) || target != url:
            return WebImageError(.forbidden, "\(url) redirected to another scheme, which is refused: \(text)")
        case CURLE_UNSUPPORTED_PROTOCOL:
            // No redirect: the origin's answer has no HTTP status line (HTTP/0.9, or
            // not HTTP at all), which curl refuses with the same code.
            return WebImageError(.loadFailed, "\(url) did not answer in HTTP: no status line (an HTTP/0.9 or non-HTTP server)", isTransient: false)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_RECV_ERROR, CURLE_SEND_ERROR,
             CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            return WebImageError(.loadFailed, "\(url): \(text)", isTransient: true)
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE:
            return WebImageError(.loadFailed, "\(url): TLS failed: \(text)", isTransient: false)
        default:
            return WebImageError(.loadFailed, "\(url): \(text) (curl \(code.rawValue))", isTransient: true)
        }
    }
}
