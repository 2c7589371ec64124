internal import CHiredis
import Foundation
import WebImage

/// A reply, copied out of hiredis' reply object.
enum RedisValue: Sendable, Equatable {
    case string(Data)
    case integer(Int)
    case array([RedisValue])
    case null
    case status(String)
    case error(String)

    var data: Data? { if case .string(let data) = self { data } else { nil } }
    var text: String? {
        switch self {
        case .string(let data): String(decoding: data, as: UTF8.self)
        case .status(let text): text
        default: nil
        }
    }
    var errorMessage: String? { if case .error(let message) = self { message } else { nil } }
}

/// Why a command did not get a reply: the connection is broken and must be dropped.
struct RedisIOError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// One blocking connection to one Redis server (hiredis' `redisContext`).
///
/// Used by one thread at a time: the pool hands it out and takes it back. Every
/// call blocks for at most the command timeout (`SO_RCVTIMEO`/`SO_SNDTIMEO`); a
/// connection that failed once is never used again.
final class RedisConnection: @unchecked Sendable {
    private let context: UnsafeMutablePointer<redisContext>
    let address: RedisAddress
    private(set) var isBroken = false

    /// Connects within `connectTimeout`, then authenticates and selects the database.
    init(_ address: RedisAddress, credentials: RedisCredentials, connectTimeout: Duration, commandTimeout: Duration) throws {
        self.address = address
        guard let context = redisConnectWithTimeout(address.host, Int32(address.port), Self.timeval(connectTimeout)) else {
            throw RedisIOError(message: "redis \(address): cannot allocate a connection")
        }
        if context.pointee.err != 0 {
            let message = Self.errorText(context)
            redisFree(context)
            throw RedisIOError(message: "redis \(address): cannot connect: \(message)")
        }
        self.context = context
        _ = redisSetTimeout(context, Self.timeval(commandTimeout))
        _ = redisEnableKeepAlive(context)
        if let password = credentials.password {
            let auth = credentials.user.map { ["AUTH", $0, password] } ?? ["AUTH", password]
            if case .error(let message) = try command(auth.map { Data($0.utf8) }) {
                throw WebImageError(.forbidden, "redis \(address): AUTH refused: \(message)")
            }
        }
        if credentials.database != 0, case .error(let message) = try command(["SELECT", "\(credentials.database)"].map { Data($0.utf8) }) {
            throw WebImageError(.invalidArgument, "redis \(address): SELECT \(credentials.database): \(message)")
        }
    }

    deinit { redisFree(context) }

    /// Sends one command and reads its reply.
    func command(_ arguments: [Data]) throws -> RedisValue {
        try pipeline([arguments])[0]
    }

    /// Sends every command, then reads every reply (one round trip for the lot).
    func pipeline(_ commands: [[Data]]) throws -> [RedisValue] {
        guard !isBroken else { throw RedisIOError(message: "redis \(address): connection already failed") }
        for arguments in commands {
            let rc = Self.withArgv(arguments) { argc, argv, lengths in redisAppendCommandArgv(context, argc, argv, lengths) }
            guard rc == REDIS_OK else { throw broken("cannot queue a command") }
        }
        var replies: [RedisValue] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            var raw: UnsafeMutableRawPointer?
            guard redisGetReply(context, &raw) == REDIS_OK, let raw else { throw broken("no reply") }
            let reply = raw.assumingMemoryBound(to: redisReply.self)
            replies.append(Self.value(of: reply))
            freeReplyObject(raw)
        }
        return replies
    }

    private func broken(_ what: String) -> RedisIOError {
        isBroken = true
        return RedisIOError(message: "redis \(address): \(what): \(Self.errorText(context))")
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    private static func value(of reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            return .string(r.str.map { Data(bytes: $0, count: r.len) } ?? Data())
        case REDIS_REPLY_INTEGER:
            return .integer(Int(r.integer))
        case REDIS_REPLY_ARRAY:
            var items: [RedisValue] = []
            items.reserveCapacity(r.elements)
            for index in 0..<r.elements {
                if let element = r.element[index] { items.append(value(of: element)) } else { items.append(.null) }
            }
            return .array(items)
        case REDIS_REPLY_STATUS:
            return .status(r.str.map { String(cString: $0) } ?? "")
        case REDIS_REPLY_ERROR:
            return .error(r.str.map { String(cString: $0) } ?? "error")
        default:
            return .null
        }
    }

    private static func withArgv<T>(_ arguments: [Data], _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> T) -> T {
        // One buffer holding every argument back to back; argv points into it.
        var buffer = Data()
        buffer.reserveCapacity(arguments.reduce(0) { $0 + $1.count } + 1)
        for argument in arguments { buffer.append(argument) }
        buffer.append(0)
        let lengths = arguments.map(\.count)
        return buffer.withUnsafeBytes { raw in
            let base = raw.baseAddress!.assumingMemoryBound(to: CChar.self)
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(arguments.count)
            var offset = 0
            for length in lengths {
                pointers.append(base + offset)
                offset += length
            }
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { body(Int32(arguments.count), argv.baseAddress!, $0.baseAddress!) }
            }
        }
    }

    static func timeval(_ duration: Duration) -> timeval {
        let micros = max(1000, Int(duration.wholeMilliseconds) * 1000)
        return Glibc.timeval(tv_sec: micros / 1_000_000, tv_usec: micros % 1_000_000)
    }
}

/// `host:port`.
struct RedisAddress: Hashable, Sendable, CustomStringConvertible {
    var host: String
    var port: Int
    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// What a connection sends before its first command.
struct RedisCredentials: Hashable, Sendable {
    var user: String?
    var password: String?
    var database = 0
}
