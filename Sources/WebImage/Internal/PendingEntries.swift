import Foundation
import Synchronization

/// Bytes the manager holds for loads in flight: an original just downloaded
/// (until its loads end or its store write takes over), an original read from
/// the store (until the loads that use it end), and every background store
/// write until it lands. A lookup asks here before the store, so a second size
/// of a new URL, asked a moment after the first, shares the original instead of
/// downloading it again, and 200 sizes of a stored original asked at once share
/// one copy of it instead of reading 200. It holds no bytes of its own: each
/// entry is its loads' or its write's, and leaves with the last of them.
final class PendingEntries: Sendable {
    private struct Entry {
        let id: UInt64
        let entry: CacheEntry
        /// Read from the store, not downloaded or made by this process.
        let stored: Bool
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
        hold(CacheEntry(data: data, metadata: metadata), key: key, stored: false)
    }

    /// Holds `entry` under `key` (replacing what was there) for one holder;
    /// `stored`: it was read from the store. Returns the token that removes it.
    func hold(_ entry: CacheEntry, key: String, stored: Bool) -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            state.entries[key] = Entry(id: state.nextID, entry: entry, stored: stored)
            return state.nextID
        }
    }

    /// Gives the entry `hold` returned `id` for `holders` holders, each of which
    /// releases it once (none: it leaves now), besides those that shared it
    /// meanwhile. For a download many loads share: held as its bytes arrive,
    /// before the loads that wait for it are known, so that no load looks
    /// between the download's end and their holds, misses and downloads again.
    func setHolders(_ key: String, id: UInt64, _ holders: Int) {
        state.withLock { state in
            guard state.entries[key]?.id == id else { return }
            // The hold made with the entry stood for the loads not known yet.
            state.entries[key]!.holders += holders - 1
            if state.entries[key]!.holders <= 0 { state.entries[key] = nil }
        }
    }

    /// The entry under `key` with one more hold on it, which the caller releases
    /// once (``release(_:id:)``); `stored`: it was read from the store.
    func share(_ key: String) -> (entry: CacheEntry, id: UInt64, stored: Bool)? {
        state.withLock { state in
            guard state.entries[key] != nil else { return nil }
            state.entries[key]!.holders += 1
            let held = state.entries[key]!
            return (held.entry, held.id, held.stored)
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

    /// The bytes held under `key`, as a store entry, and whether they were read from the store.
    func entry(forKey key: String) -> (entry: CacheEntry, stored: Bool)? {
        state.withLock { $0.entries[key] }.map { ($0.entry, $0.stored) }
    }

    var count: Int { state.withLock { $0.entries.count } }

    /// The holds on the entry under `key` (0: none held).
    func holders(_ key: String) -> Int { state.withLock { $0.entries[key]?.holders ?? 0 } }
}
