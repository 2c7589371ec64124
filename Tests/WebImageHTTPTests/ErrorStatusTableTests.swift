import Foundation
import HTTPTypes
import Testing
import WebImage
import WebImageHTTP

/// serving.md's table of failures is what operators and clients read; this keeps
/// it and `WebImageError.responseStatus` the same, and keeps every code in it.
@Suite("serving.md's failure table")
struct ErrorStatusTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The rows of the table under "### Failures": the status column's number
    /// (nil for a row whose status is another failure's) and the codes named.
    static func rows() throws -> [(status: Int?, codes: [String])] {
        let text = try String(contentsOf: root.appendingPathComponent("docs/serving.md"), encoding: .utf8)
        let section = try #require(text.range(of: "### Failures")).upperBound
        let rest = text[section...]
        let end = rest.range(of: "\n### ")?.lowerBound ?? rest.endIndex
        var rows: [(Int?, [String])] = []
        for line in rest[..<end].split(separator: "\n") where line.hasPrefix("| ") && !line.hasPrefix("| status") && !line.hasPrefix("| ---") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4 else { continue }
            let codes = cells[2].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`")) }.filter { !$0.isEmpty }
            rows.append((Int(cells[1]), codes))
        }
        return rows
    }

    /// Every code declared in the sources: `Code("name")` in the core and the HTTP layer.
    static func declaredCodes() throws -> Set<String> {
        var codes: Set<String> = []
        let sources = root.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)!
        let pattern = try Regex(#"Code\("([A-Za-z]+)"\)"#)
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: pattern) { codes.insert(String(match.output[1].substring!)) }
        }
        return codes
    }

    @Test("every code WebImageError declares is in the table, and each row's status is responseStatus")
    func table() throws {
        let rows = try Self.rows()
        let declared = try Self.declaredCodes()
        #expect(declared.count >= 20, "the sources' codes were found: \(declared.sorted())")
        let listed = Set(rows.flatMap(\.codes))
        #expect(declared.subtracting(listed).isEmpty, "codes missing from serving.md: \(declared.subtracting(listed).sorted())")
        #expect(listed.subtracting(declared).isEmpty, "serving.md names codes that do not exist: \(listed.subtracting(declared).sorted())")
        for (status, codes) in rows {
            for code in codes {
                let error = WebImageError(.init(code), "a test")
                if let status {
                    #expect(Int(error.responseStatus.code) == status, "\(code): the table says \(status), responseStatus \(error.responseStatus.code)")
                } else {
                    // Another failure's status: blockedURL answers what blocked it.
                    let blocked = WebImageError(.init(code), "blocked", underlying: WebImageError(.notFound, "gone"))
                    #expect(blocked.responseStatus == .notFound, "\(code)")
                }
            }
        }
        // Only the service's own failures are 5xx apart from the origin's (502, 504) and the service's state (503).
        for (status, codes) in rows where status == 500 {
            for code in codes { #expect(!["invalidArgument", "stepDoesNotFit", "invalidURL"].contains(code)) }
        }
    }
}
