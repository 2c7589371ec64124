import Foundation
import Logging

extension ImageManager {
    /// The coalesced job of one load: the derived result from disk, else the
    /// original from disk or the loader; then one decode (with the transform and,
    /// for derived bytes wanted now, the encode, in one pool job), the stores, the
    /// memory tier.
    func fetch(_ plan: LoadPlan, firstRead: DiskRead?, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> ImageResult {
        let (url, plainKey, key, options, context, store) = (plan.url, plan.plainKey, plan.key, plan.options, plan.context, plan.store)
        let bytesOnly = plan.bytesOnly
        let jobKey = plan.jobKey
        jobStages.set(jobKey, .lookup)
        defer { jobStages.clear(jobKey) }
        /// One disk lookup, unless the caller's task already made it.
        func lookup(_ lookupKey: String) async -> CacheEntry? {
            // An original another job just downloaded, or a write still on its way to the store.
            if let firstRead, firstRead.key == lookupKey { return firstRead.entry ?? pending.entry(forKey: lookupKey) }
            guard plan.readsDisk else { return nil }
            if let entry = pending.entry(forKey: lookupKey) { return entry }
            guard let store else { return nil }
            return await read(store, lookupKey)
        }

        // A derived result already on disk: its bytes are the finished image.
        if plan.derivesBytes, let entry = await lookup(key) {
            metrics.hit(entry.cacheType)
            if bytesOnly {
                rememberData(entry.data, key: key, context: context, checksum: entry.checksum, madeAt: entry.metadata.storedAt)
                return ImageResult(image: nil, data: entry.data, cacheType: entry.cacheType, key: key, url: url,
                                   checksum: entry.checksum, lastModified: entry.metadata.storedAt)
            }
            do {
                let image = try await decode(entry.data, plan, derived: true).image
                remember(image, key: key, context: context)
                return ImageResult(image: image, data: entry.data, cacheType: entry.cacheType, key: key, url: url,
                                   checksum: entry.checksum, lastModified: entry.metadata.storedAt)
            } catch let error as WebImageError where Self.blamesURL(error) {
                // Stored bytes no coder reads: a damaged entry. Removed; the result is made again below.
                await discard(key, from: store, error)
            }
        }

        /// The original from the loader, one download per URL. It is admitted to the
        /// originals' budget before it starts (while there is room, and its origin
        /// holds less than its share), charged nothing until its response declares
        /// a length or bytes arrive, then what exists, held until this job ends.
        var original: ByteBudget.Reservation?
        defer { original?.release() }
        func downloadSource() async throws -> (data: Data, cacheType: CacheType, response: LoadResponse?) {
            original?.release()
            jobStages.set(jobKey, .waitingForOriginals)
            let reservation: ByteBudget.Reservation
            do { reservation = try await originals.reserve(0, origin: Self.originKey(url)) } catch {
                throw WebImageError.wrap(error, as: .cancelled, "waiting for room in the originals' budget")
            }
            original = reservation
            let reporting: @Sendable (LoadProgress) -> Void = { value in
                reservation.grow(to: Int(clamping: max(value.expected ?? 0, value.received)))
                progress(value)
            }
            jobStages.set(jobKey, .download)
            do {
                let source = try await download(plan, progress: reporting)
                reservation.resize(to: source.data.count)
                return source
            } catch {
                throw recordFailure(error, url: url)
            }
        }
        /// The downloaded original, visible to other jobs (other sizes of this URL)
        /// until this job ends or its store write takes over.
        var heldOriginal: UInt64?
        defer { if let heldOriginal { pending.release(plainKey, id: heldOriginal) } }
        func share(_ source: (data: Data, cacheType: CacheType, response: LoadResponse?)) {
            guard source.cacheType == .none else { return }
            if let heldOriginal { pending.release(plainKey, id: heldOriginal) }
            heldOriginal = pending.hold(source.data, key: plainKey, metadata: CacheMetadata(contentType: source.response?.contentType))
        }
        var source: (data: Data, cacheType: CacheType, response: LoadResponse?)
        if let entry = await lookup(plainKey) {
            metrics.hit(entry.cacheType)
            source = (entry.data, entry.cacheType, nil)
        } else if options.contains(.fromCacheOnly) {
            metrics.miss()
            throw WebImageError(.notCached, "\(url.absoluteString) is not in the cache and .fromCacheOnly forbids loading it")
        } else {
            metrics.miss()
            source = try await downloadSource()
            share(source)
        }

        if bytesOnly && !plan.derivesBytes {
            var failure: WebImageError?
            if source.cacheType == .none {
                // Bytes only, but still images: some coder must recognise them before
                // they are cached (a pipeline with no coders at all stores anything).
                let recognised = context.coder.map { $0.canDecode(source.data) } ?? (configuration.coders.decoder(for: source.data) != nil)
                guard recognised || configuration.coders.coders.isEmpty else {
                    throw recordFailure(WebImageError(.unsupportedFormat, "\(url.absoluteString) is not an image any coder recognises"), url: url)
                }
                failure = await storeOriginal(source.data, response: source.response, plan)
            }
            rememberData(source.data, key: plainKey, context: context, checksum: nil, madeAt: nil)
            return ImageResult(image: nil, data: source.data, cacheType: source.cacheType, key: plainKey, url: url, storeFailure: failure)
        }

        // The derived result's bytes are made in the decode's own pool job when the
        // caller wants them (bytes only) or waits for the store anyway; else they
        // are made and stored in the background.
        let encodesNow = plan.derivesBytes && (bytesOnly || options.contains(.waitStoreCache))
        var decoded: Decoded?
        var reloaded = false
        while decoded == nil {
            do {
                decoded = try await decode(source.data, plan, derived: false, encoding: encodesNow)
            } catch {
                // Only a failure of the URL itself blocks it: bytes no coder can read. A
                // failure that belongs to this request (a transform, a pixel limit the
                // options could lift) says nothing about the next load of the URL.
                let failure = WebImageError.wrap(error, as: .decodeFailed, "decoding \(url.absoluteString)")
                guard Self.blamesURL(failure) else {
                    metrics.failed(failure.code)
                    throw failure
                }
                guard source.cacheType != .none else { throw recordFailure(failure, url: url) }
                guard !reloaded else { throw failure }
                // Cached bytes that no coder reads are a damaged entry, not the URL's
                // fault: removed, and the original loaded again (once: a fresh
                // download that fails to decode is the URL's).
                await discard(plainKey, from: store, failure)
                guard !options.contains(.fromCacheOnly) else { throw failure }
                source = try await downloadSource()
                share(source)
                reloaded = true
            }
        }
        guard let decoded else { throw WebImageError(.decodeFailed, "decoding \(url.absoluteString) made no image") }
        let image = decoded.image
        var storeFailure: WebImageError?
        if source.cacheType == .none {
            jobStages.set(jobKey, .store)
            storeFailure = await storeOriginal(source.data, response: source.response, plan)
        }
        guard plan.derivesBytes else {
            remember(image, key: key, context: context)
            return ImageResult(image: image, data: source.data, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure)
        }
        guard encodesNow, let encoded = decoded.encoded else {
            remember(image, key: key, context: context)
            storeDerivedInBackground(image, plan)
            return ImageResult(image: image, data: nil, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure)
        }
        var checksum: UInt64?
        let madeAt = Date()
        if bytesOnly {
            guard let encoded else {
                throw WebImageError(.encodeFailed, "the cache serializer made no bytes for \(key), which .avoidDecode asked for")
            }
            // Hashed once here: the memory tier keeps it, so its hits carry an ETag
            // without hashing again (the store's codec hashes for its own checksum).
            checksum = XXH64.hash(encoded)
            rememberData(encoded, key: key, context: context, checksum: checksum, madeAt: madeAt)
        } else {
            remember(image, key: key, context: context)
        }
        if let encoded, let store, context.storeCacheTiers.contains(.disk), !options.contains(.cacheMemoryOnly) {
            let metadata = CacheMetadata(contentType: ImageFormat.sniff(encoded)?.mimeType)
            if let failure = await write(encoded, key: key, metadata: metadata, store: store, wait: options.contains(.waitStoreCache)) {
                storeFailure = storeFailure ?? failure
            }
        }
        return ImageResult(image: image, data: encoded, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure,
                           checksum: checksum, lastModified: madeAt)
    }

    /// The origin a download is charged to in the originals' budget: scheme, host and port.
    static func originKey(_ url: URL) -> String {
        "\(url.scheme?.lowercased() ?? "")://\(url.host?.lowercased() ?? "")\(url.port.map { ":\($0)" } ?? "")"
    }

    func recordFailure(_ error: any Error, url: URL) -> WebImageError {
        let error = WebImageError.wrap(error, as: .loadFailed, "loading \(url.absoluteString)")
        metrics.failed(error.code)
        if blocklist.record(error, for: url.absoluteString) {
            configuration.logger.info("blocked a failing URL", metadata: ["url": "\(url.absoluteString)", "error": "\(error)"])
        }
        return error
    }

    /// Whether a decode failure is the URL's fault (its bytes are no image any
    /// coder reads), rather than this request's (transform, pixel limit, options).
    static func blamesURL(_ error: WebImageError) -> Bool {
        error.code == .unsupportedFormat || error.code == .decodeFailed
    }

}
