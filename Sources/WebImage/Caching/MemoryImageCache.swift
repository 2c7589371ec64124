import Foundation
import Synchronization

/// The memory tier: decoded images under their keys, least recently used evicted
/// first, charged by the exact bytes of their pixels.
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

    private final class Node {
        let key: String
        var image: Image
        var cost: Int
        var previous: Node?
        var next: Node?
        init(key: String, image: Image) {
            self.key = key
            self.image = image
            self.cost = image.cost
        }
    }

    /// A doubly linked list, most recent at `head`, plus the index.
    private struct State {
        var nodes: [String: Node] = [:]
        var head: Node?
        var tail: Node?
        var totalCost = 0
        var limits: Limits

        mutating func unlink(_ node: Node) {
            if let previous = node.previous { previous.next = node.next } else { head = node.next }
            if let next = node.next { next.previous = node.previous } else { tail = node.previous }
            node.previous = nil
            node.next = nil
        }

        mutating func pushFront(_ node: Node) {
            node.next = head
            head?.previous = node
            head = node
            if tail == nil { tail = node }
        }

        mutating func remove(_ node: Node) {
            unlink(node)
            nodes[node.key] = nil
            totalCost -= node.cost
        }

        /// Drops least recently used entries until within `cost` and `count`.
        mutating func trim(cost: Int, count: Int) {
            while let last = tail, totalCost > cost || nodes.count > count {
                remove(last)
            }
        }
    }

    private let state: Mutex<State>

    public init(limits: Limits = Limits()) {
        state = Mutex(State(limits: limits))
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
        state.withLock { state in
            guard let node = state.nodes[key] else { return nil }
            if state.head !== node {
                state.unlink(node)
                state.pushFront(node)
            }
            return node.image
        }
    }

    /// Whether an image is cached, without touching its recency.
    public func contains(key: String) -> Bool {
        state.withLock { $0.nodes[key] != nil }
    }

    /// Caches an image, evicting least recently used ones to stay within limits.
    /// - Returns: false if the image is over the per-entry cap and was not cached
    ///   (any older image under the key is removed then, so a stale one never lingers).
    @discardableResult
    public func setImage(_ image: Image, forKey key: String) -> Bool {
        let cost = image.cost
        return state.withLock { state in
            if let old = state.nodes[key] { state.remove(old) }
            guard cost <= state.limits.entryCostLimit, cost <= state.limits.costLimit, state.limits.countLimit > 0 else {
                return false
            }
            let node = Node(key: key, image: image)
            state.nodes[key] = node
            state.pushFront(node)
            state.totalCost += cost
            state.trim(cost: state.limits.costLimit, count: state.limits.countLimit)
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
            // Unlink explicitly so that long lists do not free recursively.
            while let node = state.tail { state.remove(node) }
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

    /// The bytes of all cached images.
    public var totalCost: Int { state.withLock { $0.totalCost } }
    /// The number of cached images.
    public var count: Int { state.withLock { $0.nodes.count } }
    /// Keys from most to least recently used.
    public var keys: [String] {
        state.withLock { state in
            var keys: [String] = []
            var node = state.head
            while let current = node {
                keys.append(current.key)
                node = current.next
            }
            return keys
        }
    }
}
