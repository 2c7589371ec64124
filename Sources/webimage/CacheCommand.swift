import ArgumentParser
import Foundation
import WebImage
import WebImageKit
import WebImageLMDB

struct CacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Inspect and maintain the disk store.",
        subcommands: [Stats.self, Clear.self, Trim.self, Remove.self, Path.self]
    )

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Entries and bytes in the store.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let store = try await requireStore(global)
            let count = try await store.count, size = try await store.totalSize
            let info: [String: Any?] = ["kind": kind(of: store), "path": location(of: store), "count": count, "totalSize": size]
            if json { print(jsonLine(info)) } else { for key in info.keys.sorted() { print("\(key): \(info[key]!.map { "\($0)" } ?? "-")") } }
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove every entry.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print JSON.") var json = false
        func run() async throws {
            let store = try await requireStore(global)
            let count = try await store.count
            try await store.removeAll()
            print(json ? jsonLine(["removed": count]) : "removed \(count) entries")
        }
    }

    struct Trim: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove expired entries and trim to the size limit now.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print JSON.") var json = false
        func run() async throws {
            let store = try await requireStore(global)
            let before = try await store.count
            try await store.removeExpired()
            let after = try await store.count
            print(json ? jsonLine(["removed": before - after, "count": after]) : "removed \(before - after) entries, \(after) left")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove one entry by key (a URL as loaded, or a result key).")
        @OptionGroup var global: GlobalOptions
        @Argument var key: String
        @Flag(help: "Print JSON.") var json = false
        func run() async throws {
            let manager = try await global.manager()
            let store = try requireStore(manager)
            let key = resolveKey(key, manager)
            let existed = try await store.metadata(forKey: key) != nil
            try await store.removeData(forKey: key)
            print(json ? jsonLine(["key": key, "removed": existed]) : (existed ? "removed" : "not cached"))
            if !existed { throw ExitCode.failure }
        }
    }

    struct Path: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Where an entry's bytes are kept.")
        @OptionGroup var global: GlobalOptions
        @Argument var key: String
        @Flag(help: "Print JSON.") var json = false
        func run() async throws {
            let manager = try await global.manager()
            let store = try requireStore(manager)
            let key = resolveKey(key, manager)
            var path: String?
            if let files = store as? FileCacheStore {
                path = try await files.fileURL(forKey: key)?.path
            } else if let lmdb = store as? LMDBCacheStore, try await lmdb.metadata(forKey: key) != nil {
                path = lmdb.directory.appendingPathComponent("data.mdb").path
            }
            print(json ? jsonLine(["key": key, "path": path]) : (path ?? "not cached"))
            if path == nil { throw ExitCode.failure }
        }
    }
}

/// The store key of a `cache remove` or `cache path` argument: a result key
/// (one with `#webimage(`, as `load --json` prints it) as it is; a URL or a
/// path (resolved as `load` resolves it) through the manager's key filter, so
/// `https://x/a.jpg#top` names the entry `load` stored for it.
func resolveKey(_ key: String, _ manager: ImageManager) -> String {
    if key.contains("#webimage(") { return key }
    guard let url = inputURL(key) else { return key }
    return manager.cacheKey(for: url)
}

func requireStore(_ global: GlobalOptions) async throws -> any CacheStore {
    try requireStore(try await global.manager())
}

func requireStore(_ manager: ImageManager) throws -> any CacheStore {
    guard let store = manager.store else {
        Terminal.error("no disk store is configured (store.kind = none)")
        throw ExitCode(2)
    }
    return store
}

func kind(of store: any CacheStore) -> String {
    switch store {
    case is LMDBCacheStore: "lmdb"
    case is FileCacheStore: "filesystem"
    case is MemoryCacheStore: "memory"
    default: String(describing: type(of: store))
    }
}

func location(of store: any CacheStore) -> String? {
    (store as? LMDBCacheStore)?.directory.path ?? (store as? FileCacheStore)?.directory.path
}
