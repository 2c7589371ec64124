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
/// to ``configuration`` (unless the environment sets one). It does not when:
/// - `WEBIMAGE_ALLOCATOR=system` or `--set allocator=system` says so;
/// - jemalloc is already loaded (preloaded by the operator, or linked);
/// - no `libjemalloc.so.2` is installed (`libjemalloc2`; `make deps` installs it);
/// - the re-execution was tried already (`_WEBIMAGE_ALLOCATOR_TRIED` is set);
/// - a sanitizer's runtime is in the process (its own allocator must come first).
/// The log's first line says which allocator runs, and why.
enum ServeAllocator {
    static let configuration = "background_thread:true,dirty_decay_ms:5000,muzzy_decay_ms:0"
    static let libraries = ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                            "/usr/lib64/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2", "/usr/local/lib/libjemalloc.so.2"]
    static let marker = "_WEBIMAGE_ALLOCATOR_TRIED"

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
        let environment = ProcessInfo.processInfo.environment
        if jemallocIsLoaded { return nil }
        if sanitized { return "a sanitizer's allocator runs this process" }
        if asksForSystem(CommandLine.arguments, environment) { return "allocator=system" }
        if environment[marker] != nil { return "libjemalloc.so.2 was preloaded but did not load" }
        return "no libjemalloc.so.2 (Debian's libjemalloc2) is installed"
    }

    static func asksForSystem(_ arguments: [String], _ environment: [String: String]) -> Bool {
        if environment["WEBIMAGE_ALLOCATOR"] == "system" { return true }
        return zip(arguments, arguments.dropFirst()).contains { $0 == "--set" && $1 == "allocator=system" }
            || arguments.contains("--set=allocator=system")
    }

    /// Re-executes the tool with jemalloc preloaded when `serve` should run on it;
    /// returns (and the tool goes on with the system's malloc) otherwise.
    static func chooseForServe() {
        #if os(Linux)
        let arguments = CommandLine.arguments
        let environment = ProcessInfo.processInfo.environment
        guard arguments.count > 1, arguments[1] == "serve", !jemallocIsLoaded, !sanitized, environment[marker] == nil,
              !asksForSystem(arguments, environment),
              let library = libraries.first(where: { FileManager.default.isReadableFile(atPath: $0) }) else { return }
        setenv(marker, "1", 1)
        let preload = environment["LD_PRELOAD"].map { $0.isEmpty ? library : library + ":" + $0 } ?? library
        setenv("LD_PRELOAD", preload, 1)
        if environment["MALLOC_CONF"] == nil { setenv("MALLOC_CONF", configuration, 1) }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        execv("/proc/self/exe", &argv)
        // execv returned: it failed. Go on as we are, with the environment as it was.
        unsetenv("LD_PRELOAD")
        if let old = environment["LD_PRELOAD"] { setenv("LD_PRELOAD", old, 1) }
        if environment["MALLOC_CONF"] == nil { unsetenv("MALLOC_CONF") }
        #endif
    }
}
