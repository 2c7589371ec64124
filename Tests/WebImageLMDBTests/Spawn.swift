import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`. Foundation's `Process` is not
/// safe to start from several threads at once on Linux (it races in CFRunLoop),
/// and Swift Testing runs suites in parallel.
struct Child {
    let pid: pid_t

    static func spawn(_ executable: String, _ arguments: [String]) throws -> Child {
        var pid: pid_t = 0
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let rc = posix_spawn(&pid, executable, nil, nil, argv, environ)
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EINVAL) }
        return Child(pid: pid)
    }

    /// Waits for the child; returns its exit status, or nil if a signal ended it.
    @discardableResult
    func wait() -> Int32? {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : nil
    }

    /// Whether the child has exited (reaps it if so). A child that is no longer
    /// ours to wait for (ECHILD) counts as exited, with an unknown status, so a
    /// polling loop can never spin forever.
    func hasExited(status: inout Int32?) -> Bool {
        var raw: Int32 = 0
        let result = waitpid(pid, &raw, WNOHANG)
        if result == -1 && errno == ECHILD {
            status = nil
            return true
        }
        guard result == pid else { return false }
        status = (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : nil
        return true
    }

    func kill(_ signal: Int32) { _ = Glibc.kill(pid, signal) }
}

/// Runs a command to the end; throws unless it exits 0.
func run(_ executable: String, _ arguments: [String]) throws {
    let status = try Child.spawn(executable, arguments).wait()
    guard status == 0 else { throw POSIXError(.EPERM) }
}
