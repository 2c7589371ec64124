public import Foundation
import Synchronization

/// The memory tier: decoded images and encoded bytes under their keys, least
/// recently used evicted first, charged by the exact bytes of their pixels plus the
/// bytes of their encoding.
///
/// A key holds an image, its encoded bytes, or both: a server that answers with
/// bytes (``ImageOptions/avoidDecode``) caches the bytes it serves, and an app that
/// draws caches images. ``setImage(_:forKey:)`` and ``setData(_:forKey:checksum:madeAt:)`` each
/// replace their own half and keep the other.
///
/// Limits are hard: after every insertion the cache is within both its cost and
/// count limits. An image over the per-entry cap is not cached at all (one huge
/// image must not flush everything else).
///
/// Every operation takes one lock for a few pointer updates; it is safe from any
/// number of threads and never calls out while holding the lock.
public final class MemoryImageCache: Sendable {
    /// The limits of a memory cache.
    public struct Limits: Hashable, Sendable {
        /// The most bytes of pixels held. Default: 25% of the memory available to the process.
        public var costLimit: Int
        /// The most images held. Default: unlimited.
        public var countLimit: Int
        /// The largest image cached, in bytes. Default: 10% of ``costLimit``.
        public var entryCostLimit: Int

        public init(costLimit: Int = MemoryImageCache.defaultCostLimit, countLimit: Int = .max, entryCostLimit: Int? = nil) {
            self.costLimit = max(0, costLimit)
            self.countLimit = max(0, countLimit)
            self.entryCostLimit = entryCostLimit ?? self.costLimit / 10
        }
    }

    /// 25% of the memory this process may use: the cgroup limit in a container,
    /// else physical memory.
    public static var defaultCostLimit: Int {
        Int(Double(SystemMemory.available) * 0.25)
    }

    /// One key's entry. The index holds the only strong reference; the list's links
    /// are unmanaged, so moving a node to the front on a hit retains and releases
    /// nothing (a node always leaves the list before it leaves the index). Strong
    /// or `unowned(unsafe)` links cost a retain and a release per link read, a
    /// fifth of a memory hit.
    final class Node {
        let key: String
        let image: Image?
        /// Whether ``image`` is set, asked without copying the image out.
        let hasImage: Bool
        let data: Data?
        /// The XXH3 of `data`, when whoever cached it knew it.
        let checksum: UInt64?
        /// When `data` was made or stored, when whoever cached it knew it.
        let madeAt: Date?
        let cost: Int
        fileprivate var previous: Link?
        fileprivate var next: Link?
        init(key: String, image: Image?, data: Data?, checksum: UInt64?, madeAt: Date?) {
            self.key = key
            self.image = image
            self.hasImage = image != nil
            self.data = data
            self.checksum = data == nil ? nil : checksum
            self.madeAt = data == nil ? nil : madeAt
            self.cost = (image?.cost ?? 0) + (data?.count ?? 0)
        }
    }

    /// A link of the list: a node the index keeps alive.
    fileprivate typealias Link = Unmanaged<Node>

    /// A doubly linked list, most recent at `head`, plus the index.
    private struct State {
        var nodes: [String: Node] = [:]
        var head: Link?
        var tail: Link?
        var totalCost = 0
        var limits: Limits

        mutating func unlink(_ node: Node) {
            let (previous, next) = (node.previous, node.next)
            if let previous { previous._withUnsafeGuaranteedRef { $0.next = next } } else { head = next }
            if let next { next._withUnsafeGuaranteedRef { $0.previous = previous } } else { tail = previous }
            node.previous = nil
            node.next = nil
        }

        mutating func pushFront(_ node: Node) {
            let link = Link.passUnretained(node)
            node.next = head
            head?._withUnsafeGuaranteedRef { $0.previous = link }
            head = link
            if tail == nil { tail = link }
        }

        mutating func remove(_ node: Node) {
            unlink(node)
            nodes[node.key] = nil
            totalCost -= node.cost
        }

        /// Drops least recently used entries until within `cost` and `count`.
        mutating func trim(cost: Int, count: Int) {
            while let last = tail, totalCost > cost || nodes.count > count {
                remove(last.takeUnretainedValue())
            }
        }
    }

    private let state: Lock<State>

    public init(limits: Limits = Limits()) {
        state = Lock(State(limits: limits))
    }

    /// The limits in force; setting them trims at once.
    public var limits: Limits {
        get { state.withLock { $0.limits } }
        set {
            state.withLock {
                $0.limits = newValue
                $0.trim(cost: newValue.costLimit, count: newValue.countLimit)
            }
        }
    }

    /// The image under a key, marking it most recently used.
    public func image(forKey key: String) -> Image? {
        entry(forKey: key)?.image
    }

    /// The encoded bytes under a key, marking it most recently used.
    public func data(forKey key: String) -> Data? {
        entry(forKey: key)?.data
    }

