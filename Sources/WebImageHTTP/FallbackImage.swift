public import Foundation
public import WebImage
#if canImport(Glibc)
import Glibc
#endif

extension ImageEndpoint {
    /// An operator's image answered in place of an origin's failure
    /// (`thumbnail.fallbackImage`): read and checked once, when the settings are
    /// made, and thumbnailed from those bytes, never through the request loaders.
    /// So it works whatever the loader policy is: `serve`'s SSRF guard refuses
    /// file loads, and the fallback is no request's file.
    ///
    /// ```swift
    /// settings.fallbackImage = try ImageEndpoint.FallbackImage(contentsOf: URL(fileURLWithPath: "/srv/missing.png"))
    /// ```
    public struct FallbackImage: Sendable {
        /// The file it was read from.
        public let file: URL
        /// Its bytes, as read at start-up.
        public let data: Data
        /// The URL its thumbnails are cached under: the file's name and a digest of
        /// its bytes, so a changed file is a new entry, never a stale one.
        let url: URL

        /// The largest fallback file read.
        public static let maxBytes = 16 << 20

        /// Reads and checks the file.
        /// - Throws: `WebImageError` `.invalidArgument` saying what is wrong: it is
        ///   missing or unreadable, a directory or no regular file, larger than
        ///   ``maxBytes``, or not an image (by its first bytes).
        public init(contentsOf file: URL) throws {
            let path = file.path
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw WebImageError(.invalidArgument, "\(path): \(String(cString: strerror(errno)))")
            }
            guard (info.st_mode & S_IFMT) == S_IFREG else {
                throw WebImageError(.invalidArgument, "\(path) is \((info.st_mode & S_IFMT) == S_IFDIR ? "a directory" : "not a regular file"), not an image file")
            }
            guard Int(info.st_size) <= Self.maxBytes else {
                throw WebImageError(.invalidArgument, "\(path) is \(info.st_size) bytes; a fallback image may have \(Self.maxBytes)")
            }
            guard access(path, R_OK) == 0 else {
                throw WebImageError(.invalidArgument, "\(path) cannot be read: \(String(cString: strerror(errno)))")
            }
            let data: Data
            do { data = try Data(contentsOf: file) } catch {
                throw WebImageError(.invalidArgument, "\(path) cannot be read")
            }
            guard let format = ImageFormat.sniff(data) else {
                throw WebImageError(.invalidArgument, "\(path) is not an image: its first bytes are no format this library knows")
            }
            self.file = file
            self.data = data
            let digest = String(XXH64.hash(data), radix: 16)
            let name = file.lastPathComponent.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "image"
            url = URL(string: "webimage-fallback://\(digest)/\(name)") ?? URL(string: "webimage-fallback://\(digest)/image.\(format.fileExtension)")!
        }

        /// Checks that `coders` decode it, whole: a file whose header reads but
        /// whose pixels do not (cut short, corrupted) is refused at start-up too,
        /// not found out at the first failing origin.
        /// - Throws: `WebImageError` `.invalidArgument` naming the file.
        public func check(with coders: CoderRegistry) throws {
            guard coders.decoder(for: data) != nil else {
                throw WebImageError(.invalidArgument, "\(file.path): no coder here decodes it")
            }
            do { _ = try coders.decode(data, options: DecodeOptions()) } catch {
                throw WebImageError(.invalidArgument, "\(file.path) does not decode: \(WebImageError.wrap(error, as: .decodeFailed, "decoding").message)")
            }
        }

        /// A loader that answers every request with the fallback's bytes: the
        /// manager thumbnails them like any original, with nothing fetched.
        var loader: any Loader { BytesLoader(data: data) }
    }
}

/// Answers every URL with the same bytes (the fallback image's).
private struct BytesLoader: Loader {
    let data: Data
    func canLoad(_ url: URL) -> Bool { url.scheme == "webimage-fallback" }
    func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        LoadResponse(data: data, statusCode: 200, headers: [:], url: request.url)
    }
}
