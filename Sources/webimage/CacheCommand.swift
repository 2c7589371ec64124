import ArgumentParser
import Foundation
import WebImage
import WebImageConfiguration
import WebImageKit
import WebImageLMDB

struct CacheCommand: AsyncParsableCommand {
    // Every command names itself: a name ArgumentParser derives from the type
    // (`String(describing:)`) costs a scan of the binary's protocol conformances
    // at every start.
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Inspect and maintain the disk store.",
        subcommands: [Stats.self, Clear.self, Trim.self, Remove.self, Path.self]
    )

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "stats", abstract: "Entries and bytes in the store.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let info: [String: Any?]
            if let (kind, path) = try await absentStore(global) {
                info = ["kind": kind, "path": path, "count": 0, "totalSize": 0]
            } else {
                let store = try await requireStore(global)
                let count = try await store.count, size = try await store.totalSize
                info = ["kind": kind(of: store), "path": location(of: store), "count": count, "totalSize": size]
            }
            if json { print(jsonLine(info)) } else { for key in info.keys.sorted() { print("\(key): \(info[key]!.map { "\($0)" } ?? "-")") } }
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every entry.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print JSON.") var json = false
        func run() async throws {
            if try await absentStore(global) != nil { return print(json ? jsonLine(["removed": 0]) : "removed 0 entries") }
            let store = try await requireStore(global)
            let count = try await store.count
            try await store.removeAll()
            print(json ? jsonLine(["removed": count]) : "removed \(count) entries")
        }
    }

    struct Trim: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "trim", abstract: "Remove expired entries and trim to the size limit now.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print JSON.") var json = false
        func run() async throws {
            if try await absentStore(global) != nil { return print(json ? jsonLine(["removed": 0, "count": 0]) : "removed 0 entries, 0 left") }
            let store = try await requireStore(global)
            let before = try await store.count
            try await store.removeExpired()
            let after = try await store.count
            // The counts before and after: entries another process wrote meanwhile
            // (a service on the same store) are not told apart, so never below zero.
            let removed = max(0, before - after)
            print(json ? jsonLine(["removed": removed, "count": after]) : "removed \(removed) entries, \(after) left")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove one entry by key (a URL as loaded, or a result key).")
        @OptionGroup var global: GlobalOptions
        @Argument var key: String
        @Flag(help: "Print JSON.") var json = false
        func run() async throws {
            if try await absentStore(global) != nil {
                print(json ? jsonLine(["key": key, "removed": false]) : "not cached")
                throw ExitCode.failure
            }
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
        static let configuration = CommandConfiguration(commandName: "path", abstract: "Where an entry's bytes are kept.")
        @OptionGroup var global: GlobalOptions
        @Argument var key: String
        @Flag(help: "Print JSON.") var json = false
        func run() async throws {
            if try await absentStore(global) != nil {
                print(json ? jsonLine(["key": key, "path": nil]) : "not cached")
                throw ExitCode.failure
            }
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

/// A local store (`lmdb`, `filesystem`) whose directory does not exist: its kind
/// and path. The `cache` commands answer it as an empty store without opening
/// it, since opening creates it (a mistyped `--cache-dir` would leave a new empty
/// store behind). The rest of the configuration is still checked: the manager is
/// made without a store.
func absentStore(_ global: GlobalOptions) async throws -> (kind: String, path: String)? {
    let values = try await global.values()
    let kind = values.text("store.kind")?.lowercased() ?? "lmdb"
    guard kind == "lmdb" || kind == "filesystem" else { return nil }
    let path = values.text("store.path").map { expandingHome($0) } ?? WebImageKit.defaultCacheDirectory.path
    guard !path.trimmingCharacters(in: .whitespaces).isEmpty, !FileManager.default.fileExists(atPath: path) else { return nil }
    var storeless = global
    storeless.store = "none"
    _ = try await storeless.manager()
    return (kind, URL(fileURLWithPath: path).standardizedFileURL.path)
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
