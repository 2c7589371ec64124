import Foundation
import Synchronization

/// Bytes the manager holds that its store does not have yet: an original just
/// downloaded (until its load ends or its store write takes over) and every
/// background store write until it lands. A lookup asks here before the store,
/// so a second size of a new URL, asked a moment after the first, shares the
/// original instead of downloading it again. It holds no bytes of its own: each
/// entry is the load's or the write's, and leaves with it.
final class PendingEntries: Sendable {
    private struct Entry {
        let id: UInt64
        let data: Data
        let metadata: CacheMetadata
        /// The loads or writes that each release it once; it leaves at the last.
        var holders = 1
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Lock(State())

    /// Holds `data` under `key` (replacing what was there); returns the token that removes it.
    func hold(_ data: Data, key: String, metadata: CacheMetadata) -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            state.entries[key] = Entry(id: state.nextID, data: data, metadata: metadata)
            return state.nextID
        }
    }

    /// Gives the entry `hold` returned `id` for `holders` holders, each of which
    /// releases it once (none: it leaves now). For a download many loads share:
    /// held as its bytes arrive, before the loads that wait for it are known, so
    /// that no load looks between the download's end and their holds, misses
    /// and downloads again.
    func setHolders(_ key: String, id: UInt64, _ holders: Int) {
        state.withLock { state in
            guard state.entries[key]?.id == id else { return }
            if holders > 0 { state.entries[key]!.holders = holders } else { state.entries[key] = nil }
        }
    }

    /// Releases one hold of the entry `hold` returned `id` for, unless a later one
    /// replaced it; the last release removes it.
    func release(_ key: String, id: UInt64) {
        state.withLock { state in
            guard state.entries[key]?.id == id else { return }
            state.entries[key]!.holders -= 1
            if state.entries[key]!.holders <= 0 { state.entries[key] = nil }
        }
    }

    /// The bytes held under `key`, as a store entry.
    func entry(forKey key: String) -> CacheEntry? {
        state.withLock { $0.entries[key] }.map { CacheEntry(data: $0.data, metadata: $0.metadata) }
    }

    var count: Int { state.withLock { $0.entries.count } }
}
