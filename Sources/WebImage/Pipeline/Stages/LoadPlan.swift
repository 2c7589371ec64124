import Foundation

/// What one load reads and writes, worked out once from its URL, options and
/// context, and handed from the caller's task to the coalesced job.
///
/// The grammar of derived keys is ``CacheKey``'s; this only decides which key
/// holds what: an original's bytes live under the plain key, a thumbnail's or a
/// transform's encoded bytes under the derived key.
struct LoadPlan: Sendable {
    let url: URL
    let options: ImageOptions
    let context: ImageContext
    /// The key of the original's bytes: the URL through the key filter.
    let plainKey: String
    /// The key of the result: the plain key for an original's bytes, else derived.
    let key: String
    /// Whether the result's encoded bytes are stored under ``key`` (a thumbnail,
    /// a transform, another format), not the original's.
    let derivesBytes: Bool
    /// Whether the caller wants bytes, not a decoded image (``ImageOptions/avoidDecode``).
    let bytesOnly: Bool
    /// The disk tier of this load: the context's, else the manager's.
    let store: (any CacheStore)?
    /// Whether this load reads the disk tier.
    let readsDisk: Bool
    /// The coalescer's key: the result key and the options that change the work.
    /// Built each time it is read: a hit never reads it (and a warm disk hit only
    /// when a job is running); a job reads it a few times, beside its decode.
    var jobKey: String { Self.jobKey(key: key, options: options) }

    static func jobKey(key: String, options: ImageOptions) -> String {
        key + "|" + String(options.intersection(ImageManager.jobFlags).rawValue)
    }

    /// Where the disk tier holds what this load returns.
    var diskKey: String { derivesBytes ? key : plainKey }
}

extension ImageManager {
    /// The options that change what a job does, so that loads differing in them never share one.
    static let jobFlags: ImageOptions = [.refreshCached, .fromCacheOnly, .fromLoaderOnly, .cacheMemoryOnly, .avoidDecode, .waitStoreCache]

    /// A load's keys: its original's and its result's (``LoadPlan/plainKey``,
    /// ``LoadPlan/key``), and whether the result's bytes are stored under the
    /// second (``LoadPlan/derivesBytes``). The memory tier needs no more.
    func keys(url: URL, options: ImageOptions, context: ImageContext) -> (plainKey: String, key: String, derivesBytes: Bool) {
        let plainKey = cacheKey(for: url, context: context)
        let storesDerived = CacheKey.storesDerivedBytes(options: options, context: context)
        // Bytes of an original live under the plain key; a thumbnail's or a
        // transform's under the derived key, bytes-only or not.
        let key = options.contains(.avoidDecode) && !storesDerived
            ? plainKey : CacheKey.derived(from: plainKey, options: options, context: context, encodeOptions: stages.render.encodeOptions(context))
        return (plainKey, key, storesDerived && key != plainKey)
    }

    func plan(url: URL, options: ImageOptions, context: ImageContext,
              keys known: (plainKey: String, key: String, derivesBytes: Bool)? = nil) -> LoadPlan {
        let (plainKey, key, derivesBytes) = known ?? keys(url: url, options: options, context: context)
        let store = context.store ?? self.store
        return LoadPlan(
            url: url, options: options, context: context, plainKey: plainKey, key: key,
            derivesBytes: derivesBytes,
            bytesOnly: options.contains(.avoidDecode),
            store: store,
            readsDisk: store != nil && context.queryCacheTiers.contains(.disk) && options.isDisjoint(with: [.fromLoaderOnly, .refreshCached])
        )
    }
}
