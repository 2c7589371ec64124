public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Loads `file://` URLs and plain paths, with the limits of any loader.
///
/// Refuses directories, unreadable files and files over the size limit with
/// typed errors; reads on the blocking pool. Responses carry a `Content-Type`
/// from sniffing and a `Last-Modified` from the file's modification time, so a
/// `.refreshCached` load of a file that has not changed is answered 304.
public struct FileLoader: Loader {
    /// The largest file loaded, in bytes. Default 64 MiB, as for network loads.
    public var maxFileSize: Int64
    private let pool: BlockingThreadPool

    public init(maxFileSize: Int64 = 64 << 20, pool: BlockingThreadPool = .shared) {
        self.maxFileSize = maxFileSize
        self.pool = pool
    }

    public func canLoad(_ url: URL) -> Bool {
        url.isFileURL || url.scheme == nil
    }

    public func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        let url = request.url
        let path = url.isFileURL ? url.path : url.relativeString.removingPercentEncoding ?? url.relativeString
        let limit = min(request.maxResponseSize ?? maxFileSize, maxFileSize)
        let response = try await pool.run { () throws -> LoadResponse in
            var info = stat()
            guard stat(path, &info) == 0 else {
                let code = errno
                throw WebImageError(code == ENOENT || code == ENOTDIR ? .notFound : .loadFailed,
                                    "\(path): \(String(cString: strerror(code)))", isTransient: false)
            }
            guard (info.st_mode & S_IFMT) != S_IFDIR else {
                throw WebImageError(.invalidURL, "\(path) is a directory, not an image file")
            }
            guard Int64(info.st_size) <= limit else {
                throw WebImageError(.tooLarge, "\(path) is \(info.st_size) bytes, over the limit of \(limit)")
            }
            let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec))
            let lastModified = HTTPDate.format(modified)
            if let since = request.ifModifiedSince, since == lastModified {
                return LoadResponse(data: Data(), statusCode: 304, headers: ["last-modified": lastModified], url: url)
            }
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw WebImageError(.forbidden, "\(path) is not readable: \(String(cString: strerror(errno)))")
            }
            defer { try? handle.close() }
            let data: Data
            do {
                data = try handle.read(upToCount: Int(limit) + 1) ?? Data()
            } catch {
                throw WebImageError(.loadFailed, "cannot read \(path): \(error.localizedDescription)", isTransient: false, underlying: error)
            }
            guard data.count <= limit else {
                throw WebImageError(.tooLarge, "\(path) grew past the limit of \(limit) bytes while being read")
            }
            var headers = ["last-modified": lastModified, "content-length": String(data.count)]
            if let format = ImageFormat.sniff(data) { headers["content-type"] = format.mimeType }
            return LoadResponse(data: data, statusCode: 200, headers: headers, url: url)
        }
        try Task.checkCancellation()
        progress(LoadProgress(received: Int64(response.data.count), expected: Int64(response.data.count)))
        return response
    }
}

/// RFC 9110 IMF-fixdate, the form of `Last-Modified` and `If-Modified-Since`.
/// Formatted with `gmtime_r`: a `DateFormatter` per load is costly on Linux, and
/// this format has no locale in it.
enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func format(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
