public import Foundation

extension ImageManager {
    /// Describes an image from its header: format, size, frames and their
    /// durations, loop count, orientation, alpha and colour profile.
    ///
    /// The original's bytes are loaded as a bytes-only load of the URL loads them
    /// (``ImageOptions/avoidDecode``): from the memory or disk tier when one has
    /// them, else downloaded once however many loads and infos want the URL at
    /// once, within the originals' budget, with the blocklist asked first, and
    /// stored on disk (not in the memory tier; nowhere where the context's
    /// ``ImageContext/storeCacheTiers`` leaves the disk out, as `webimage info`
    /// does) so that the next info, and the URL's thumbnails, do not download it again. Nothing is decoded beyond the
    /// header (where the coder can read headers alone, as ``ImageCoder/info(_:)`` says).
    ///
    /// - Returns: the description, and where the bytes came from (`.memory`, `.disk`, `.shared` or `.none`).
    /// - Throws: ``WebImageError``: the loader's errors, ``WebImageError/Code/unsupportedFormat``
    ///   when no coder recognises the bytes, the coder's errors for a header it cannot read.
    ///
    /// The context's ``ImageContext/deadline`` bounds it as it bounds a load: past
    /// it, `timedOut` while the download runs, `workTimedOut` elsewhere.
    public func info(for url: URL, context: ImageContext = ImageContext()) async throws -> (info: ImageInfo, cacheType: CacheType) {
        let stage = StageBox()
        do {
            try judge(url, context)
            return try await Self.within(context.deadline, url: url, stage: { stage.value }) {
                try await self.readInfo(for: url, context: context, stage: stage)
            }
        } catch {
            throw WebImageError.wrap(error, as: .loadFailed, "reading the header of \(url.absoluteString)")
        }
    }

    private func readInfo(for url: URL, context: ImageContext, stage: StageBox) async throws -> (info: ImageInfo, cacheType: CacheType) {
        var original = context
        original.thumbnailPixelSize = nil
        original.transformer = nil
        // A header is no reason to hold an original in memory; the disk keeps it.
        original.storeCacheTiers.remove(.memory)
        stage.value = .download
        let loaded = try await loadImage(with: url, options: .avoidDecode, context: original)
        stage.value = .decode
        let bytes = loaded.data ?? Data()
        let coder = context.coder, coders = configuration.coders
        guard coder != nil || coders.decoder(for: bytes) != nil else {
            let what = ImageFormat.sniff(bytes).map { "\($0) data, which no registered coder reads" } ?? "data no registered coder recognises"
            throw coders.noCoder("\(url.absoluteString) is \(what)")
        }
        let info = try await configuration.pool.run {
            do { return try coder?.info(bytes) ?? coders.info(bytes) } catch {
                throw WebImageError.wrap(error, as: .decodeFailed, "reading the header of \(url.absoluteString)")
            }
        }
        return (info, loaded.cacheType)
    }
}
