import Foundation

/// The memory this process may use: a cgroup (v2 or v1) limit when one is set
/// and smaller than physical memory, else physical memory.
enum SystemMemory {
    static let available: UInt64 = {
        let physical = ProcessInfo.processInfo.physicalMemory
        let candidates = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        for path in candidates {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            if let limit = UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines)), limit > 0, limit < physical {
                return limit
            }
        }
        return physical
    }()
}
