import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The process's own metrics in Prometheus' text format, named as Prometheus'
/// client libraries name them, read from `/proc/self` when asked (Linux; an
/// empty string elsewhere):
///
/// | metric | type | what |
/// | --- | --- | --- |
/// | `process_resident_memory_bytes` | gauge | resident set size |
/// | `process_virtual_memory_bytes` | gauge | virtual memory size |
/// | `process_cpu_seconds_total` | counter | user and system CPU time |
/// | `process_open_fds`, `process_max_fds` | gauge | open file descriptors, and their limit |
/// | `process_start_time_seconds` | gauge | when the process started, in Unix time |
/// | `webimage_process_anonymous_memory_bytes` | gauge | the anonymous part of the resident set (`RssAnon`): the heap, which a long-running service must give back; the rest is code and mapped files |
///
/// `ImageServer` (WebImageHummingbird) appends it to every `/metrics` answer;
/// an app with a Prometheus registry of its own appends it to that text.
public enum ProcessMetrics {
    public static func exposition() -> String {
        #if os(Linux)
        guard let stat = procFile("/proc/self/stat"),
              let close = stat.lastIndex(of: ")") else { return "" }
        // The fields after the command name, which may itself hold spaces: state is field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        var lines: [String] = []
        func metric(_ name: String, _ type: String, _ help: String, _ value: Double?) {
            guard let value, value.isFinite else { return }
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
            lines.append("\(name) \(value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value))")
        }
        metric("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
               field(14).flatMap { user in field(15).map { (user + $0) / ticks } })
        metric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", field(23))
        metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", field(24).map { $0 * page })
        if let start = field(22), let boot = bootTime() {
            metric("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", boot + start / ticks)
        }
        metric("process_open_fds", "gauge", "Number of open file descriptors.",
               (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { Double($0.count) })
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
            metric("process_max_fds", "gauge", "Maximum number of open file descriptors.", Double(limit.rlim_cur))
        }
        metric("webimage_process_anonymous_memory_bytes", "gauge", "Anonymous resident memory (RssAnon) in bytes: the heap.",
               statusKilobytes("RssAnon").map { $0 * 1024 })
        return lines.joined(separator: "\n") + "\n"
        #else
        return ""
        #endif
    }

    /// A `kB` line of `/proc/self/status` (`RssAnon:   1234 kB`).
    static func statusKilobytes(_ key: String) -> Double? {
        guard let status = procFile("/proc/self/status") else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
            return line.dropFirst(key.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Double($0) }
        }
        return nil
    }

    /// A file of `/proc` read to its end: they report a size of 0, and a read
    /// by the size they report can stop at the first page.
    static func procFile(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    private static func bootTime() -> Double? {
        guard let stat = procFile("/proc/stat") else { return nil }
        return stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }).flatMap { Double($0.dropFirst(6)) }
    }
}
