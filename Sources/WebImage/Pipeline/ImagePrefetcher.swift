public import Foundation

/// Warms the caches for a batch of URLs, a few at a time, at low priority.
///
/// ```swift
/// let prefetcher = ImagePrefetcher(manager: manager, maxConcurrent: 4)
/// let done = await prefetcher.prefetch(urls) { print("\($0.finished)/\($0.total)") }
/// ```
/// Cancel by cancelling the task that awaits ``prefetch(_:progress:)``: loads in
/// flight are cancelled and no new ones start.
public struct ImagePrefetcher: Sendable {
    /// Counts, after SDWebImage's prefetcher.
    public struct Progress: Hashable, Sendable {
        /// Loads that ended, successfully or not.
        public var finished: Int
        /// Loads that failed (included in ``finished``).
        public var skipped: Int
        /// URLs in the batch.
        public var total: Int

        public init(finished: Int, skipped: Int, total: Int) {
            self.finished = finished
            self.skipped = skipped
            self.total = total
        }
    }

    public let manager: ImageManager
    public let maxConcurrent: Int
    public let options: ImageOptions
    public let context: ImageContext

    /// - Parameters:
    ///   - manager: the manager whose caches are warmed.
    ///   - maxConcurrent: loads at once; default 3.
    ///   - options: default `.lowPriority`, so live requests go first.
    ///   - context: applied to every load (a thumbnail size, for instance).
    public init(manager: ImageManager, maxConcurrent: Int = 3, options: ImageOptions = [.lowPriority], context: ImageContext = ImageContext()) {
        self.manager = manager
        self.maxConcurrent = max(1, maxConcurrent)
        self.options = options
        self.context = context
    }

    /// Loads every URL into the caches, at most ``maxConcurrent`` at once.
    /// - Returns: the final counts (fewer finished than total if cancelled).
    @discardableResult
    public func prefetch(_ urls: [URL], progress: (@Sendable (Progress) -> Void)? = nil) async -> Progress {
        var counts = Progress(finished: 0, skipped: 0, total: urls.count)
        await withTaskGroup(of: Bool.self) { group in
            var iterator = urls.makeIterator()
            func startNext() -> Bool {
                guard !Task.isCancelled, let url = iterator.next() else { return false }
                group.addTask { [manager, options, context] in
                    (try? await manager.loadImage(with: url, options: options, context: context)) != nil
                }
                return true
            }
            for _ in 0..<maxConcurrent where !startNext() { break }
            for await succeeded in group {
                counts.finished += 1
                if !succeeded { counts.skipped += 1 }
                progress?(counts)
                _ = startNext()
            }
        }
        return counts
    }
}
