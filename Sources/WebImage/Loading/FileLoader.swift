public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Loads `file://` URLs and plain paths, with the limits of any loader.
///
/// Only regular files (and symbolic links to them) are read: a FIFO, a device or
/// a socket is refused with ``WebImageError/Code/invalidURL`` before any read, so
/// none of them can hang a load or hold a pool thread. Directories, unreadable
/// files and files over the size limit get typed errors too. Reads run on the
/// blocking pool, in chunks, within the request's timeout (default 15 s).
///
/// Responses carry a `Content-Type` from sniffing and a `Last-Modified` from the
/// file's modification time, so a `.refreshCached` load of a file that has not
/// changed is answered 304.
///
/// A server that loads URLs its users choose restricts what the loader may read
/// with ``Access``: ``Access/refused`` refuses every file, ``Access/within(_:)``
/// confines loads to one directory (checked on the resolved path, so neither
/// `..` nor a symbolic link leads out of it).
public struct FileLoader: Loader {
    /// Which files the loader may read.
    public enum Access: Sendable, Hashable {
        /// Any file the process can read (a tool, a trusted batch job).
        case unrestricted
        /// Only files whose resolved path lies inside this directory.
        case within(URL)
        /// No file at all: the untrusted-URL mode of a server with no file root.
        case refused
    }

    /// The largest file loaded, in bytes. Default 64 MiB, as for network loads.
    public var maxFileSize: Int64
    /// Which files may be read. Default ``Access/unrestricted``.
    public var access: Access
    /// How long a load may take when the request sets no timeout. Default 15 s.
    public var timeout: Duration
    private let pool: BlockingThreadPool

    public init(maxFileSize: Int64 = LoadRequest.defaultMaxResponseSize, access: Access = .unrestricted, timeout: Duration = LoadRequest.defaultTimeout,
                pool: BlockingThreadPool = .io) {
        self.maxFileSize = maxFileSize
        self.access = access
        self.timeout = timeout
        self.pool = pool
    }

    public func canLoad(_ url: URL) -> Bool {
        url.isLocalFile
    }

