public import Foundation
import Synchronization

/// A load under way: its progress, its result, and a way to cancel it.
///
/// ```swift
/// let task = manager.imageTask(with: url)
/// Task { for await p in task.progress { print(p.received, p.expected ?? -1) } }
/// let result = try await task.result
/// ```
public final class ImageTask: Sendable {
    public let url: URL
    /// Bytes received, as they arrive; finishes when the task ends.
    public let progress: AsyncStream<LoadProgress>
    private let task: Task<ImageResult, any Error>

    init(url: URL, start: @escaping @Sendable (@escaping @Sendable (LoadProgress) -> Void) async throws -> ImageResult) {
        self.url = url
        let (stream, continuation) = AsyncStream.makeStream(of: LoadProgress.self, bufferingPolicy: .bufferingNewest(16))
        self.progress = stream
        self.task = Task {
            defer { continuation.finish() }
            return try await start { continuation.yield($0) }
        }
    }

    /// The result; throws ``WebImageError``.
    public var result: ImageResult {
        get async throws { try await task.value }
    }

    /// Cancels this caller's interest; shared work stops when no caller is left.
    public func cancel() { task.cancel() }

    public var isCancelled: Bool { task.isCancelled }
}

extension ImageManager {
    /// Starts a load and returns its handle.
    ///
    /// - Parameters:
    ///   - url: as for ``loadImage(with:options:context:progress:)``.
    ///   - options: as for ``loadImage(with:options:context:progress:)``.
    ///   - context: as for ``loadImage(with:options:context:progress:)``.
    ///   - slot: an owner key, such as a connection or view identifier. A new load
    ///     in the same slot cancels the one before it, as a reused view cancels its
    ///     old request.
    public func imageTask(
        with url: URL,
        options: ImageOptions = [],
        context: ImageContext = ImageContext(),
        slot: String? = nil
    ) -> ImageTask {
        let task = ImageTask(url: url) { progress in
            try await self.loadImage(with: url, options: options, context: context, progress: progress)
        }
        guard let slot else { return task }
        let previous = slots.withLock { slots in
            defer { slots[slot] = task }
            return slots[slot]
        }
        previous?.cancel()
        Task { [weak self] in
            _ = try? await task.result
            self?.slots.withLock { slots in
                if slots[slot] === task { slots[slot] = nil }
            }
        }
        return task
    }

    /// Cancels the load in a slot, if any.
    public func cancelSlot(_ slot: String) {
        slots.withLock { $0.removeValue(forKey: slot) }?.cancel()
    }
}
