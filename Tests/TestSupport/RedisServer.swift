package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` (Debian's) on a free loopback port, in a directory of its
/// own, for the tests: started, killed, paused (SIGSTOP), restarted on its port.
package final class RedisServer: @unchecked Sendable {
    package let port: Int
    package let directory: URL
    private let extraArguments: [String]
    private let lock = NSLock()
    private var pid: pid_t = 0

    package static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-server") }

    /// Starts a server and waits until it answers PING. With no port given, a server
    /// that exits at start (its port taken between the check and its bind) is started
    /// again on another port.
    package init(arguments: [String] = [], port: Int? = nil) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        extraArguments = arguments
        var attempt = 0
        while true {
            let candidate = try port ?? Self.freePort()
            do {
                let child = try await Self.spawn(port: candidate, directory: directory, arguments: arguments)
                self.port = candidate
                pid = child
                return
            } catch let error as RedisServerError where error.exited && port == nil && attempt < 5 {
                attempt += 1
            }
        }
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    package var url: String { "redis://127.0.0.1:\(port)" }
    package var address: String { "127.0.0.1:\(port)" }

    /// Starts the process (again, after ``kill()``) and waits until it answers.
    package func start() async throws {
        let child = try await Self.spawn(port: port, directory: directory, arguments: extraArguments)
        lock.withLock { pid = child }
    }

    /// Starts `redis-server` on this port and returns its pid once it answers PING;
    /// throws, with its log, if it exits first.
    private static func spawn(port: Int, directory: URL, arguments extra: [String]) async throws -> pid_t {
        let log = directory.appendingPathComponent("redis.log")
        let arguments = ["redis-server", "--port", "\(port)", "--bind", "127.0.0.1", "--dir", directory.path,
                         "--save", "", "--appendonly", "no", "--logfile", log.path] + extra
        var child: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let rc = posix_spawn(&child, "/usr/bin/redis-server", &actions, nil, argv, environ)
        guard rc == 0 else { throw RedisServerError(message: "cannot start redis-server: \(String(cString: strerror(rc)))") }
        var last = "no attempt"
        for _ in 0..<600 {  // up to 60 s on a busy machine; returns as soon as it answers
            // PONG, or NOAUTH from a server with a password: either way it is up.
            do {
                let reply = try command("PING", port: port)
                if reply == "+PONG" || reply.hasPrefix("-NOAUTH") { return child }
                last = "replied \(reply.debugDescription)"
            } catch {
                last = "\(error) (errno \(errno))"
            }
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw RedisServerError(message: "redis-server on \(port) exited at start: \(text.suffix(400))", exited: true)
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        Glibc.kill(child, SIGKILL)
        var status: Int32 = 0
        waitpid(child, &status, 0)
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        throw RedisServerError(message: "redis-server on \(port) did not answer PING (the last attempt: \(last)); its log ends: \(text.suffix(400))")
    }

    /// SIGKILL, and reaps the process.
    package func kill() {
        let current = lock.withLock { () -> pid_t in defer { pid = 0 }; return pid }
        guard current > 0 else { return }
        Glibc.kill(current, SIGCONT)
        Glibc.kill(current, SIGKILL)
        var status: Int32 = 0
        waitpid(current, &status, 0)
    }

    /// SIGSTOP: the server holds its connections and answers nothing.
    package func pause() { lock.withLock { if pid > 0 { Glibc.kill(pid, SIGSTOP) } } }
    /// SIGCONT.
    package func resume() { lock.withLock { if pid > 0 { Glibc.kill(pid, SIGCONT) } } }

    /// One command in Redis' inline form over a fresh connection; the first line of
    /// the reply (`+PONG`, `:3`, `$5`…), or the whole bulk reply's payload.
    @discardableResult
    package func command(_ line: String) throws -> String {
        try Self.command(line, port: port)
    }

    private static func command(_ line: String, port: Int) throws -> String {
        let socket = try connect(port: port)
        defer { close(socket) }
        let request = Array((line + "\r\n").utf8)
        guard write(socket, request, request.count) == request.count else { throw RedisServerError(message: "write failed") }
        var reply = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(socket, &buffer, buffer.count)
            if count <= 0 { break }
            reply += buffer[..<count]
            if let text = String(bytes: reply, encoding: .utf8), isComplete(text) { break }
        }
        let text = String(decoding: reply, as: UTF8.self)
        if text.hasPrefix("$") { return text.split(separator: "\r\n", omittingEmptySubsequences: false).dropFirst().first.map(String.init) ?? "" }
        return String(text.prefix { $0 != "\r\n" && $0 != "\r" })  // "\r\n" is one Character
    }

    /// Runs `redis-cli` with these arguments (against this server unless they say
    /// otherwise) and returns its standard output.
    /// On a thread of its own: redis-cli is a process run to its end, seconds
    /// beside CPU burners, which must not hold one of the cooperative pool's threads.
    package func cli(_ arguments: [String]) async throws -> String {
        try await onThread { [self] in try cliBlocking(arguments) }
    }

    /// ``cli(_:)`` on the calling thread, for code already on a thread of its own.
    package func cliBlocking(_ arguments: [String]) throws -> String {
        try Self.run(["/usr/bin/redis-cli", "-p", "\(port)"] + arguments)
    }

    package static func run(_ arguments: [String]) throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("redis-cli-\(UUID().uuidString)")
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("redis-cli-\(UUID().uuidString).err")
        defer { unlink(output.path); unlink(errors.path) }
        var child: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errors.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        guard posix_spawn(&child, arguments[0], &actions, nil, argv, environ) == 0 else {
            throw RedisServerError(message: "cannot run \(arguments[0])")
        }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        guard status == 0 else {
            // What redis-cli said, and how it ended (a signal, or its exit status).
            let said = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            let ending = status & 0x7f != 0 ? "signal \(status & 0x7f)" : "exit \((status >> 8) & 0xff)"
            throw RedisServerError(message: "\(arguments.joined(separator: " ")) failed (\(ending)): \(text) \(said)")
        }
        return text
    }

    private static func isComplete(_ text: String) -> Bool {
        guard text.hasSuffix("\r\n") else { return false }
        guard text.hasPrefix("$"), let header = text.split(separator: "\r\n").first, let length = Int(header.dropFirst()) else { return true }
        return length < 0 || text.utf8.count >= header.utf8.count + 2 + length + 2
    }

    private static func connect(port: Int) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw RedisServerError(message: "socket failed") }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else {
            close(socket)
            throw RedisServerError(message: "cannot connect to \(port)")
        }
        return socket
    }

    /// A free port whose cluster bus port (port + 10000) is free too, both below
    /// Linux's ephemeral range (32768 and up), where the kernel hands out the ports
    /// of other tests' listeners and outgoing connections.
    package static func freePort() throws -> Int {
        for _ in 0..<100 {
            let candidate = Int.random(in: 20000..<22768)
            if portIsFree(candidate) && portIsFree(candidate + 10000) { return candidate }
        }
        throw RedisServerError(message: "no free port")
    }

    private static func portIsFree(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }
}

package struct RedisServerError: Error, CustomStringConvertible {
    package let message: String
    /// The server exited before it answered (its port was taken, say).
    package var exited = false
    package init(message: String, exited: Bool = false) {
        self.message = message
        self.exited = exited
    }
    package var description: String { message }
}

/// Three `redis-server` primaries made a cluster with `redis-cli --cluster create`.
package final class RedisCluster: Sendable {
    package let nodes: [RedisServer]

    package init() async throws {
        var nodes: [RedisServer] = []
        for _ in 0..<3 {
            nodes.append(try await RedisServer(arguments: ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                                           "--cluster-node-timeout", "5000"]))
        }
        self.nodes = nodes
        let create = ["/usr/bin/redis-cli", "--cluster", "create"] + nodes.map(\.address) + ["--cluster-replicas", "0", "--cluster-yes"]
        // redis-cli runs to its end: on a thread of its own, not a cooperative one.
        _ = try await onThread { try RedisServer.run(create) }
        let members = nodes
        for _ in 0..<600 {
            let ok = try await onThread { members.allSatisfy({ ((try? $0.cliBlocking(["cluster", "info"])) ?? "").contains("cluster_state:ok") }) }
            if ok { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw RedisServerError(message: "the cluster did not reach cluster_state:ok")
    }

    package var urls: [String] { nodes.map(\.url) }

    /// A node's cluster id.
    package func id(of node: RedisServer) throws -> String {
        try node.cliBlocking(["cluster", "myid"]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Moves `slots` slots from one node to another with `redis-cli --cluster reshard`,
    /// which takes seconds (tens under load): on a thread of its own, so that it
    /// holds none of the cooperative pool's threads while other suites need them.
    package func reshard(from: Int, to: Int, slots: Int) async throws {
        try await onThread { [self] in
            _ = try RedisServer.run(["/usr/bin/redis-cli", "--cluster", "reshard", nodes[0].address,
                                     "--cluster-from", try id(of: nodes[from]), "--cluster-to", try id(of: nodes[to]),
                                     "--cluster-slots", "\(slots)", "--cluster-yes", "--cluster-pipeline", "10"])
        }
    }
}
