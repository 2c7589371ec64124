package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `webimage` tool as a subprocess, as a user would.
package struct Tool: Sendable {
    package let home: URL
    package let cache: URL

    package init() {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-tool-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        cache = home.appendingPathComponent("cache")
    }

    package static var executable: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("webimage").path
    }

    package struct Result {
        package let status: Int32
        package let stdout: String
        package let stderr: String
        /// The tool's peak resident set in bytes, as GNU time's own `wait4` saw it
        /// (``run(_:stdin:environment:)``), else from this process's `wait4`. The
        /// latter is inflated: `posix_spawn` runs the child on the test process's
        /// memory until `exec`, and Linux keeps that memory's high-water mark as the
        /// child's, so a test process that once held 2 GB saw every tool at 2 GB.
        package let peakResidentBytes: Int
        package var lines: [[String: Any]] {
            stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
    }

    /// Runs the tool and waits for it on a thread of its own, so that waiting never
    /// blocks a thread of Swift's cooperative pool (other suites run meanwhile).
    /// Its peak memory is measured by GNU time (`/usr/bin/time`, from Debian's
    /// `time`, which `make test` installs), whose child starts from its own small memory.
    package func run(_ arguments: [String], rawArguments: [[UInt8]] = [], stdin: String? = nil, environment: [String: String] = [:]) async throws -> Result {
        guard FileManager.default.isExecutableFile(atPath: Self.time) else {
            throw POSIXError(.ENOENT, userInfo: [NSLocalizedDescriptionKey: "\(Self.time) is missing: install Debian's 'time' (make example-deps)"])
        }
        return try await start(arguments, rawArguments: rawArguments, stdin: stdin, environment: environment, measuringPeak: true).wait()
    }

    static let time = "/usr/bin/time"


    /// A tool process started and not yet waited for.
    package struct Running: Sendable {
        package let pid: pid_t
        let out: URL
        let err: URL
        /// GNU time's report (`%M`, KiB), when it measured the run.
        let peak: URL?

        /// What it has written to standard output so far.
        package var stdout: String { (try? String(contentsOf: out, encoding: .utf8)) ?? "" }
        /// What it has written to standard error so far.
        package var stderr: String { (try? String(contentsOf: err, encoding: .utf8)) ?? "" }

        package func signal(_ number: Int32) { _ = kill(pid, number) }

        /// The address `webimage serve` prints once it listens (`http://127.0.0.1:PORT`),
        /// waited for (bounded by the calling suite's time limit).
        package func listeningAddress() async throws -> String {
            while true {
                if let line = stdout.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) {
                    return String(line.dropFirst("listening on ".count))
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }

        /// Waits for it on a thread of its own, so that waiting never blocks a thread
        /// of Swift's cooperative pool (other suites run meanwhile).
        package func wait() async throws -> Result {
            await withCheckedContinuation { continuation in
                let thread = Thread {
                    var status: Int32 = 0
                    var usage = rusage()
                    while wait4(pid, &status, 0, &usage) == -1 && errno == EINTR {}
                    let stdout = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
                    let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
                    // The exit status, or 128 + the signal that killed it, as a shell reports it.
                    let code = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
                    // GNU time's last line is the peak in KiB (a line before it may say the command was killed).
                    let measured = peak.flatMap { try? String(contentsOf: $0, encoding: .utf8) }?
                        .split(separator: "\n").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
                    continuation.resume(returning: Result(status: code, stdout: stdout, stderr: stderr,
                                                          peakResidentBytes: (measured ?? usage.ru_maxrss) * 1024))
                }
                thread.start()
            }
        }
    }

    /// Starts the tool. posix_spawn, not Foundation.Process: tests run in parallel
    /// and Process races on Linux.
    /// - Parameter measuringPeak: run it under GNU time, which then is the process
    ///   `pid` names (signal the tool itself only without it).
    /// - Parameter rawArguments: further arguments as bytes, after `arguments`
    ///   (a file name that is not UTF-8, which a `String` cannot hold).
    package func start(_ arguments: [String], rawArguments: [[UInt8]] = [], stdin: String? = nil, environment: [String: String] = [:],
                       measuringPeak: Bool = false) throws -> Running {
        let out = home.appendingPathComponent("out-\(UUID().uuidString.prefix(6))"), err = home.appendingPathComponent("err-\(UUID().uuidString.prefix(6))")
        let input = home.appendingPathComponent("in-\(UUID().uuidString.prefix(6))")
        try Data((stdin ?? "").utf8).write(to: input)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, input.path, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, out.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, err.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var env = ["HOME": home.path, "PATH": "/usr/bin:/bin"]
        // Under `make tsan`/`make asan` the child is sanitized too: it needs the same options.
        for name in ["TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"] {
            if let value = ProcessInfo.processInfo.environment[name] { env[name] = value }
        }
        env.merge(environment) { $1 }
        let peak = measuringPeak ? home.appendingPathComponent("peak-\(UUID().uuidString.prefix(6))") : nil
        let command = peak.map { [Self.time, "-f", "%M", "-o", $0.path, Self.executable] } ?? [Self.executable]
        let raw: [UnsafeMutablePointer<CChar>?] = rawArguments.map { bytes in
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            for (index, byte) in bytes.enumerated() { copy[index] = CChar(bitPattern: byte) }
            copy[bytes.count] = 0
            return copy
        }
        let argv: [UnsafeMutablePointer<CChar>?] = (command + arguments).map { strdup($0) } + raw + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            (command + arguments).indices.forEach { free(argv[$0]) }
            raw.forEach { $0?.deallocate() }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        guard posix_spawn(&pid, command[0], &actions, nil, argv, envp) == 0 else { throw POSIXError(.ENOENT) }
        return Running(pid: pid, out: out, err: err, peak: peak)
    }

    package func cleanUp() { try? FileManager.default.removeItem(at: home) }
}

