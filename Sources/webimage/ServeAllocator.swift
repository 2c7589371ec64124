import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `webimage serve` runs on jemalloc; the other commands on the system's malloc.
///
/// A long-running service under mixed traffic (large and small images, many
/// threads) leaves glibc's malloc holding memory libvips freed: it keeps each
/// arena's high-water mark and returns little of it, idle or not. jemalloc,
/// with a background thread that purges freed pages as they age, returns it
/// (docs/operations.md, "Memory that comes back", has the figures). A batch is
/// the other way round: it ends before any of that matters, and jemalloc's own
/// structures cost it a few MiB of peak RSS.
///
/// So `serve`, at its very start, re-executes the tool (same process id, same
/// arguments) with Debian's `libjemalloc.so.2` preloaded and `MALLOC_CONF` set
/// to ``configuration`` (unless the environment sets one); once running, it puts
/// `LD_PRELOAD` and `MALLOC_CONF` back as they were, so that nothing it starts
/// inherits them. It does not re-execute when:
/// - `WEBIMAGE_ALLOCATOR=system` or `--set allocator=system` says so (any value
///   but `jemalloc` and `system` is a configuration error, exit 2);
/// - jemalloc is already loaded (preloaded by the operator, or linked): its
///   background thread is then turned on with `mallctl`, unless `MALLOC_CONF`
///   says otherwise;
/// - no `libjemalloc.so.2` is installed (`libjemalloc2`; `make deps` installs it);
/// - the re-execution was tried already and jemalloc did not load;
/// - a sanitizer's runtime is in the process (its own allocator must come first).
/// The log says which allocator runs, and why, as the service starts.
enum ServeAllocator {
    /// Arenas per processor (`percpu_arena`), not per thread: the blocking pool's
    /// threads that run jobs while others wait would each keep freed pages in
    /// an arena of their own (peak RSS of the cold service benchmark 116 MiB
    /// with arenas per thread, 106 with arenas per processor; docs/performance.md).
    static let configuration = "background_thread:true,dirty_decay_ms:5000,muzzy_decay_ms:0,percpu_arena:percpu"
    static let libraries = ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                            "/usr/lib64/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2", "/usr/local/lib/libjemalloc.so.2"]
    /// Set for the re-executed process: the `LD_PRELOAD` and `MALLOC_CONF` to put back
    /// (`-` for unset), and that the re-execution was tried.
    static let marker = "_WEBIMAGE_ALLOCATOR_TRIED"
    static let values: Set<String> = ["jemalloc", "system"]

    /// The `MALLOC_CONF` jemalloc started with (what the log reports).
    nonisolated(unsafe) static var startedWith: String?
    /// Set when the re-execution was tried and jemalloc did not load.
    nonisolated(unsafe) static var failedToLoad = false

    /// Whether jemalloc is this process's allocator (its `mallctl` is there).
    static var jemallocIsLoaded: Bool { dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallctl") != nil }

    /// Whether AddressSanitizer or ThreadSanitizer runs this process (`make asan`,
    /// `make tsan`): their allocator replaces malloc, and jemalloc must not.
    static var sanitized: Bool {
        let runtimes: [String] = ["__asan_init", "__tsan_init"]
        return runtimes.contains { dlsym(UnsafeMutableRawPointer(bitPattern: 0), $0) != nil }
    }

    /// Why `serve` runs on the system's malloc, when it does.
    static var whySystem: String? {
        if jemallocIsLoaded { return nil }
        if sanitized { return "a sanitizer's allocator runs this process" }
        if asked(CommandLine.arguments, ProcessInfo.processInfo.environment) == "system" { return "allocator=system" }
        if failedToLoad { return "libjemalloc.so.2 was preloaded but did not load" }
        return "no libjemalloc.so.2 (Debian's libjemalloc2) is installed"
    }

    /// The allocator the environment or a `--set allocator=…` flag asks for (the
    /// flag wins, as flags do), nil when neither does.
    static func asked(_ arguments: [String], _ environment: [String: String]) -> String? {
        var value = environment["WEBIMAGE_ALLOCATOR"]
        for (flag, next) in zip(arguments, arguments.dropFirst()) where flag == "--set" && next.hasPrefix("allocator=") {
            value = String(next.dropFirst("allocator=".count))
        }
        for argument in arguments where argument.hasPrefix("--set=allocator=") {
            value = String(argument.dropFirst("--set=allocator=".count))
        }
        return value
    }

    /// Re-executes the tool with jemalloc preloaded when `serve` should run on it;
    /// returns (and the tool goes on as it is) otherwise. In the re-executed
    /// process, puts the environment back and notes how jemalloc started.
    static func chooseForServe() {
        #if os(Linux)
        let arguments = CommandLine.arguments
        let environment = ProcessInfo.processInfo.environment
        guard arguments.count > 1, arguments[1] == "serve" else { return }
        if let saved = environment[marker] {
            // The re-executed process: the environment as the operator gave it.
            let parts = saved.split(separator: "\u{1F}", omittingEmptySubsequences: false).map(String.init)
            if parts.count == 3 {
                startedWith = environment["MALLOC_CONF"]
                for (name, value) in [("LD_PRELOAD", parts[1]), ("MALLOC_CONF", parts[2])] {
                    if value == "-" { unsetenv(name) } else { setenv(name, String(value.dropFirst()), 1) }
                }
            }
            if jemallocIsLoaded { unsetenv(marker) } else { failedToLoad = true }
            return
        }
        if jemallocIsLoaded {
            // Preloaded or linked by the operator: the background thread, unless
            // their MALLOC_CONF decides it.
            startedWith = environment["MALLOC_CONF"]
            if !(startedWith ?? "").contains("background_thread") { enableBackgroundThread() }
            return
        }
        guard !sanitized, asked(arguments, environment) != "system",
              let library = libraries.first(where: { FileManager.default.isReadableFile(atPath: $0) }) else { return }
        func saved(_ name: String) -> String { environment[name].map { "=" + $0 } ?? "-" }
        setenv(marker, ["1", saved("LD_PRELOAD"), saved("MALLOC_CONF")].joined(separator: "\u{1F}"), 1)
        let preload = environment["LD_PRELOAD"].map { $0.isEmpty ? library : library + ":" + $0 } ?? library
        setenv("LD_PRELOAD", preload, 1)
        if environment["MALLOC_CONF"] == nil { setenv("MALLOC_CONF", configuration, 1) }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        execv("/proc/self/exe", &argv)
        // execv returned: it failed. Go on as we are, with the environment as it was.
        for name in ["LD_PRELOAD", "MALLOC_CONF"] {
            if let old = environment[name] { setenv(name, old, 1) } else { unsetenv(name) }
        }
        unsetenv(marker)
        #endif
    }

    /// Turns on jemalloc's background purging thread (`mallctl background_thread`).
    static func enableBackgroundThread() {
        typealias Mallctl = @convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?, UnsafeMutableRawPointer?, Int) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallctl") else { return }
        var on = true
        _ = unsafeBitCast(symbol, to: Mallctl.self)("background_thread", nil, nil, &on, MemoryLayout<Bool>.size)
        startedWith = (startedWith.map { $0 + "," } ?? "") + "background_thread:true (set at start)"
    }
}
