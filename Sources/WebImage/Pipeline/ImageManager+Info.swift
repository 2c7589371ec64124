public import Foundation

extension ImageManager {
    /// Describes an image from its header: format, size, frames and their
    /// durations, loop count, orientation, alpha and colour profile.
    ///
    /// The bytes come from the disk tier when it has them, else from the loader;
    /// nothing is decoded beyond the header (where the coder can read headers
    /// alone, as ``ImageCoder/info(_:)`` says) and no tier is written.
    ///
    /// - Returns: the description, and where the bytes came from (`.disk` or `.none`).
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
        let key = cacheKey(for: url, context: context)
        var data: Data?
        var cacheType = CacheType.none
        if let store = context.store ?? store, context.queryCacheTiers.contains(.disk),
           let bytes = try? await store.data(forKey: key) {
            data = bytes
            cacheType = .disk
        }
        if data == nil {
            stage.value = .download
            data = try await stages.original.load(url: url, options: [], context: context, validators: nil) { _ in }.data
            stage.value = .decode
        }
        let bytes = data ?? Data()
        let coder = context.coder, coders = configuration.coders
        guard coder != nil || coders.decoder(for: bytes) != nil else {
            let what = ImageFormat.sniff(bytes).map { "\($0) data, which no registered coder reads" } ?? "data no registered coder recognises"
            throw WebImageError(.unsupportedFormat, "\(url.absoluteString) is \(what)")
        }
        let info = try await configuration.pool.run {
            do { return try coder?.info(bytes) ?? coders.info(bytes) } catch {
                throw WebImageError.wrap(error, as: .decodeFailed, "reading the header of \(url.absoluteString)")
            }
        }
        return (info, cacheType)
    }
}
