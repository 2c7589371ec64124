import ArgumentParser
import Configuration
import Foundation
import WebImage
import WebImageConfiguration
import WebImageHTTP
import WebImageKit

@main
struct WebImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webimage",
        abstract: "Load, transform and cache images with swift-web-image.",
        discussion: """
        Every command reads its configuration from, highest first: flags, WEBIMAGE_* \
        environment variables (WEBIMAGE_STORE_KIND=filesystem), a JSON file (--config), \
        then the defaults: an LMDB cache in ~/.cache/webimage. See docs/configuration.md.
        """,
        subcommands: [LoadCommand.self, InfoCommand.self, ServeCommand.self, CacheCommand.self, SamplesCommand.self]
    )

    static func main() async {
        #if WEBIMAGE_SERVE
        ServeAllocator.chooseForServe()
        #endif
        limitMallocArenas()
        if let bad = firstArgumentNotUTF8() {
            // Swift reads arguments as UTF-8 with U+FFFD for bad bytes: a file name
            // in another encoding would be looked for under another name, and
            // reported missing although it exists.
            Terminal.error("argument \(bad.index) ('\(bad.text)') is not valid UTF-8: names and URLs are read as UTF-8; rename the file, or use a name that is")
            exit(withError: ExitCode(2))
        }
        if let unknown = unknownSubcommand() {
            // ArgumentParser names the first option it cannot place instead (`cache bogus --cache-dir x`).
            Terminal.error("'\(unknown.command) \(unknown.name)' is not a command; \(unknown.command) takes \(unknown.known.joined(separator: ", "))")
            exit(withError: ExitCode(2))
        }
        if let dashed = firstDashedName() {
            Terminal.error("'\(dashed)' is read as options (the tool's only short one is -h); to name a file that starts with '-', put it after -- or write ./\(dashed)")
            exit(withError: ExitCode(2))
        }
        do {
            var command = try parseAsRoot(nil)
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            // Bad usage exits 2, as docs/tool.md says, where ArgumentParser would
            // use EX_USAGE (64).
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                exit(withError: ExitCode(2))
            }
            exit(withError: error)
        }
    }

    /// A word after a command that has subcommands (`cache`) that names none of them.
    static func unknownSubcommand(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) -> (command: String, name: String, known: [String])? {
        guard let command = arguments.first,
              let type = configuration.subcommands.first(where: { $0._commandName == command }),
              !type.configuration.subcommands.isEmpty,
              let name = arguments.dropFirst().first, !name.hasPrefix("-") else { return nil }
        let known = type.configuration.subcommands.map { $0._commandName }
        return known.contains(name) || name == "help" ? nil : (command, name, known)
    }

    /// The first argument before `--` that starts with one `-` and is neither `-h`,
    /// `-` (standard input) nor a number: ArgumentParser reads `-dash.jpg` as the
    /// short options d, a, s, h…, so it printed the help and exited 0, loading nothing.
    static func firstDashedName(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) -> String? {
        for argument in arguments {
            if argument == "--" { return nil }
            guard argument.hasPrefix("-"), !argument.hasPrefix("--"), argument != "-", argument != "-h", Double(argument) == nil else { continue }
            return argument
        }
        return nil
    }

    /// The first command-line argument whose bytes are not UTF-8, and its lossy text.
    static func firstArgumentNotUTF8() -> (index: Int, text: String)? {
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index] else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self), count: strlen(argument))
            if String(validating: bytes, as: UTF8.self) == nil { return (index, String(decoding: bytes, as: UTF8.self)) }
        }
        return nil
    }

    /// glibc gives each contended thread its own heap arena (up to eight per
    /// core), and each keeps its high-water mark; a batch run's threads (Swift's
    /// pool, the I/O and decode pools, libvips' workers) leave about 17 MiB more
    /// peak RSS over a batch of 12 MP photos with no gain in speed
    /// (docs/performance.md). Two arenas, unless MALLOC_ARENA_MAX says otherwise.
    static func limitMallocArenas() {
        #if canImport(Glibc)
        // mallopt is in <malloc.h>, which the Glibc module does not export.
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        let M_ARENA_MAX: Int32 = -8
        guard getenv("MALLOC_ARENA_MAX") == nil, let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
        _ = unsafeBitCast(symbol, to: Mallopt.self)(M_ARENA_MAX, 2)
        #endif
    }
}

