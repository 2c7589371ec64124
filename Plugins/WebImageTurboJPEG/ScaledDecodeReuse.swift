internal import CJPEGTurboOps
import Foundation
@_spi(WebImageInternal) import WebImage

/// Recent scaled decodes of JPEG files, kept for a few seconds so that another
/// thumbnail of the same file at the same DCT scale starts from its pixels
/// instead of decoding the file again.
///
/// A service is asked for several sizes of one photo close together (a page's
/// `srcset`, a CDN filling its edges after a publish). Each size would decode
/// the whole file's entropy-coded data, which is most of a thumbnail's work
/// (docs/performance.md), although sizes that need the same scale (1/8 for
/// every box up to an eighth of the photo) decode the same pixels. With a
/// `ScaledDecodeReuse`, ``TurboJPEGCoder`` looks the file up by its length and
/// XXH3-128 (the file's bytes, whatever URL brought them; seeded at random per
/// instance, so that no file can be made to collide with another's and take
/// its pixels) and the scale it needs; on
/// a hit it only resamples, orients and crops. The pixels are those a fresh
/// decode makes (the path a decode takes depends only on the file and the
/// scale), so the thumbnail is byte for byte the one it would have been.
///
/// ```swift
/// let coder = TurboJPEGCoder(fallback: nil, reuse: ScaledDecodeReuse(maxBytes: 8 << 20, window: .seconds(10)))
/// ```
///
/// Bounded two ways: at most ``maxBytes`` of pixels (the least recently used
/// go first; a decode larger than a quarter of it is not kept), and none older
/// than ``window``, which a timer enforces, so an idle service holds nothing.
/// `webimage serve` keeps 8 MiB for 10 seconds (`turbojpeg.reuse`); a batch of
/// distinct files gains nothing from it, so the library and `webimage load`
/// keep none by default.
public final class ScaledDecodeReuse: Sendable {
    /// The most bytes of pixels kept.
    public let maxBytes: Int
    /// How long a decode is kept after it was made.
    public let window: Duration

    struct Key: Hashable {
        let low: UInt64, high: UInt64
        let length: Int
        let numerator: Int32
        let allowTruncated: Bool
    }

    private struct State {
        var entries: [Key: (pixels: ScaledPixels, madeAt: ContinuousClock.Instant, used: UInt64)] = [:]
        var bytes = 0
        var clock: UInt64 = 0
        var hits = 0
        /// Decodes running now, which a thumbnail of the same key waits for.
        var running: [Key: Pending] = [:]
    }

    private let state = Lock(State())
    /// The hash's seed: strangers choose the files, and must not know it.
    private let seed = UInt64.random(in: .min ... .max)
    private let sweeper = Lock<CacheSweeper?>(nil)

    /// - Parameters:
    ///   - maxBytes: the most bytes of pixels kept (a 12 MP photo at 1/8 is
    ///     0.56 MB, at 2/8 2.25 MB).
    ///   - window: how long a decode is kept.
    public init(maxBytes: Int, window: Duration) {
        self.maxBytes = max(0, maxBytes)
        self.window = window
        // The timer ends with this object (the sweeper cancels it when released).
        // Every quarter window, so a decode is gone within a quarter window past its
        // own (every window let it live up to two); at most once a second: a lookup
        // drops a stale decode itself.
        let timer = CacheSweeper(interval: max(window / 4, .seconds(1))) { [weak self] in
            guard let self else { return false }
            self.dropExpired(now: .now)
            return true
        }
        sweeper.withLock { $0 = timer }
    }

    /// The bytes of pixels kept now.
    public var bytes: Int { state.withLock { $0.bytes } }
    /// The decodes kept now.
    public var count: Int { state.withLock { $0.entries.count } }
    /// Thumbnails that started from a kept decode, since this was made.
    public var hits: Int { state.withLock { $0.hits } }

    /// ``bytes``, ``count`` and ``hits`` at one moment.
    var counts: (bytes: Int, entries: Int, hits: Int) { state.withLock { ($0.bytes, $0.entries.count, $0.hits) } }

    func key(_ bytes: UnsafeRawBufferPointer, numerator: Int32, allowTruncated: Bool) -> Key {
        let hash = XXH3.hash128(bytes, seed: seed)
        return Key(low: hash.low, high: hash.high, length: bytes.count, numerator: numerator, allowTruncated: allowTruncated)
    }

