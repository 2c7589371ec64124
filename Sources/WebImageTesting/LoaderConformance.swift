public import Foundation
import Synchronization
@_spi(WebImageInternal) public import WebImage

/// Checks the requirements of ``Loader`` against a real loader and real resources.
///
/// The caller provides the URLs, because only the caller knows how to serve them
/// (a file in a temporary directory, a route of a loopback HTTP server).
public struct LoaderConformance: Sendable {
    /// Resources the suite loads.
    public struct Fixtures: Sendable {
        /// A resource that loads with these exact bytes (at least 1 KiB, so a size limit below it can be tested).
        public var existing: URL
        public var existingData: Data
        /// A resource that does not exist.
        public var missing: URL
        /// A resource that takes at least 20 s to load: the check cancels after 200 ms
        /// (a loaded CI machine can delay that by seconds), so that the cancellation
        /// lands mid-load and must end it within 19 s of the load's start, before it
        /// would have ended by itself; without one, the check only asks that a
        /// cancelled load does not hang.
        public var slow: URL?

        public init(existing: URL, existingData: Data, missing: URL, slow: URL? = nil) {
            self.existing = existing
            self.existingData = existingData
            self.missing = missing
            self.slow = slow
        }
    }

    public let loader: any Loader
    public let fixtures: Fixtures

    public init(loader: any Loader, fixtures: Fixtures) {
        self.loader = loader
        self.fixtures = fixtures
    }

    public func run() async throws {
        var checker = Checker(suite: "LoaderConformance")
        let loader = loader
        let fixtures = fixtures

        await checker.check("accepts its URLs") {
            try expect(loader.canLoad(fixtures.existing), "canLoad is false for \(fixtures.existing)")
        }

        await checker.check("loads the exact bytes and reports progress") {
            let seen = ProgressLog()
            let response = try await loader.load(LoadRequest(url: fixtures.existing)) { seen.append($0) }
            try expect(response.data == fixtures.existingData, "got \(response.data.count) bytes, expected \(fixtures.existingData.count)")
            try expect((200..<300).contains(response.statusCode), "status \(response.statusCode)")
            let last = seen.values.last
            try expect(last == nil || last!.received == Int64(fixtures.existingData.count), "last progress says \(last!.received) bytes")
            try expect(seen.values.map(\.received) == seen.values.map(\.received).sorted(), "progress went backwards")
        }

        await checker.check("a missing resource is a permanent notFound") {
            do {
                let response = try await loader.load(LoadRequest(url: fixtures.missing)) { _ in }
                throw Expectation(message: "loaded \(response.data.count) bytes with status \(response.statusCode)")
            } catch let error as WebImageError {
                try expect(error.code == .notFound, "code is \(error.code), expected notFound")
                try expect(!error.isTransient, "notFound is classified transient")
            }
        }

        await checker.check("a response over maxResponseSize is a permanent tooLarge") {
            let request = LoadRequest(url: fixtures.existing, maxResponseSize: Int64(fixtures.existingData.count / 2))
            do {
                _ = try await loader.load(request) { _ in }
                throw Expectation(message: "loaded a resource over its size limit")
            } catch let error as WebImageError {
                try expect(error.code == .tooLarge, "code is \(error.code), expected tooLarge")
                try expect(!error.isTransient, "tooLarge is classified transient")
            }
        }

        await checker.check("a cancelled task stops loading") {
            let url = fixtures.slow ?? fixtures.existing
            let started = ContinuousClock.now
            let task = Task { try await loader.load(LoadRequest(url: url)) { _ in } }
            if fixtures.slow != nil { try await Task.sleep(for: .milliseconds(200)) }
            task.cancel()
            do {
                _ = try await task.value
                try expect(fixtures.slow == nil, "a slow load ran to the end after cancellation")
            } catch is CancellationError {
            } catch let error as WebImageError {
                try expect(error.code == .cancelled, "cancellation threw \(error.code), expected cancelled")
            }
            // Before the slow load would have ended by itself (20 s from its start):
            // a loader that ignores cancellation ends there or later. Measured from
            // the start, not from the cancel, so that a starved checking task does
            // not count against the loader (10 s from the cancel failed at 11.3 s
            // on a busy machine). Without a slow resource there is no such moment:
            // a quick load may end either way, whenever a busy machine lets it.
            if fixtures.slow != nil {
                let bound: Duration = .seconds(19)
                try expect(ContinuousClock.now - started < bound, "the cancelled load ended \(ContinuousClock.now - started) after it started")
            }
        }

        try checker.finish()
    }
}

/// A thread-safe list of progress values.
final class ProgressLog: Sendable {
    private let storage = Lock<[LoadProgress]>([])
    func append(_ value: LoadProgress) { storage.withLock { $0.append(value) } }
    var values: [LoadProgress] { storage.withLock { $0 } }
}
