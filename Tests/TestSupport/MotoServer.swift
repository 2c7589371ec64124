package import Foundation

/// moto's S3 server with its access control on (Tests/Peers/moto_peer.py): every
/// request after its set-up must carry a valid AWS Signature V4 of a key it
/// made. One per test process, started on first use; it ends when this process
/// does, whatever way (it serves until its standard input, a pipe held here, closes).
///
/// The Python comes from `S3_PEER_PYTHON`, else the venv `make s3-peer` makes in
/// `.build/s3-venv`, else `python3` on the PATH if it imports moto.
package final class MotoServer: Sendable {
    package struct Key: Decodable, Sendable {
        package let accessKeyID: String
        package let secretAccessKey: String
        package init(accessKeyID: String, secretAccessKey: String) {
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
        }
    }
    private struct Announcement: Decodable {
        let endpoint: String
        let bucket: String
        let full: Key
        let readOnly: Key
    }

    /// `http://127.0.0.1:PORT`.
    package let endpoint: URL
    /// A bucket made at start-up; tests keep apart by key prefixes.
    package let bucket: String
    /// A key allowed every S3 action.
    package let full: Key
    /// A key allowed `s3:GetObject` and `s3:ListBucket` only.
    package let readOnly: Key
    /// Its log (moto's request lines), for a failing test to point at.
    package let logPath: String
    private let process: Process
    private let input: Pipe

    private static let started = StartOnce()

    /// The process's server, started on the first call.
    package static func shared() async throws -> MotoServer { try await started.server() }

    private actor StartOnce {
        var task: Task<MotoServer, any Error>?
        func server() async throws -> MotoServer {
            if let task { return try await task.value }
            // Starting it waits for moto (seconds, more on a busy machine): on a
            // thread of its own, never one of the cooperative pool's two.
            let task = Task { try await onThread { try MotoServer() } }
            self.task = task
            return try await task.value
        }
    }

    private init() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let python = try Self.python(root: root)
        logPath = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-moto-\(getpid()).log").path
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root.appendingPathComponent("Tests/Peers/moto_peer.py").path]
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: logPath)
        try process.run()
        // One line, the announcement; moto starts in a few seconds (a minute on a busy machine).
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        guard let announced = try? JSONDecoder().decode(Announcement.self, from: line.prefix { $0 != UInt8(ascii: "\n") }),
              let endpoint = URL(string: announced.endpoint) else {
            process.terminate()
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw PeerError(message: "moto did not start (\(python)); its log:\n\(log.suffix(2000))")
        }
        self.endpoint = endpoint
        bucket = announced.bucket
        full = announced.full
        readOnly = announced.readOnly
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
    }

    private static func python(root: URL) throws -> String {
        if let path = ProcessInfo.processInfo.environment["S3_PEER_PYTHON"], !path.isEmpty { return path }
        let venv = root.appendingPathComponent(".build/s3-venv/bin/python3").path
        if FileManager.default.isExecutableFile(atPath: venv) { return venv }
        for candidate in ["/usr/local/bin/python3", "/usr/bin/python3"] + pathCandidates() where FileManager.default.isExecutableFile(atPath: candidate) {
            let check = Process()
            check.executableURL = URL(fileURLWithPath: candidate)
            check.arguments = ["-c", "import moto.server, boto3"]
            check.standardError = FileHandle.nullDevice
            check.standardOutput = FileHandle.nullDevice
            if (try? check.run()) != nil {
                check.waitUntilExit()
                if check.terminationStatus == 0 { return candidate }
            }
        }
        throw PeerError(message: "no Python with moto[server]: run `make s3-peer` (a venv in .build/s3-venv) or set S3_PEER_PYTHON")
    }

    private static func pathCandidates() -> [String] {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/python3" }
    }
}

/// Runs `body` on a thread of its own and returns its result: for set-up that
/// blocks (a child process's output, libvips), which must not hold one of the
/// cooperative pool's threads while other suites' loads need them.
package func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

package struct PeerError: Error, CustomStringConvertible {
    package let message: String
    package init(message: String) { self.message = message }
    package var description: String { message }
}