    /// The kept pixels for `key`, else those of a decode of the same key that is
    /// running now (waited for: several sizes of one photo asked for at once
    /// decode it once), else `decode`'s, kept.
    func pixels(for key: Key, decode: () throws -> ScaledPixels) throws -> ScaledPixels {
        let now = ContinuousClock.now
        enum Found { case kept(ScaledPixels), running(Pending), mine(Pending) }
        let found = state.withLock { state -> Found in
            if let entry = state.entries[key] {
                if now - entry.madeAt < window {
                    state.clock &+= 1
                    state.entries[key]?.used = state.clock
                    state.hits += 1
                    return .kept(entry.pixels)
                }
                state.entries[key] = nil
                state.bytes -= entry.pixels.byteCount
            }
            if let running = state.running[key] { return .running(running) }
            let pending = Pending()
            state.running[key] = pending
            return .mine(pending)
        }
        switch found {
        case .kept(let pixels):
            return pixels
        case .running(let pending):
            // Nil when that decode failed: this one tries itself (and meets the same error).
            // The wait gives this thread's core to another job of the pool meanwhile.
            if let pixels = BlockingThreadPool.blocking({ pending.wait() }) {
                state.withLock { $0.hits += 1 }
                return pixels
            }
            return try decode()
        case .mine(let pending):
            let pixels: ScaledPixels
            do { pixels = try decode() } catch {
                state.withLock { _ = $0.running.removeValue(forKey: key) }
                pending.finish(nil)
                throw error
            }
            keep(pixels, for: key)
            pending.finish(pixels)
            return pixels
        }
    }

    private func keep(_ pixels: ScaledPixels, for key: Key) {
        let now = ContinuousClock.now
        state.withLock { state in
            state.running[key] = nil
            guard pixels.byteCount <= maxBytes / 4 else { return }
            state.clock &+= 1
            if let old = state.entries.updateValue((pixels, now, state.clock), forKey: key) { state.bytes -= old.pixels.byteCount }
            state.bytes += pixels.byteCount
            while state.bytes > maxBytes, let oldest = state.entries.min(by: { $0.value.used < $1.value.used }) {
                state.entries[oldest.key] = nil
                state.bytes -= oldest.value.pixels.byteCount
            }
        }
    }

    func dropExpired(now: ContinuousClock.Instant) {
        // Returned, so that the pixels (megabytes) are freed after the lock is let go.
        let dropped = state.withLock { state -> [ScaledPixels] in
            let old = state.entries.filter { now - $0.value.madeAt >= window }
            for (key, entry) in old {
                state.entries[key] = nil
                state.bytes -= entry.pixels.byteCount
            }
            return old.map(\.value.pixels)
        }
        withExtendedLifetime(dropped) {}
    }
}

/// A scaled decode's pixels (malloc'd by the C side), freed with the last reference.
/// `@unchecked Sendable`: written once by the decode, then only read.
final class ScaledPixels: @unchecked Sendable {
    let pixels: UnsafeMutablePointer<UInt8>
    let width: Int32, height: Int32, bands: Int32
    let path: JPEGThumbnailDecoder.Path

    init(_ decoded: JPEGThumbnailDecoder.Pixels) {
        pixels = decoded.pixels
        (width, height, bands, path) = (decoded.width, decoded.height, decoded.bands, decoded.path)
    }

    var byteCount: Int { Int(width) * Int(height) * Int(bands) }
    var raw: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: pixels, count: byteCount) }

    deinit { CJT_free(pixels) }
}

/// A decode running on a pool thread, which others of the same key wait for
/// (on pool threads too: the decode they wait for is already running, so the
/// wait ends when it does).
final class Pending: @unchecked Sendable {
    private let condition = NSCondition()
    private var done = false
    private var result: ScaledPixels?

    func wait() -> ScaledPixels? {
        condition.lock()
        defer { condition.unlock() }
        while !done { condition.wait() }
        return result
    }

    func finish(_ pixels: ScaledPixels?) {
        condition.lock()
        result = pixels
        done = true
        condition.broadcast()
        condition.unlock()
    }
}
