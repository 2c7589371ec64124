package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP/1.1 exchange over a plain socket on loopback, for tests that need what
/// a client library hides: any status with its headers and body, any method, any
/// bytes in the request target.
package enum RawHTTP {
    package struct Response: Sendable {
        package let status: Int
        /// Header names in lower case.
        package let headers: [String: String]
        package let body: Data
    }

    /// Sends `METHOD target HTTP/1.1` with `Connection: close` to `127.0.0.1:port`
    /// and reads the whole answer, on a thread of its own.
    package static func send(port: Int, method: String = "GET", target: String, headers: [String: String] = [:]) async throws -> Response {
        try await onThread {
            let fd = try connected(port: port)
            defer { close(fd) }
            var request = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
            for (name, value) in headers { request += "\(name): \(value)\r\n" }
            request += "\r\n"
            try writeAll(fd, Array(request.utf8))
            let received = readToEnd(fd)
            guard let end = received.range(of: Data("\r\n\r\n".utf8)) else { throw POSIXError(.EBADMSG) }
            let (status, fields) = parseHead(received[..<end.lowerBound])
            var body = Data(received[end.upperBound...])
            if fields["transfer-encoding"]?.lowercased() == "chunked" { body = dechunk(body) }
            return Response(status: status, headers: fields, body: body)
        }
    }

    /// Sends `targets` as GETs on one connection in a single write (pipelined),
    /// the last with `Connection: close`, and reads the answers in the order they
    /// came, split by their `Content-Length`.
    package static func pipelined(port: Int, targets: [String], headers: [String: String] = [:]) async throws -> [Response] {
        try await onThread {
            let fd = try connected(port: port)
            defer { close(fd) }
            var request = ""
            for (index, target) in targets.enumerated() {
                request += "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
                if index == targets.count - 1 { request += "Connection: close\r\n" }
                for (name, value) in headers { request += "\(name): \(value)\r\n" }
                request += "\r\n"
            }
            try writeAll(fd, Array(request.utf8))
            return try split(readToEnd(fd))
        }
    }

    /// Like `pipelined(port:targets:)`, but read as a client on a poor link reads:
    /// with a receive buffer of `receiveBuffer` bytes, `chunk` bytes at a time and a
    /// pause after each. Throws the socket's error (`ECONNRESET`) if the server
    /// gives up on it.
    package static func pipelinedReadSlowly(port: Int, targets: [String], receiveBuffer: Int32 = 4096,
                                            chunk: Int = 4096, pause: Duration = .milliseconds(40)) async throws -> [Response] {
        try await onThread {
            let fd = try connected(port: port) { fd in
                var size = receiveBuffer
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
                // A server that stops sending fails the read (EAGAIN) rather than holding the run.
                var timeout = timeval(tv_sec: 120, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            }
            defer { close(fd) }
            var request = ""
            for (index, target) in targets.enumerated() {
                request += "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
                if index == targets.count - 1 { request += "Connection: close\r\n" }
                request += "\r\n"
            }
            try writeAll(fd, Array(request.utf8))
            var received = Data()
            var buffer = [UInt8](repeating: 0, count: chunk)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n == 0 { break }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                }
                received.append(contentsOf: buffer[0..<n])
                Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) / 1e18 + Double(pause.components.seconds))
            }
            return try split(received)
        }
    }

    /// Answers read back to back, split by their `Content-Length`.
    private static func split(_ data: Data) throws -> [Response] {
        var received = data[...]
        var responses: [Response] = []
        while let end = received.range(of: Data("\r\n\r\n".utf8)) {
            let (status, fields) = parseHead(received[..<end.lowerBound])
            let length = Int(fields["content-length"] ?? "0") ?? 0
            guard received.distance(from: end.upperBound, to: received.endIndex) >= length else { throw POSIXError(.EBADMSG) }
            let bodyEnd = received.index(end.upperBound, offsetBy: length)
            responses.append(Response(status: status, headers: fields, body: Data(received[end.upperBound..<bodyEnd])))
            received = received[bodyEnd...]
        }
        return responses
    }

    /// Sends `targets` as pipelined GETs on a new connection and returns its
    /// socket without reading anything: a client that does not read its answers.
    /// The caller closes it (`close(fd)`).
    package static func pipelinedWithoutReading(port: Int, targets: [String]) async throws -> Int32 {
        try await onThread {
            let fd = try connected(port: port)
            let request = targets.map { "GET \($0) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n" }.joined()
            do { try writeAll(fd, Array(request.utf8)) } catch { close(fd); throw error }
            return fd
        }
    }

    /// Opens a connection and writes `bytes` (a request, part of one, or nothing),
    /// reading nothing. The caller closes it (`close(fd)`).
    /// `from`: the loopback address to connect from (`127.0.0.2`: another client
    /// to the server), else the system's choice.
    package static func open(port: Int, sending bytes: String = "", from source: String? = nil) async throws -> Int32 {
        try await onThread {
            let fd = try connected(port: port) { fd in
                guard let source else { return }
                var local = sockaddr_in()
                local.sin_family = sa_family_t(AF_INET)
                local.sin_addr.s_addr = inet_addr(source)
                _ = withUnsafePointer(to: &local) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
            do { try writeAll(fd, Array(bytes.utf8)) } catch { close(fd); throw error }
            return fd
        }
    }

    /// Writes more `bytes` on a connection `open(port:sending:)` made.
    package static func send(_ fd: Int32, _ bytes: String) async throws {
        try await onThread { try writeAll(fd, Array(bytes.utf8)) }
    }

    /// What a connection reads until the server closes it, or nil if it was still
    /// open after `bound` (a generous bound: the event is the close).
    package static func readUntilClosed(_ fd: Int32, bound: Duration = .seconds(120)) async -> Data? {
        try? await onThread { () -> Data? in
            var timeout = timeval(tv_sec: Int(bound.components.seconds), tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var received = Data()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n == 0 { return received }
                if n < 0 {
                    if errno == EINTR { continue }
                    return nil  // the bound passed (EAGAIN), or the socket failed
                }
                received.append(contentsOf: buffer[0..<n])
            }
        }
    }

    /// Whatever a connection reads within `wait`, without waiting for a close: empty
    /// if nothing came (a check that something did not happen, so `wait` can only
    /// make it pass, never fail, on a slow machine).
    package static func readAvailable(_ fd: Int32, within wait: Duration) async -> Data {
        (try? await onThread { () -> Data in
            var timeout = timeval(tv_sec: Int(wait.components.seconds), tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let n = read(fd, &buffer, buffer.count)
            return n > 0 ? Data(buffer[0..<n]) : Data()
        }) ?? Data()
    }

    /// A listener on a free loopback port that answers every connection with
    /// `reply`, whatever it is (no status line: an HTTP/0.9 or non-HTTP origin),
    /// once the request's head has arrived, then closes it. Until ``RawReplier/stop()``.
    package final class RawReplier: @unchecked Sendable {
        package let port: Int
        private let fd: Int32
        private let thread: Thread

        package init(reply: Data) throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard listener >= 0 else { throw POSIXError(.EIO) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 16) == 0 && getsockname(listener, $0, &length) == 0 }
            }
            guard bound else { close(listener); throw POSIXError(.EADDRINUSE) }
            fd = listener
            port = Int(UInt16(bigEndian: address.sin_port))
            thread = Thread {
                while true {
                    let client = accept(listener, nil, nil)
                    guard client >= 0 else { return }  // the listener was shut down
                    var head = Data()
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    while head.range(of: Data("\r\n\r\n".utf8)) == nil {
                        let n = read(client, &buffer, buffer.count)
                        if n <= 0 { break }
                        head.append(contentsOf: buffer[0..<n])
                    }
                    try? RawHTTP.writeAll(client, Array(reply))
                    close(client)
                }
            }
            thread.start()
        }

        package func stop() {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
    }

    private static func connected(port: Int, before: (Int32) -> Void = { _ in }) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        before(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED
            close(fd)
            throw POSIXError(code)
        }
        return fd
    }

    fileprivate static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw POSIXError(.EPIPE) }
            sent += n
        }
    }

    private static func readToEnd(_ fd: Int32) -> Data {
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            received.append(contentsOf: buffer[0..<n])
        }
        return received
    }

    private static func parseHead(_ data: Data.SubSequence) -> (status: Int, fields: [String: String]) {
        let head = String(decoding: data, as: UTF8.self).components(separatedBy: "\r\n")
        let status = head.first.flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
        var fields: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, fields)
    }

    private static func dechunk(_ data: Data) -> Data {
        var out = Data()
        var index = data.startIndex
        while let lineEnd = data[index...].range(of: Data("\r\n".utf8)) {
            let sizeText = String(decoding: data[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size > 0 else { break }
            let start = lineEnd.upperBound
            guard data.distance(from: start, to: data.endIndex) >= size else { break }
            out.append(data[start..<data.index(start, offsetBy: size)])
            index = data.index(start, offsetBy: size + 2, limitedBy: data.endIndex) ?? data.endIndex
        }
        return out
    }
}