/// Options every command has.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "A JSON configuration file.")
    var configFile: String?

    @Option(help: "The disk store: lmdb, filesystem, memory or none (store.kind).")
    var store: String?

    @Option(name: .customLong("cache-dir"), help: "Where the disk store keeps its files (store.path).")
    var cacheDirectory: String?

    @Option(name: .customLong("set"), help: ArgumentHelp("Any configuration key, as key=value (repeatable).", valueName: "key=value"))
    var settings: [String] = []

    func flags() throws -> [String: String] {
        var flags: [String: String] = [:]
        for setting in settings {
            guard let equals = setting.firstIndex(of: "="), equals != setting.startIndex else {
                throw ValidationError("--set takes key=value, not '\(setting)'")
            }
            flags[String(setting[..<equals])] = String(setting[setting.index(after: equals)...])
        }
        if let store { flags["store.kind"] = store }
        if let cacheDirectory { flags["store.path"] = cacheDirectory }
        return flags
    }

    /// The layered configuration. With no disk store (`store.kind = none`), the
    /// memory cache defaults to off: a batch reads each input once, so a cache
    /// would only keep results in memory longer (about 4 MiB over 24 photos).
    /// `memory.costLimit` set anywhere still wins. A batch has no other requests
    /// for PDFs to starve: up to 8 (the default `--concurrency`) are drawn at once
    /// rather than the service's 1 (`vips.pdfConcurrency`, which still wins).
    func reader() async throws -> ConfigReader {
        let flags = try flags()
        var defaults = ["vips.pdfConcurrency": "8"]
        let layered = try await layers(flags: flags, defaults: defaults)
        guard ConfigValues(layered).text("store.kind")?.lowercased() == "none" else { return layered }
        defaults["memory.costLimit"] = "0"
        return try await layers(flags: flags, defaults: defaults)
    }

    /// The layers of a command other than `serve`: its flags checked against the
    /// keys it reads; `WEBIMAGE_*` variables may also name `serve`'s keys, which
    /// the environment of a container configured for `serve` holds.
    private func layers(flags: [String: String], defaults: [String: String]) async throws -> ConfigReader {
        try await ConfigLayers.reader(flags: flags, file: configFile, defaults: defaults,
                                      environmentKeys: ImageEndpoint.Settings.standardKeys.union(ServeCommand.keys),
                                      environmentKeyFamilies: ImageEndpoint.Settings.keyFamilies)
    }

    /// The manager, or a clear message and exit status 2 for bad configuration.
    func manager() async throws -> ImageManager {
        try await configured { try ConfigLayers.manager(config: try await reader()) }
    }

    /// The configuration's values (its layers checked), or the message and exit status 2.
    func values() async throws -> ConfigValues {
        try await configured { ConfigValues(try await reader()) }
    }

    private func configured<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as WebImageError {
            Terminal.error("configuration: \(error.message)")
            throw ExitCode(2)
        }
    }
}

enum Terminal {
    static func error(_ message: String) {
        FileHandle.standardError.write(Data("webimage: \(message)\n".utf8))
    }

    static var standardErrorIsTerminal: Bool { isatty(2) != 0 }

    static var width: Int {
        var size = winsize()
        if ioctl(2, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return Int(ProcessInfo.processInfo.environment["COLUMNS"] ?? "") ?? 80
    }
}

/// Turns a command-line input into a URL: `http(s)://…` and `file://…` as they
/// are, anything else as a path relative to the working directory.
func inputURL(_ input: String) -> URL? {
    if input.contains("://") { return URL(string: input) }
    guard !input.isEmpty else { return nil }
    // A path as written: the shell expands `~` in arguments it should; a `~`
    // that reaches here (quoted, or a line of --input-file) names a directory
    // called `~`, which Foundation would take for the account's home.
    // `.inferFromPath`: a directory is one by its trailing slash, as written, not
    // by a `stat` per input (`fileURLWithPath` makes one; loading a directory is
    // refused by the file loader either way).
    return URL(filePath: input.hasPrefix("~") ? "./" + input : input, directoryHint: .inferFromPath).standardizedFileURL
}

/// Whether an input is a local file (a path, or a `file://` URL in any case):
/// `URL.isLocalFile`, the rule the file loader loads by.
func isLocalFileInput(_ input: String) -> Bool {
    inputURL(input)?.isLocalFile ?? !input.contains("://")
}

/// JSON for one value per line, keys sorted, `null`s kept.
func jsonLine(_ object: [String: Any?]) -> String {
    let cleaned = object.mapValues { $0 ?? NSNull() }
    guard let data = try? JSONSerialization.data(withJSONObject: cleaned, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "{}" }
    return String(decoding: data, as: UTF8.self)
}

func errorObject(_ error: any Error) -> [String: Any] {
    let error = WebImageError.wrap(error, as: .loadFailed, "failed")
    return ["code": error.code.rawValue, "message": error.message]
}