    /// The encoded bytes under a key with the checksum and date they were cached
    /// with (``setData(_:forKey:checksum:madeAt:)``), marking them most recently used.
    public func dataEntry(forKey key: String) -> (data: Data, checksum: UInt64?, madeAt: Date?)? {
        touch(key).flatMap { node in node.data.map { ($0, node.checksum, node.madeAt) } }
    }

    /// What a key holds, marking it most recently used: its image, its bytes, or both.
    public func entry(forKey key: String) -> (image: Image?, data: Data?)? {
        touch(key).map { ($0.image, $0.data) }
    }

    /// The node under a key, marked most recently used: the pipeline's memory
    /// lookup, which builds its result from the node's fields (one copy of each).
    func touch(_ key: String) -> Node? {
        state.withLock { state in
            guard let node = state.nodes[key] else { return nil }
            if state.head?.toOpaque() != Link.passUnretained(node).toOpaque() {
                state.unlink(node)
                state.pushFront(node)
            }
            return node
        }
    }

    /// Whether an image or bytes are cached, without touching recency.
    public func contains(key: String) -> Bool {
        state.withLock { $0.nodes[key] != nil }
    }

    /// Caches an image, keeping any bytes under the key, and evicts least recently
    /// used entries to stay within limits.
    /// - Returns: false if the image is over the per-entry cap and was not cached
    ///   (any older image under the key is removed then, so a stale one never lingers).
    @discardableResult
    public func setImage(_ image: Image, forKey key: String) -> Bool {
        set(key: key, image: image, data: nil, checksum: nil, madeAt: nil)
    }

    /// Caches encoded bytes, keeping any image under the key, charged at their exact
    /// length; evicts as ``setImage(_:forKey:)`` does.
    /// - Returns: false if the bytes are over the per-entry cap and were not cached.
    @discardableResult
    /// - Parameters:
    ///   - checksum: the bytes' ``XXH3``, when the caller has it (a store verified
    ///     them, or the encoder's caller hashed them), returned with them by
    ///     ``dataEntry(forKey:)`` so that a hit needs no hash for its ETag.
    ///   - madeAt: when the bytes were made or stored, returned with them too (a
    ///     server's `Last-Modified`).
    public func setData(_ data: Data, forKey key: String, checksum: UInt64? = nil, madeAt: Date? = nil) -> Bool {
        set(key: key, image: nil, data: data, checksum: checksum, madeAt: madeAt)
    }

    /// Puts the new half (`image` or `data`) beside the other half already under
    /// the key; if the pair is over the entry cap, the new half alone; if that is
    /// over too, nothing (and the old node is gone either way).
    private func set(key: String, image: Image?, data: Data?, checksum: UInt64?, madeAt: Date?) -> Bool {
        state.withLock { state in
            let old = state.nodes[key]
            if let old { state.remove(old) }
            let limits = state.limits
            let fits = { (node: Node) in node.cost <= limits.entryCostLimit && node.cost <= limits.costLimit && limits.countLimit > 0 }
            var node = Node(key: key, image: image ?? old?.image, data: data ?? old?.data,
                            checksum: data == nil ? old?.checksum : checksum, madeAt: data == nil ? old?.madeAt : madeAt)
            if !fits(node) {
                node = Node(key: key, image: image, data: data, checksum: checksum, madeAt: madeAt)
                guard fits(node) else { return false }
            }
            state.nodes[key] = node
            state.pushFront(node)
            state.totalCost += node.cost
            state.trim(cost: limits.costLimit, count: limits.countLimit)
            return true
        }
    }

    /// Removes one image.
    public func removeImage(forKey key: String) {
        state.withLock { state in
            if let node = state.nodes[key] { state.remove(node) }
        }
    }

    /// Removes every image (a purge, for memory pressure).
    public func removeAll() {
        state.withLock { state in
            while let node = state.tail { state.remove(node.takeUnretainedValue()) }
        }
    }

    /// Evicts least recently used images until at most `cost` bytes remain.
    public func trim(toCost cost: Int) {
        state.withLock { $0.trim(cost: max(0, cost), count: .max) }
    }

    /// Evicts least recently used images until at most `count` remain.
    public func trim(toCount count: Int) {
        state.withLock { $0.trim(cost: .max, count: max(0, count)) }
    }

    /// The bytes of all cached images and encoded bytes.
    public var totalCost: Int { state.withLock { $0.totalCost } }
    /// The number of keys cached.
    public var count: Int { state.withLock { $0.nodes.count } }
    /// Keys from most to least recently used.
    public var keys: [String] {
        state.withLock { state in
            var keys: [String] = []
            var node = state.head
            while let current = node {
                keys.append(current.takeUnretainedValue().key)
                node = current.takeUnretainedValue().next
            }
            return keys
        }
    }
}
