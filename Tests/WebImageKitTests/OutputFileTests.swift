import Foundation
import Testing
import WebImage
import WebImageKit

@Suite("Output files of --out")
struct OutputFileTests {
    @Test("a result is renamed into place whole; removeAll (the tool's second signal) removes the temporary files of writes in flight and refuses new ones; an abandoned write leaves nothing")
    func partialFiles() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        func names() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() }
        let partials = PartialFiles()

        let done = directory.appendingPathComponent("done.png")
        try OutputFile.write(Data([1, 2, 3]), to: done.path, partials: partials)
        #expect(FileManager.default.contents(atPath: done.path) == Data([1, 2, 3]))
        #expect(partials.paths.isEmpty)
        #expect(try names() == ["done.png"])

        // A write in flight when the process must exit at once.
        let flight = directory.appendingPathComponent("flight.png")
        let inFlight = try OutputFile.Partial(for: flight.path, in: partials)
        #expect(FileManager.default.fileExists(atPath: inFlight.temporary) && partials.paths == [inFlight.temporary])
        #expect(inFlight.temporary.hasPrefix(directory.path + "/.flight.png.") && inFlight.temporary.hasSuffix(".part"))
        partials.removeAll()
        #expect(!FileManager.default.fileExists(atPath: inFlight.temporary) && partials.paths.isEmpty)
        #expect(throws: WebImageError.self) { try inFlight.finish(writing: Data([4])) }
        #expect(!FileManager.default.fileExists(atPath: flight.path))
        let late = #expect(throws: WebImageError.self) {
            try OutputFile.write(Data([5]), to: directory.appendingPathComponent("late.png").path, partials: partials)
        }
        #expect(late?.code == .storeFailed && late?.message.contains("late.png") == true, "\(String(describing: late))")
        #expect(try names() == ["done.png"])

        // Dropped before it was finished (an error between the two): no file either.
        let other = PartialFiles()
        do { _ = try OutputFile.Partial(for: directory.appendingPathComponent("dropped.png").path, in: other) }
        #expect(other.paths.isEmpty)
        #expect(try names() == ["done.png"])
    }
}
