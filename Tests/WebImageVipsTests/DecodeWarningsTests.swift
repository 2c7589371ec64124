import Foundation
import Logging
import Testing
import WebImage
import WebImageTestSupport
import WebImageVips

/// The log records a test's logger received.
final class CapturedLogs: @unchecked Sendable {
    struct Record {
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
    }

    private let lock = NSLock()
    private var records: [Record] = []

    var all: [Record] { lock.withLock { records } }

    func append(_ record: Record) { lock.withLock { records.append(record) } }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(sink: self) }
    }

    struct Handler: LogHandler {
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            sink.append(Record(level: event.level, message: event.message.description, metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
        }
    }
}

@Suite("libvips' warnings reach the decode they belong to", .offCooperativePool)
struct DecodeWarningsTests {
    /// A PNG whose IHDR checksum is wrong: libpng warns "IHDR: CRC error" (twice)
    /// and libvips then fails with only "reading the png header failed".
    static func badChecksumPNG() throws -> Data {
        var bytes = [UInt8](try Fixtures.encode(Fixtures.quadrants(width: 32, height: 32), as: .png))
        bytes[29] ^= 0xFF  // signature 8, length 4, "IHDR" 4, data 13: the CRC starts at 29
        return Data(bytes)
    }

    @Test("a refused PNG's error names libpng's reason; the warning is logged once, at warning, to the bound logger")
    func errorKeepsCause() throws {
        let logs = CapturedLogs()
        let data = try Self.badChecksumPNG()
        for call in ["decode", "info"] {
            let error = #expect(throws: WebImageError.self) {
                try CoderLog.$logger.withValue(logs.logger) {
                    if call == "decode" { _ = try Fixtures.coder.decode(data, options: DecodeOptions()) } else { _ = try Fixtures.coder.info(data) }
                }
            }
            #expect(error?.code == .decodeFailed && error?.message.contains("IHDR: CRC error") == true, "\(call): \(error?.message ?? "")")
        }
        let warnings = logs.all.filter { $0.level == .warning }
        #expect(warnings.map(\.message) == ["libvips: IHDR: CRC error", "libvips: IHDR: CRC error"], "once per decode, for the decode and the info")
        #expect(warnings.allSatisfy { $0.metadata["format"] == "png" })
    }

    @Test("through the manager, the warning carries the load's key, and the load's error its cause")
    func throughManager() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-warn-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("bad-crc.png")
        try Self.badChecksumPNG().write(to: file)
        let logs = CapturedLogs()
        var configuration = ImageManager.Configuration()
        configuration.coders.registerVips()
        configuration.logger = logs.logger
        let manager = ImageManager(configuration: configuration)
        do {
            _ = try await manager.loadImage(with: file)
            Issue.record("a PNG with a bad IHDR checksum is refused")
        } catch let error as WebImageError {
            #expect(error.code == .decodeFailed && error.message.contains("IHDR: CRC error"), "\(error.message)")
        }
        let warning = try #require(logs.all.first { $0.level == .warning && $0.message == "libvips: IHDR: CRC error" })
        #expect(warning.metadata["key"].map { "\($0)".contains("bad-crc.png") } == true, "\(warning.metadata)")
        await manager.shutdown()
    }
}
