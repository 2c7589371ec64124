import Foundation
import Testing
import WebImageTestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite("The webimage tool, end to end", .serialized, .timeLimit(.minutes(2)))
struct ToolTests {
    @Test("samples, then load --json twice: fields and values, second run from disk")
    func load() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        #expect(try await tool.run(["samples", samples.path]).status == 0)
        let files = try FileManager.default.contentsOfDirectory(atPath: samples.path).sorted().map { samples.appendingPathComponent($0).path }
        #expect(files.count == 14)

        let first = try await tool.run(["load", "--json"] + files)
        #expect(first.status == 0, "\(first.stderr)")
        let lines = first.lines
        #expect(lines.count == 14)
        for line in lines {
            for field in ["input", "key", "cacheType", "pixelWidth", "pixelHeight", "frameCount", "bytes", "output", "milliseconds", "error"] {
                #expect(line.keys.contains(field), "\(field) missing in \(line)")
            }
            #expect(line["cacheType"] as? String == "none" && line["error"] is NSNull)
        }
        let spinner = try #require(lines.first { ($0["input"] as? String)?.hasSuffix("spinner.gif") == true })
        #expect(spinner["frameCount"] as? Int == 8 && spinner["pixelWidth"] as? Int == 96)
        let rotated = try #require(lines.first { ($0["input"] as? String)?.hasSuffix("oriented-6.jpg") == true })
        // Stored 400x640 with tag 6: upright, it is the same 640x400 landscape as the others.
        #expect(rotated["pixelWidth"] as? Int == 640 && rotated["pixelHeight"] as? Int == 400, "upright")
        #expect((rotated["key"] as? String)?.hasPrefix("file://") == true && (rotated["bytes"] as? Int ?? 0) > 0)

        let second = try await tool.run(["load", "--json"] + files)
        #expect(second.lines.count == 14 && second.lines.allSatisfy { $0["cacheType"] as? String == "disk" })
        #expect(FileManager.default.fileExists(atPath: tool.home.appendingPathComponent(".cache/webimage/data.mdb").path), "default LMDB cache in ~/.cache/webimage")

