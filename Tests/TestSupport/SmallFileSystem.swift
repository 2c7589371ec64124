package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A tmpfs of `size` (`4m`, `512k`) mounted at a new directory for the test's lifetime.
/// Mounting needs root (CI runs as root); elsewhere these tests are not run.
package struct SmallFileSystem {
    package let path: URL

    package init(size: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-tmpfs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
        guard mount("tmpfs", path.path, "tmpfs", 0, "size=\(size),mode=0700") == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM)
        }
    }

    package func unmount() {
        _ = umount2(path.path, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(at: path)
    }

    /// Fills the file system with a file of its own until a write fails; returns the file.
    package func fill() -> URL {
        let file = path.appendingPathComponent("filler")
        let fd = open(file.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let chunk = [UInt8](repeating: 7, count: 64 << 10)
        var size = chunk.count
        while size > 0 {
            if write(fd, chunk, size) < 0 { size /= 2 }
        }
        close(fd)
        return file
    }
}


/// A directory path of exactly `length` bytes: `root`/made, then components of
/// at most 200 bytes. Near `PATH_MAX` (4096 with its NUL), it names a directory
/// that can be made but whose files' paths are too long.
package func pathOfLength(_ length: Int, under root: URL) -> URL {
    var path = root.appendingPathComponent("made").path
    precondition(path.utf8.count + 2 <= length, "no room under \(root.path)")
    while path.utf8.count < length {
        let remaining = length - path.utf8.count
        // Each component is "/" and at least one byte: never leave a remainder of one.
        let component = remaining <= 201 ? remaining - 1 : remaining - 201 < 2 ? 199 : 200
        path += "/" + String(repeating: "d", count: component)
    }
    return URL(fileURLWithPath: path)
}
