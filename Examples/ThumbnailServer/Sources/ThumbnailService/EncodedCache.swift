import Foundation
import Synchronization

/// Finished thumbnails in memory: the encoded bytes a response carries, with their
/// ETag and size, by the manager's result key, bounded in bytes. When over its
/// limit it drops the least recently used entries down to three quarters of it.
///
/// A thumbnail service serves bytes, so it caches bytes: the manager's own memory
/// cache holds decoded images, which a hit would have to encode again.
final class EncodedCache: Sendable {
    struct Entry: Sendable {
        var data: Data
        var etag: String
        var size: String?

        init(data: Data, etag: String, size: String?) {
            self.data = data
            self.etag = etag
            self.size = size
        }

        /// An entry whose strong ETag is a digest of the bytes.
        init(data: Data, size: String?) {
            self.init(data: data, etag: "\"\(Self.digest(data))\"", size: size)
        }

        /// FNV-1a, 64 bits, and the length: a validator that changes when the bytes do.
        static func digest(_ data: Data) -> String {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in data { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            return String(hash, radix: 16) + "-" + String(data.count, radix: 16)
        }
    }

    private struct State {
        var entries: [String: (entry: Entry, used: UInt64)] = [:]
        var bytes = 0
        var clock: UInt64 = 0
    }

    private let state = Mutex(State())
    let limit: Int

    init(limit: Int) { self.limit = limit }

    func entry(forKey key: String) -> Entry? {
        state.withLock { state in
            guard let found = state.entries[key] else { return nil }
            state.clock += 1
            state.entries[key] = (found.entry, state.clock)
            return found.entry
        }
    }

    func set(_ entry: Entry, forKey key: String) {
        guard entry.data.count <= limit / 4 else { return }
        state.withLock { state in
            state.clock += 1
            if let old = state.entries.updateValue((entry, state.clock), forKey: key) { state.bytes -= old.entry.data.count }
            state.bytes += entry.data.count
            guard state.bytes > limit else { return }
            for (key, value) in state.entries.sorted(by: { $0.value.used < $1.value.used }) {
                guard state.bytes > limit / 4 * 3 else { break }
                state.entries.removeValue(forKey: key)
                state.bytes -= value.entry.data.count
            }
        }
    }

    var totalBytes: Int { state.withLock { $0.bytes } }
    var count: Int { state.withLock { $0.entries.count } }
}