    public func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        let url = request.url
        // `file://host/path` names a file on another machine (RFC 8089): refused,
        // not read from this one. No host, or `localhost`, is this machine.
        if url.scheme != nil, let host = url.host(percentEncoded: false), !host.isEmpty, host.lowercased() != "localhost" {
            throw WebImageError(.invalidURL, "\(url.absoluteString) names the host '\(host)': a file URL names no host (file:///path) or localhost", isTransient: false)
        }
        let path = url.scheme != nil ? url.path : url.relativeString.removingPercentEncoding ?? url.relativeString
        let limit = min(request.maxResponseSize ?? maxFileSize, maxFileSize)
        let deadline = ContinuousClock.now + (request.timeout ?? timeout)
        let access = access
        let response = try await pool.run { () throws -> LoadResponse in
            let path = try Self.permittedPath(path, access: access)
            return try Self.read(path, url: url, limit: limit, deadline: deadline, ifModifiedSince: request.ifModifiedSince)
        }
        try Task.checkCancellation()
        progress(LoadProgress(received: Int64(response.data.count), expected: Int64(response.data.count)))
        return response
    }

    /// The path to open: `path` itself, or under ``Access/within(_:)`` its resolved
    /// form, which must lie inside the root.
    static func permittedPath(_ path: String, access: Access) throws -> String {
        switch access {
        case .unrestricted:
            return path
        case .refused:
            throw WebImageError(.forbidden, "file loads are refused in this configuration (\(path)); set a file root (loader.fileRoot) to allow a directory")
        case .within(let root):
            guard let resolvedRoot = realpath(root.path, nil) else {
                throw WebImageError(.forbidden, "the file root \(root.path) does not exist: \(String(cString: strerror(errno)))")
            }
            let rootPath = String(cString: resolvedRoot)
            free(resolvedRoot)
            guard let resolved = realpath(path, nil) else {
                let code = errno
                throw WebImageError(code == ENOENT || code == ENOTDIR ? .notFound : .forbidden,
                                    "\(path): \(String(cString: strerror(code)))", isTransient: false)
            }
            let resolvedPath = String(cString: resolved)
            free(resolved)
            let prefix = rootPath.hasSuffix("/") ? rootPath : rootPath + "/"
            guard resolvedPath.hasPrefix(prefix) else {
                throw WebImageError(.forbidden, "\(path) resolves to \(resolvedPath), outside the file root \(rootPath)")
            }
            return resolvedPath
        }
    }

    /// Opens without blocking (a FIFO would wait for a writer), checks on the open
    /// descriptor that it is a regular file (no race with a swapped path), then
    /// reads in chunks until the end, the size limit or the deadline.
    static func read(_ path: String, url: URL, limit: Int64, deadline: ContinuousClock.Instant, ifModifiedSince: String?) throws -> LoadResponse {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            let kind: WebImageError.Code = code == ENOENT || code == ENOTDIR ? .notFound : code == EACCES || code == EPERM ? .forbidden : .loadFailed
            throw WebImageError(kind, "\(path): \(String(cString: strerror(code)))", isTransient: false)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw WebImageError(.loadFailed, "\(path): \(String(cString: strerror(errno)))", isTransient: false)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw WebImageError(.invalidURL, "\(path) is a directory, not an image file")
        default: throw WebImageError(.invalidURL, "\(path) is not a regular file (a FIFO, socket or device); only regular files are loaded")
        }
        guard Int64(info.st_size) <= limit else {
            throw WebImageError(.tooLarge, "\(path) is \(info.st_size) bytes, over the limit of \(limit)")
        }
        let lastModified = HTTPDate.format(Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec)))
        if let ifModifiedSince, ifModifiedSince == lastModified {
            return LoadResponse(data: Data(), statusCode: 304, headers: ["last-modified": lastModified], url: url)
        }
        // One allocation of the size the file declares (and one byte more, to see
        // growth), uninitialised: `Data(count:)` would zero it and reserve a
        // quarter more for appends that never come, 1.7 MB for a 1.3 MB photo. A
        // file that grows while being read is caught by the limit, one that
        // shrinks ends early.
        let capacity = Int(min(Int64(info.st_size), limit)) + 1
        guard let buffer = malloc(capacity) else {
            throw WebImageError(.loadFailed, "\(path): cannot allocate \(capacity) bytes to read it", isTransient: true)
        }
        var count = 0
        let chunk = 1 << 20
        do {
            while count < capacity {  // at capacity: more than the file declared, it grew
                let n: Int
                do { n = try FileIO.read(fd, buffer + count, min(chunk, capacity - count)) } catch {
                    throw WebImageError(.loadFailed, "cannot read \(path): \(String(cString: strerror(error.code)))", isTransient: false)
                }
                if n == 0 { break }
                count += n
                if ContinuousClock.now > deadline {
                    throw WebImageError(.timedOut, "reading \(path) did not finish within the loader timeout")
                }
            }
            guard Int64(count) <= limit else {
                throw WebImageError(.tooLarge, "\(path) grew past the limit of \(limit) bytes while being read")
            }
            guard Int64(count) <= Int64(info.st_size) else {
                throw WebImageError(.loadFailed, "\(path) grew while being read", isTransient: true)
            }
        } catch {
            free(buffer)
            throw error
        }
        let data: Data
        if count == 0 {
            free(buffer)
            data = Data()
        } else {
            data = Data(bytesNoCopy: buffer, count: count, deallocator: .free)
        }
        var headers = ["last-modified": lastModified, "content-length": String(count)]
        if let format = ImageFormat.sniff(data) { headers["content-type"] = format.mimeType }
        return LoadResponse(data: data, statusCode: 200, headers: headers, url: url)
    }
}

extension URL {
    /// The package's one rule for "is this a local file": a `file:` URL (the
    /// scheme in any case) or one with no scheme at all (a path). The file loader
    /// loads these; the `webimage` tool counts them as files, not downloads.
    package var isLocalFile: Bool {
        guard let scheme else { return true }
        return scheme.lowercased() == "file"
    }
}