        let stats = try await tool.run(["cache", "stats", "--json"])
        let info = try #require(stats.lines.first)
        #expect(info["kind"] as? String == "lmdb" && info["count"] as? Int == 14)
        let path = try await tool.run(["cache", "path", files[0]])
        #expect(path.status == 0 && path.stdout.contains("data.mdb"))
        // A URL names the entry load stored for it: its fragment is not part of the key.
        let url = URL(fileURLWithPath: files[1]).absoluteString
        let removed = try #require(try await tool.run(["cache", "remove", "--json", url + "#top"]).lines.first)
        #expect(removed["key"] as? String == url && removed["removed"] as? Bool == true)
        let gone = try await tool.run(["cache", "path", url + "#top"])
        #expect(gone.status != 0 && gone.stdout.contains("not cached"))
        #expect(try await tool.run(["cache", "stats", "--json"]).lines.first?["count"] as? Int == 13)
        let clear = try await tool.run(["cache", "clear"])
        #expect(clear.status == 0)
        #expect(try await tool.run(["cache", "stats", "--json"]).lines.first?["count"] as? Int == 0)
    }

    @Test("a missing and a corrupt file: JSON errors, non-zero exit, the others still succeed")
    func failures() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let corrupt = tool.home.appendingPathComponent("corrupt.jpg")
        var bytes = try Data(contentsOf: samples.appendingPathComponent("photo-1.jpg"))
        bytes = bytes.prefix(bytes.count / 3)
        try bytes.write(to: corrupt)
        let inputs = [samples.appendingPathComponent("logo.png").path, tool.home.appendingPathComponent("missing.png").path, corrupt.path,
                      samples.appendingPathComponent("spinner.gif").path]
        let result = try await tool.run(["load", "--json", "--store", "filesystem", "--cache-dir", tool.cache.path] + inputs)
        #expect(result.status != 0)
        let byInput = Dictionary(uniqueKeysWithValues: result.lines.map { ($0["input"] as! String, $0) })
        #expect(byInput.count == 4)
        #expect((byInput[inputs[1]]?["error"] as? [String: Any])?["code"] as? String == "notFound")
        #expect((byInput[inputs[2]]?["error"] as? [String: Any])?["code"] as? String == "decodeFailed")
        #expect(byInput[inputs[0]]?["error"] is NSNull && byInput[inputs[3]]?["error"] is NSNull)
    }

    @Test("info on an oriented JPEG and an animated GIF")
    func info() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let oriented = try #require(try await tool.run(["info", "--json", "--store", "none", samples.appendingPathComponent("oriented-8.jpg").path]).lines.first)
        #expect(oriented["orientation"] as? Int == 8 && oriented["pixelWidth"] as? Int == 640 && oriented["format"] as? String == "jpeg")
        let gif = try #require(try await tool.run(["info", "--json", "--store", "none", samples.appendingPathComponent("spinner.gif").path]).lines.first)
        #expect(gif["frameCount"] as? Int == 8 && gif["loopCount"] as? Int == 0)
        #expect((gif["frameDurations"] as? [Double])?.allSatisfy { abs($0 - 0.08) < 0.001 } == true)
        let icon = try #require(try await tool.run(["info", "--json", "--store", "none", samples.appendingPathComponent("icon@2x.png").path]).lines.first)
        #expect(icon["scale"] as? Double == 2 && icon["width"] as? Double == 64 && icon["hasAlpha"] as? Bool == true)
        #expect(icon["blurHash"] == nil, "placeholders only when asked")
        let placeholders = try #require(try await tool.run(["info", "--json", "--placeholder", samples.appendingPathComponent("photo-1.jpg").path]).lines.first)
        let blurHash = try #require(placeholders["blurHash"] as? String), thumbHash = try #require(placeholders["thumbHash"] as? String)
        #expect(blurHash.count == 28, "4x3 terms")
        #expect(Data(base64Encoded: thumbHash).map { $0.count >= 5 } == true)
        let stats = try await tool.run(["cache", "stats", "--json"])
        #expect(stats.stdout.contains("\"count\":0"), "info --placeholder writes no cache: \(stats.stdout)")
    }

    @Test("inputs from standard input; --out writes thumbnails named after the input")
    func batchAndOutput() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let out = tool.home.appendingPathComponent("thumbs")
        let list = ["photo-1.jpg", "photo-2.jpg", "logo.png"].map { samples.appendingPathComponent($0).path }.joined(separator: "\n") + "\n"
        let result = try await tool.run(["load", "--json", "--input-file", "-", "--thumbnail", "128x128", "--format", "webp", "--out", out.path,
                                   "--store", "memory"], stdin: list)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines.count == 3)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: out.path)) == ["photo-1.webp", "photo-2.webp", "logo.webp"])
        let photo = try #require(result.lines.first { ($0["input"] as? String)?.hasSuffix("photo-1.jpg") == true })
        #expect(photo["pixelWidth"] as? Int == 128 && photo["pixelHeight"] as? Int == 96)
        #expect((photo["output"] as? String)?.hasSuffix("photo-1.webp") == true)
    }

    @Test("--out follows the result: rounded JPEGs become PNG from the first run and from the disk cache; AVIF and HEIC are written; originals are copied byte for byte")
    func outputFormats() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let photo = samples.appendingPathComponent("photo-1.jpg").path
        for run in ["first", "cached"] {
            let out = tool.home.appendingPathComponent("round-\(run)")
            let result = try await tool.run(["load", "--json", "--transform", "resize:120x90;round:30", "--out", out.path, photo])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.lines.first?["cacheType"] as? String == (run == "first" ? "none" : "disk"))
            let written = try Data(contentsOf: out.appendingPathComponent("photo-1.png"))
            #expect(written.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]), "\(run): PNG")
            #expect(written[25] == 6, "\(run): colour type RGBA")
        }
        for (format, ext) in [("avif", "avif"), ("heic", "heic")] {
            let out = tool.home.appendingPathComponent(format)
            let result = try await tool.run(["load", "--json", "--thumbnail", "64", "--format", format, "--effort", "0", "--out", out.path, photo])
            #expect(result.status == 0, "\(format): \(result.stderr)")
            let written = try Data(contentsOf: out.appendingPathComponent("photo-1.\(ext)"))
            #expect(String(decoding: written[4..<8], as: UTF8.self) == "ftyp", "\(format)")
        }
        let copy = tool.home.appendingPathComponent("copy")
        #expect(try await tool.run(["load", "--out", copy.path, photo]).status == 0)
        #expect(try Data(contentsOf: copy.appendingPathComponent("photo-1.jpg")) == Data(contentsOf: URL(fileURLWithPath: photo)))
        for bad in [["--effort", "12"], ["--background", "purple"], ["--format", "jxl"], ["--transform", "pad:10x10:zzz"]] {
            let result = try await tool.run(["load", "--thumbnail", "64"] + bad + [photo])
            #expect(result.status != 0 && !result.stderr.isEmpty, "\(bad)")
        }
    }

    @Test("--store none is a batch run: the memory cache is off unless memory.costLimit is set")
    func batchWithoutCache() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let photo = samples.appendingPathComponent("photo-1.jpg").path
        func cacheTypes(_ extra: [String]) async throws -> [String?] {
            let result = try await tool.run(["load", "--json", "--store", "none", "--concurrency", "1", "--thumbnail", "64x64"] + extra + [photo, photo])
            #expect(result.status == 0, "\(result.stderr)")
            return result.lines.map { $0["cacheType"] as? String }
        }
        #expect(try await cacheTypes([]) == ["none", "none"], "the same input twice is loaded twice: nothing kept in memory")
        #expect(try await cacheTypes(["--set", "memory.costLimit=64MB"]) == ["none", "memory"])
    }

    @Test("a JPEG thumbnail batch never starts libvips (its modules stay unloaded, about 10 MiB); the first GIF does")
    func jpegBatchLeavesLibvipsAlone() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        // Inputs through a named pipe: the tool waits for each line, so its
        // mappings can be read between two inputs.
        let fifo = tool.home.appendingPathComponent("inputs")
        try #require(mkfifo(fifo.path, 0o600) == 0)
        let out = tool.home.appendingPathComponent("thumbs")
        let running = try tool.start(["load", "--input-file", fifo.path, "--thumbnail", "96x96", "--format", "jpeg", "--out", out.path, "--store", "none", "--quiet"])
        // O_RDWR: opening the pipe does not wait for the tool to open its end.
        let writer = open(fifo.path, O_RDWR)
        try #require(writer >= 0)
        func send(_ name: String) {
            let line = samples.appendingPathComponent(name).path + "\n"
            _ = line.withCString { write(writer, $0, strlen($0)) }
        }
        func libvipsModulesLoaded() throws -> Bool {
            let maps = try #require(FileHandle(forReadingAtPath: "/proc/\(running.pid)/maps"))
            defer { try? maps.close() }
            let text = String(decoding: try maps.readToEnd() ?? Data(), as: UTF8.self)
            try #require(text.contains("/webimage"), "the tool's own mappings are read")
            return text.contains("/vips-modules-")
        }

        // Written under their final names (a thumbnail is renamed into place; the
        // GIF, which has alpha, comes out as PNG).
        func written(_ names: Set<String>) async -> Bool {
            await eventually { names.isSubset(of: Set((try? FileManager.default.contentsOfDirectory(atPath: out.path)) ?? [])) }
        }
        for name in ["photo-1.jpg", "oriented-6.jpg"] { send(name) }
        try #require(await written(["photo-1.jpg", "oriented-6.jpg"]), "two JPEG thumbnails written: \(running.stderr)")
        #expect(try !libvipsModulesLoaded(), "JPEG thumbnails go through libjpeg-turbo; libvips was started anyway")

        send("spinner.gif")
        try #require(await written(["spinner.png"]), "the GIF's thumbnail written: \(running.stderr)")
        #expect(try libvipsModulesLoaded(), "a GIF is decoded by libvips, which loads its modules when it starts")
        close(writer)
        let result = try await running.wait()
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test("cache commands on a store directory that does not exist answer as for an empty store and create nothing; bad configuration is still exit 2")
    func absentStore() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let missing = tool.home.appendingPathComponent("no-such-cache").path
        for kind in ["lmdb", "filesystem"] {
            let flags = ["--cache-dir", missing, "--store", kind]
            let stats = try await tool.run(["cache", "stats", "--json"] + flags)
            let fields = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]
            #expect(stats.status == 0 && fields?["count"] as? Int == 0 && fields?["totalSize"] as? Int == 0, "\(stats.stdout) \(stats.stderr)")
            #expect(fields?["kind"] as? String == kind && fields?["path"] as? String == missing)
            #expect(try await tool.run(["cache", "clear"] + flags).stdout == "removed 0 entries\n")
            #expect(try await tool.run(["cache", "trim"] + flags).stdout == "removed 0 entries, 0 left\n")
            for command in ["remove", "path"] {
                let result = try await tool.run(["cache", command, "https://example.com/a.jpg"] + flags)
                #expect(result.status == 1 && result.stdout == "not cached\n", "\(command): \(result.stdout) \(result.stderr)")
            }
            let typo = try await tool.run(["cache", "stats", "--set", "store.maxSise=1GB"] + flags)
            #expect(typo.status == 2 && typo.stderr.contains("store.maxSize"), "\(typo.stderr)")
            let badValue = try await tool.run(["cache", "stats", "--set", "store.maxAge=forever"] + flags)
            #expect(badValue.status == 2 && badValue.stderr.contains("store.maxAge"), "\(badValue.stderr)")
            #expect(!FileManager.default.fileExists(atPath: missing), "\(kind): the directory was made")
        }
    }

    @Test("bad configuration: exit status 2 and a message naming the key")
    func badConfiguration() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let byFlag = try await tool.run(["cache", "stats", "--store", "memcached"])
        #expect(byFlag.status == 2 && byFlag.stderr.contains("store.kind") && byFlag.stderr.contains("memcached"))
        // The shared tier's keys: each bad value names its key.
        for (settings, key) in [(["store.shared.kind=memcached"], "store.shared.kind"),
                                (["store.shared.kind=redis"], "store.shared.url"),
                                (["store.shared.kind=redis", "store.shared.url=http://cache:6379"], "store.shared.url"),
                                (["store.shared.kind=redis", "store.shared.url=redis://cache", "store.shared.timeout=soon"], "store.shared.timeout"),
                                (["store.shared.url=redis://cache"], "store.shared.kind")] {
            let result = try await tool.run(["cache", "stats"] + settings.flatMap { ["--set", $0] })
            #expect(result.status == 2 && result.stderr.contains(key), "\(settings): \(result.status) \(result.stderr)")
        }
        let byEnvironment = try await tool.run(["cache", "stats"], environment: ["WEBIMAGE_STORE_MAX_AGE": "forever"])
        #expect(byEnvironment.status == 2 && byEnvironment.stderr.contains("store.maxAge"))
        let badSet = try await tool.run(["load", "x.png", "--set", "novalue"])
        #expect(badSet.status != 0 && badSet.stderr.contains("key=value"))
    }
}
