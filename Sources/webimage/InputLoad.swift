import ArgumentParser
import Foundation
import Synchronization
import UnixSignals
import WebImage
import WebImageKit
#if canImport(Glibc)
import Glibc
@_spi(Internals) import WebImageKit
#endif

/// One input through the manager, then to a file if asked.
struct InputLoad: Sendable {
    let manager: ImageManager
    let context: ImageContext
    let options: ImageOptions
    let out: String?

    struct Record: Sendable {
        var input: String
        var key: String?
        var cacheType: CacheType?
        var size: PixelSize?
        var frames: Int?
        var bytes: Int?
        var output: String?
        var milliseconds: Double
        var error: WebImageError?
        /// Set when the image loaded but could not be cached (a full disk).
        var warning: String?
    }

    func run(_ line: InputSource.Input) async -> Record {
        let started = ContinuousClock.now
        let input = line.text
        var record = Record(input: input, milliseconds: 0)
        do {
            if let problem = line.problem { throw WebImageError(.invalidURL, problem) }
            guard let url = inputURL(input) else { throw WebImageError(.invalidURL, "'\(input)' is not a URL or path") }
            let result = try await manager.loadImage(with: url, options: options, context: context)
            record.key = result.key
            record.cacheType = result.cacheType
            record.size = result.image?.pixelSize
            record.frames = result.image?.frameCount
            record.warning = result.storeFailure.map { "not cached: \($0.message)" }
            var bytes = result.data
            if bytes == nil, let store = manager.store { bytes = try? await store.data(forKey: result.key) }
            record.bytes = bytes?.count
            if let out, let image = result.image {
                let written = try await write(image, bytes: bytes, input: url, key: result.key, into: out)
                record.output = written.path
                record.bytes = written.bytes
            }
        } catch {
            record.error = WebImageError.wrap(error, as: .loadFailed, "loading \(input)")
        }
        let elapsed = ContinuousClock.now - started
        record.milliseconds = (elapsed.timeInterval * 1000).rounded()
        return record
    }

    /// Writes the result in the format the cache holds it in
    /// (``ImageFormat/output(for:requested:canEncode:)``): the bytes the load
    /// returned when they are in that format (an original unchanged, or the
    /// derived bytes just stored), else the image encoded as the manager encodes.
    private func write(_ image: Image, bytes: Data?, input: URL, key: String, into directory: String) async throws -> (path: String, bytes: Int) {
        let coders = manager.configuration.coders
        guard let target = ImageFormat.output(for: image, requested: context.encodeFormat, canEncode: { coders.encoder(for: $0) != nil }) else {
            throw WebImageError(.encodeFailed, "no coder writes \(context.encodeFormat ?? image.format ?? .png)")
        }
        let data: Data
        if let bytes, ImageFormat.sniff(bytes) == target {
            data = bytes
        } else {
            let options = context.encodeOptions ?? manager.configuration.encodeOptions
            data = try await BlockingThreadPool.shared.run { try coders.encode(image, as: target, options: options) }
        }
        let name = OutputFileName.make(for: input, key: key, fileExtension: target.fileExtension)
        // `directory` is absolute (makeDirectory's realpath) and `name` one plain
        // component: joined as text, without a URL's getcwd and stat per image.
        let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
        try OutputFile.write(data, to: path)
        return (path, data.count)
    }
}
