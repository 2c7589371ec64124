import Foundation
import Testing
import WebImage
import WebImageLMDB
import WebImageTestSupport

/// The helper executable, built beside the test bundle.
func helperURL() -> URL {
    URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("webimage-lmdb-helper")
}

func startHelper(_ arguments: [String]) throws -> Child {
    try Child.spawn(helperURL().path, arguments)
}

@Suite("LMDBCacheStore across processes", .serialized, .timeLimit(.minutes(2)))
struct LMDBMultiProcessTests {
    @Test("two writer processes and a reader share one store: nothing lost, nothing partial")
    func twoProcesses() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(FileManager.default.isExecutableFile(atPath: helperURL().path), "helper missing at \(helperURL().path)")
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited, options: .init(mapSize: 1 << 20))
        // Each writer halts after its first 150 entries, with the store open, until
        // the reader has looked: then 150 whole entries of each are there, and none
        // of the rest, whatever the speed of the machine.
        let go = directory.appendingPathComponent("go")
        // However the test ends, the writers go on and exit.
        defer { _ = FileManager.default.createFile(atPath: go.path, contents: nil) }
        let a = try startHelper(["write", directory.path, "a", "300", "150"])
        let b = try startHelper(["write", directory.path, "b", "300", "150"])
        for prefix in ["a", "b"] {
            let halted = directory.appendingPathComponent("halted-\(prefix)")
            #expect(await eventually { FileManager.default.fileExists(atPath: halted.path) }, "writer \(prefix) reached its halt")
        }
        for prefix in ["a", "b"] {
            for index in 0..<300 {
                let data = try await store.data(forKey: "\(prefix)-\(index)")
                #expect(data == (index < 150 ? helperValue(for: index, prefix: prefix) : nil), "\(prefix)-\(index) while its writer is halted")
            }
        }
        _ = FileManager.default.createFile(atPath: go.path, contents: nil)
        // Read while they write the rest: every value seen is whole.
        var statusA: Int32?, statusB: Int32?
        var doneA = false, doneB = false
        while !doneA || !doneB {
            if !doneA { doneA = a.hasExited(status: &statusA) }
            if !doneB { doneB = b.hasExited(status: &statusB) }
            for prefix in ["a", "b"] {
                let index = Int.random(in: 0..<300)
                if let data = try await store.data(forKey: "\(prefix)-\(index)") {
                    #expect(data == helperValue(for: index, prefix: prefix))
                }
            }
            // A warm read completes on the calling thread without suspending: without
            // a pause this loop would hold a cooperative thread until both writers end
            // (a minute beside CPU burners), and other suites' loads would wait for it.
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(statusA == 0 && statusB == 0)
        for prefix in ["a", "b"] {
            for index in 0..<300 {
                #expect(try await store.data(forKey: "\(prefix)-\(index)") == helperValue(for: index, prefix: prefix), "\(prefix)-\(index)")
            }
        }
        #expect(try await store.count == 600)
        #expect(store.mapSize > 1 << 20, "the map another process grew was adopted")
    }

    @Test("a writer killed with SIGKILL mid-write, many times over, leaves only whole values")
    func crashSafety() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for round in 0..<8 {
            let ready = directory.appendingPathComponent("ready")
            try? FileManager.default.removeItem(at: ready)
            let hammer = try startHelper(["hammer", directory.path, "h"])
            for _ in 0..<500 where !FileManager.default.fileExists(atPath: ready.path) {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(FileManager.default.fileExists(atPath: ready.path), "the helper opened the store")
            try await Task.sleep(for: .milliseconds(Int.random(in: 20...150)))
            hammer.kill(SIGKILL)
            #expect(hammer.wait() == nil, "round \(round): killed by the signal, mid-write")

            let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
            var present = 0
            for index in 0..<200 {
                guard let data = try await store.data(forKey: "h-\(index)") else { continue }
                present += 1
                // The key is rewritten with later indexes (index, index+200, ...): any of them is whole.
                let prefix = String(decoding: data.prefix(while: { $0 != UInt8(ascii: "|") }), as: UTF8.self)
                let written = Int(prefix.split(separator: "-").last ?? "") ?? -1
                #expect(written % 200 == index && data == helperValue(for: written, prefix: "h"), "round \(round), key h-\(index)")
            }
            #expect(try await store.count == present + round, "whole entries plus one \"after-\" key per earlier round")
            // A write after the crash works: the writer lock was recovered.
            try await store.setData(Data([9]), forKey: "after-\(round)")
            #expect(try await store.data(forKey: "after-\(round)") == Data([9]))
        }
    }
}
