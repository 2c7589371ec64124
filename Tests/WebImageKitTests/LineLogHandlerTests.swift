import Foundation
import Logging
import Synchronization
import Testing
import WebImageKit

@Suite("LineLogHandler")
struct LineLogHandlerTests {
    @Test("one line per record at or above its level, with the logger's, the provider's and the call's metadata, the call's winning")
    func lines() {
        let lines = Mutex<[String]>([])
        let provider = Logger.MetadataProvider { ["trace": "t1", "shared": "provider"] }
        var logger = Logger(label: "webimage.test") { label in
            LineLogHandler(label: label, metadataProvider: provider) { line in lines.withLock { $0.append(line) } }
        }
        logger.logLevel = .info
        logger[metadataKey: "request"] = "r7"
        logger[metadataKey: "shared"] = "logger"
        logger.debug("not written")
        logger.warning("written", metadata: ["shared": "call"])
        let written = lines.withLock { $0 }
        #expect(written.count == 1)
        let line = written.first ?? ""
        #expect(line.hasSuffix(" warning webimage.test: request=r7 shared=call trace=t1 [WebImageKitTests] written\n"), "\(line)")
        let stamp = line.prefix { $0 != " " }
        #expect(stamp.count == 24 && stamp.dropFirst(10).first == "T" && ["+", "-"].contains(stamp.dropFirst(19).first), "\(line)")
        #expect(logger[metadataKey: "request"] == "r7")
    }
}
