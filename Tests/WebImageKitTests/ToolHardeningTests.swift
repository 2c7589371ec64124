import Foundation
import Testing
@_spi(Internals) import WebImageKit
import WebImage
import WebImageHTTP
@_spi(Internals) import WebImageConfiguration
import WebImageTestSupport
import WebImageSamples
import ServiceLifecycle
@testable import webimage
import Logging

/// The tool against hostile inputs and a hostile origin on loopback.
@Suite("The webimage tool, hostile inputs", .serialized, .timeLimit(.minutes(5)))
struct ToolHardeningTests {
    @Test("arguments that start with '-': a file name is refused with the way to give it (never the help and exit 0); an unknown option is named")
    func dashedArguments() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let dashed = try await tool.run(["load", "-dash.jpg"])
        #expect(dashed.status == 2 && dashed.stderr.contains("put it after --") && !dashed.stdout.contains("OVERVIEW"), "\(dashed.stdout) \(dashed.stderr)")
        let unknown = try await tool.run(["load", "--bogus"])
        #expect(unknown.status == 2 && unknown.stderr.contains("Unknown option '--bogus'"), "\(unknown.stderr)")
        let nothing = try await tool.run(["load"])
        #expect(nothing.status == 2 && nothing.stderr.contains("give inputs"), "\(nothing.stderr)")
        #expect(try await tool.run(["load", "-h"]).stdout.contains("OVERVIEW"))
        #expect(WebImageCommand.firstDashedName(["load", "--", "-dash.jpg"]) == nil)
        #expect(WebImageCommand.firstDashedName(["load", "--quality", "-5", "-", "x.jpg"]) == nil)
        #expect(WebImageCommand.firstDashedName(["info", "-x.png"]) == "-x.png")
        // A subcommand that does not exist is named, whatever options follow it.
        let bogus = try await tool.run(["cache", "bogus", "--cache-dir", tool.cache.path])
        #expect(bogus.status == 2 && bogus.stderr.contains("'cache bogus' is not a command") && bogus.stderr.contains("stats"), "\(bogus.stderr)")
        #expect(WebImageCommand.unknownSubcommand(["cache", "stats", "--json"]) == nil && WebImageCommand.unknownSubcommand(["load", "x.jpg"]) == nil)
    }

    @Test("a name that is not UTF-8: as an argument, exit 2 saying so; as an --input-file line, that input fails saying so and the others load")
    func namesNotUTF8() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let name = Array(tool.home.path.utf8) + Array("/bad".utf8) + [0xFF, 0xFE] + Array(".png".utf8)
        let data = try Data(contentsOf: samples.appendingPathComponent("logo.png"))
        #expect(name.withUnsafeBufferPointer { buffer in
            let path = UnsafeMutablePointer<CChar>.allocate(capacity: buffer.count + 1)
            defer { path.deallocate() }
            for (index, byte) in buffer.enumerated() { path[index] = CChar(bitPattern: byte) }
            path[buffer.count] = 0
            let fd = open(path, O_WRONLY | O_CREAT, 0o600)
            defer { close(fd) }
            return data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == data.count
        })
        let argument = try await tool.run(["load", "--json", "--store", "none"], rawArguments: [name])
        #expect(argument.status == 2 && argument.stderr.contains("is not valid UTF-8") && !argument.stderr.contains("No such file"), "\(argument.stderr)")
        let list = tool.home.appendingPathComponent("list.txt")
        try Data(name + Array("\n".utf8) + Array(samples.appendingPathComponent("logo.png").path.utf8) + [0x0A]).write(to: list)
        let listed = try await tool.run(["load", "--json", "--store", "none", "--input-file", list.path])
        #expect(listed.lines.count == 2, "\(listed.stdout)")
        let failed = listed.lines.first { $0["error"] is [String: Any] }
        #expect(((failed?["error"] as? [String: Any])?["message"] as? String)?.contains("not valid UTF-8") == true, "\(listed.stdout)")
        #expect(listed.lines.contains { $0["error"] is NSNull && $0["pixelWidth"] as? Int == 512 }, "the other input loads")
    }

    @Test("samples: an empty path or a file exits 2, a directory it cannot write exits 1, each with a plain message and nothing written")
    func samplesBadDirectories() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let empty = try await tool.run(["samples", ""])
        #expect(empty.status == 2 && empty.stderr.contains("empty path"), "\(empty.stderr)")
        // The tool runs in this process's working directory: '' once wrote the samples there.
        #expect(!FileManager.default.fileExists(atPath: FileManager.default.currentDirectoryPath + "/oriented-8.jpg"), "nothing in the working directory")
        let file = tool.home.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        let onFile = try await tool.run(["samples", file.path])
        #expect(onFile.status == 2 && onFile.stderr.contains("is a file, not a directory") && !onFile.stderr.contains("Domain="), "\(onFile.stderr)")
        let proc = try await tool.run(["samples", "/proc/self"])
        #expect(proc.status == 1 && proc.stderr.contains("cannot write /proc/self/photo-1.jpg: "), "\(proc.stderr)")
    }

    @Test("--out never writes outside its directory, whatever the URL's last segment holds")
    func outputStaysInside() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let server = try await TestHTTPServer.start()
        defer { Task { await server.shutdown() } }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let jpeg = try Data(contentsOf: samples.appendingPathComponent("photo-1.jpg"))
        let hostile = ["/dl/..%2F..%2F..%2Fescaped%2Fowned.jpg", "/dl/%2E%2E", "/dl/..%5C..%5Cback.jpg", "/dl/a%00b.jpg", "/dl/.hidden.jpg", "/dl/%2F"]
        for path in hostile { server.serve(path, jpeg, contentType: "image/jpeg") }
        let out = tool.home.appendingPathComponent("a/b/out")
        let result = try await tool.run(["load", "--json", "--store", "none", "--out", out.path] + hostile.map { server.url($0).absoluteString })
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines.count == hostile.count)
        let written = try FileManager.default.contentsOfDirectory(atPath: out.path)
        #expect(written.count == hostile.count, "\(written)")
        for name in written {
            #expect(!name.hasPrefix(".") && !name.contains("/") && !name.contains("\\") && !name.contains("\0"), "\(name)")
        }
        #expect(written.contains("owned.jpg") == false && written.contains { $0.hasSuffix("escaped_owned.jpg") })
        for line in result.lines {
            let output = try #require(line["output"] as? String)
            #expect(URL(fileURLWithPath: output).deletingLastPathComponent().standardizedFileURL.path == out.standardizedFileURL.path)
        }
        // Nothing landed next to or above the output directory.
        #expect(try FileManager.default.contentsOfDirectory(atPath: tool.home.appendingPathComponent("a").path) == ["b"])
        #expect(!FileManager.default.fileExists(atPath: tool.home.appendingPathComponent("escaped").path))
    }

    @Test("--input-file that does not exist, or is a directory: exit 2 with a message")
    func missingInputFile() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let missing = try await tool.run(["load", "--store", "none", "--input-file", "/nonexistent/urls.txt"])
        #expect(missing.status == 2 && missing.stderr.contains("/nonexistent/urls.txt"), "\(missing.stderr)")
        let directory = try await tool.run(["load", "--store", "none", "--input-file", tool.home.path])
        #expect(directory.status == 2 && directory.stderr.contains("directory"), "\(directory.stderr)")
    }

    @Test("libvips' warnings about a corrupt JPEG reach the log once each with the load's key, never GLib's raw two-line records on stderr")
    func libvipsWarnings() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        var photo = try Data(contentsOf: samples.appendingPathComponent("photo-1.jpg"))
        // An end-of-image marker in the middle of the scan: libjpeg warns, libvips passes it on.
        let middle = photo.count / 2
        photo.replaceSubrange(middle..<(middle + 2), with: [0xFF, 0xD9])
        let corrupt = tool.home.appendingPathComponent("corrupt.jpg")
        try photo.write(to: corrupt)
        for arguments in [["load", "--store", "none", corrupt.path], ["info", corrupt.path]] {
            let result = try await tool.run(arguments, environment: ["LOG_LEVEL": "debug"])
            #expect(!result.stderr.contains("VIPS-WARNING") && !result.stderr.contains("(process:"), "\(arguments[0]): \(result.stderr.prefix(1500))")
        }
        let logged = try await tool.run(["load", "--store", "none", corrupt.path], environment: ["LOG_LEVEL": "info"])
        // Each kind once, at warning, with the load's key: the decode's own warnings.
        let lines = logged.stderr.split(separator: "\n").filter { $0.contains("libvips:") }
        #expect(lines.contains { $0.contains("Corrupt JPEG data") }, "\(logged.stderr.prefix(1500))")
        #expect(lines.allSatisfy { $0.contains(" warning ") && $0.contains("format=jpeg") && $0.contains("key=file://") }, "\(logged.stderr.prefix(1500))")
        let texts = lines.compactMap { line in line.range(of: "libvips: ").map { String(line[$0.upperBound...]) } }
        #expect(Set(texts).count == texts.count, "each warning once: \(texts)")
    }

    @Test("the table prints each input on one line with its control characters and bidi overrides escaped: ESC cannot drive the terminal, U+202E cannot reverse a name")
    func controlCharactersInTable() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let list = tool.home.appendingPathComponent("list.txt")
        try Data("/nonexistent/\u{1B}[31mred\u{07}.jpg\n/nonexistent/photo\u{202E}gpj.exe\u{2066}\n".utf8).write(to: list)
        let result = try await tool.run(["load", "--store", "none", "--input-file", list.path])
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(!result.stdout.contains("\u{1B}") && !result.stdout.contains("\u{07}"), "\(result.stdout)")
        #expect(result.stdout.contains("\\u001B[31mred\\u0007.jpg"), "\(result.stdout)")
        #expect(!result.stdout.unicodeScalars.contains("\u{202E}") && !result.stdout.unicodeScalars.contains("\u{2066}"), "\(result.stdout)")
        #expect(result.stdout.contains("photo\\u202Egpj.exe\\u2066"), "\(result.stdout)")
        #expect(result.stdout.split(separator: "\n").count == 3, "the header and two rows: \(result.stdout)")
    }

    @Test("an input line over 64 KiB is an error for that line alone, and a 24 MB line without a newline keeps memory flat")
    func longLines() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let logo = samples.appendingPathComponent("logo.png").path
        let list = tool.home.appendingPathComponent("list.txt")
        try Data((String(repeating: "a", count: 100_000) + "\n" + logo + "\n").utf8).write(to: list)
        let result = try await tool.run(["load", "--json", "--store", "none", "--input-file", list.path])
        #expect(result.status == 1 && result.lines.count == 2, "\(result.stdout) \(result.stderr)")
        let error = try #require(result.lines.first?["error"] as? [String: Any])
        #expect(error["code"] as? String == "invalidURL" && (error["message"] as? String)?.contains("longer than 65536 bytes") == true, "\(error)")
        #expect((result.lines.first?["input"] as? String ?? "").utf8.count < 400, "the record names the line by its start")
        #expect(result.lines.last?["input"] as? String == logo && result.lines.last?["error"] is NSNull)

        // /dev/zero's one endless line, made finite: 24 MB of NUL bytes and no newline.
        let zeros = tool.home.appendingPathComponent("zeros")
        try Data(count: 24 << 20).write(to: zeros)
        let small = try await tool.run(["load", "--json", "--store", "none", logo])
        let huge = try await tool.run(["load", "--json", "--store", "none", "--input-file", zeros.path])
        #expect(huge.status == 1 && huge.lines.count == 1, "\(huge.stdout) \(huge.stderr)")
        #expect(huge.peakResidentBytes < small.peakResidentBytes + (8 << 20),
                "peak \(huge.peakResidentBytes >> 20) MiB reading a 24 MB line, \(small.peakResidentBytes >> 20) MiB for one image")
    }

    @Test("usage errors exit 2 with a plain message: a bad --transform, --out naming a file, a bad --quality")
    func usageErrors() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let logo = samples.appendingPathComponent("logo.png").path
        let transform = try await tool.run(["load", "--store", "none", logo, "--transform", "blur:-1"])
        #expect(transform.status == 2 && transform.stderr.contains("--transform") && transform.stderr.contains("blur"), "\(transform.stderr)")
        let quality = try await tool.run(["load", "--store", "none", logo, "--quality", "500"])
        #expect(quality.status == 2 && quality.stderr.contains("--quality"), "\(quality.stderr)")
        let out = try await tool.run(["load", "--store", "none", logo, "--out", logo])
        #expect(out.status == 2 && out.stderr.contains("exists and is not a directory"), "\(out.stderr)")
        #expect(!out.stderr.contains("Error Domain") && !out.stderr.contains("NSCocoa"), "\(out.stderr)")
        let under = try await tool.run(["load", "--store", "none", logo, "--out", logo + "/sub"])
        #expect(under.status == 2 && under.stderr.contains("--out") && under.stderr.contains("\(logo) is not a directory"), "\(under.stderr)")
        // `..` after a symbolic link, for --out and the cache: where the kernel resolves it.
        let inner = tool.home.appendingPathComponent("real/inner")
        try FileManager.default.createDirectory(at: inner, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: tool.home.appendingPathComponent("link"), withDestinationURL: inner)
        let linked = try await tool.run(["load", "--store", "lmdb", "--cache-dir", tool.home.path + "/link/../cache", logo, "--out", tool.home.path + "/link/../out"])
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(FileManager.default.fileExists(atPath: tool.home.path + "/real/out/logo.png"), "\(linked.stderr)")
        #expect(FileManager.default.fileExists(atPath: tool.home.path + "/real/cache/data.mdb"))
        #expect(!FileManager.default.fileExists(atPath: tool.home.path + "/out") && !FileManager.default.fileExists(atPath: tool.home.path + "/cache"))
        let empty = try await tool.run(["load", "--store", "none", logo, "--out", ""])
        #expect(empty.status == 2 && empty.stderr.contains("--out ''"), "\(empty.stderr)")
        // An --out path so long that no file fits under it: every input fails, and
        // the directories made for it go again; where a file was written, they stay.
        // (4090 bytes, and "/logo.png" passes PATH_MAX.)
        let deep = pathOfLength(4090, under: tool.home.appendingPathComponent("deep"))
        let tooLong = try await tool.run(["load", "--store", "none", logo, "--out", deep.path])
        #expect(tooLong.status != 0, "\(tooLong.stdout)")
        #expect(!FileManager.default.fileExists(atPath: tool.home.path + "/deep/made"), "nothing made is left: \(tooLong.stderr)")
        let fits = tool.home.appendingPathComponent("deep/fits")
        #expect(try await tool.run(["load", "--store", "none", logo, "--out", fits.path]).status == 0)
        #expect(FileManager.default.fileExists(atPath: fits.path + "/logo.png"))
        // The same through the cache directory, for either store that keeps files.
        for store in ["lmdb", "filesystem"] {
            let cache = try await tool.run(["load", "--store", store, "--cache-dir", logo + "/cache", logo])
            #expect(cache.status != 0 && cache.stderr.contains("cannot create cache directory") && cache.stderr.contains("\(logo) is not a directory"), "\(cache.stderr)")
            #expect(!cache.stderr.contains("NSCocoaErrorDomain") && !cache.stderr.contains("store.kind"), "the path is at fault, not the kind: \(cache.stderr)")
        }
    }

    @Test("a FIFO as input fails at once with a typed error instead of hanging")
    func fifoInput() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let fifo = tool.home.appendingPathComponent("pipe.png")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let result = try await tool.run(["load", "--json", "--store", "none", fifo.path])
        #expect(result.status == 1)
        let error = try #require(result.lines.first?["error"] as? [String: Any])
        #expect(error["code"] as? String == "invalidURL" && (error["message"] as? String)?.contains("not a regular file") == true)
    }

    /// 30 responses of 60 MB through the tool at concurrency 1: each body is dropped
    /// when its load ends. Before the fix the curl driver's queue kept finished
    /// transfers (and their bodies) until it compacted: 30 x 60 MB stayed alive.
    @Test("30 responses of 60 MB in a row: the tool's peak RSS stays near one body")
    func bodiesAreReleased() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let server = try await TestHTTPServer.start()
        defer { Task { await server.shutdown() } }
        let body = 60_000_000
        let payload = Data(count: body)  // not an image: each load ends right after its download
        let urls = (0..<30).map { index in
            server.serve("/body/\(index)", payload)
            return server.url("/body/\(index)").absoluteString
        }
        let arguments = ["load", "--json", "--store", "none", "--concurrency", "1", "--quiet", "--set", "loader.timeout=10m"]
        // The same tool loading one such body: the baseline, measured in this run
        // (a sanitizer or another allocator moves both alike).
        // Under AddressSanitizer its quarantine keeps freed memory on purpose: off for
        // the measured child (the variable means nothing to an unsanitized build).
        let inherited = ProcessInfo.processInfo.environment["ASAN_OPTIONS"].map { $0 + ":" } ?? ""
        let environment = ["ASAN_OPTIONS": inherited + "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"]
        let one = try await tool.run(arguments + [urls[0]], environment: environment)
        let result = try await tool.run(arguments + urls, environment: environment)
        #expect(result.lines.count == 30)
        let codes = result.lines.map { ($0["error"] as? [String: Any])?["code"] as? String }
        #expect(codes.allSatisfy { $0 == "unsupportedFormat" }, "each body arrived whole: \(codes)")
        // Thirty in a row must peak near one: within two more bodies. Retaining them
        // would add 29 x 60 MB = 1.7 GB.
        #expect(result.peakResidentBytes < one.peakResidentBytes + 2 * body,
                "peak RSS \(result.peakResidentBytes >> 20) MiB for 30 bodies, \(one.peakResidentBytes >> 20) MiB for one")
    }
}

@Suite("Output file names")
struct OutputFileNameTests {
    @Test("hostile last segments become one safe component", arguments: [
        ("http://h/dl/..%2F..%2F..%2Ftmp%2Fx%2Fowned.jpg", "_.._.._tmp_x_owned"),
        ("http://h/dl/%2E%2E", nil),
        ("http://h/dl/..", nil),
        ("http://h/a/..%5C..%5Cwin.png", "_.._win"),
        ("http://h/a/nul%00byte.png", "nul_byte"),
        ("http://h/a/tab%09%0Aline.png", "tab__line"),
        ("http://h/a/photo%E2%80%AEgpj.exe", "photogpj"),
        ("http://h/a/%E2%80%AAa%E2%80%ABb%E2%80%ACc%E2%80%ADd%E2%81%A6e%E2%81%A7f%E2%81%A8g%E2%81%A9h%E2%80%8Bi.png", "abcdefghi"),
        ("http://h/a/%C2%85next%E2%80%A8line.png", "_nextline"),
        ("http://h/a/.bashrc", "bashrc"),
        ("http://h/a/...jpg", nil),
        ("http://h/a/%20%20.x.jpg", "x"),
        ("http://h/", nil),
        ("http://h/photos/cat.jpg?w=1", "cat"),
        ("http://h/photos/caf%C3%A9.jpg", "café"),
        ("file:///tmp/dir/photo.jpg", "photo"),
    ] as [(String, String?)])
    func names(url: String, expected: String?) throws {
        let url = try #require(URL(string: url))
        let stem = OutputFileName.stem(for: url, key: "k")
        let name = OutputFileName.make(for: url, key: "k", fileExtension: "png")
        #expect(!name.hasPrefix(".") && !name.contains("/") && !name.contains("\\") && !name.unicodeScalars.contains { $0.value < 0x20 })
        #expect(!name.unicodeScalars.contains { [.format, .control].contains($0.properties.generalCategory) })
        if let expected {
            #expect(stem == expected)
        } else {
            #expect(stem.hasPrefix("image-") && stem.count == 22, "the key's digest when nothing is left: \(stem)")
        }
    }

    @Test("long names are capped below the file system's limit")
    func long() throws {
        let url = try #require(URL(string: "http://h/" + String(repeating: "é", count: 400) + ".jpg"))
        #expect(OutputFileName.make(for: url, key: "k", fileExtension: "webp").utf8.count <= 255)
    }
}

@Suite("Unknown configuration keys", .serialized, .timeLimit(.minutes(2)))
struct UnknownKeyTests {
    @Test("a key nothing reads, by flag, variable or file, stops start-up with exit 2 naming it and the nearest key")
    func tool() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let bySet = try await tool.run(["cache", "stats", "--set", "store.remote.kind=redis"])
        #expect(bySet.status == 2 && bySet.stderr.contains("store.remote.kind") && bySet.stderr.contains("'store.shared.kind'"), "\(bySet.stderr)")
        let typo = try await tool.run(["cache", "stats", "--set", "store.maxSise=1GB"])
        #expect(typo.status == 2 && typo.stderr.contains("did you mean 'store.maxSize'"), "\(typo.stderr)")
        let byVariable = try await tool.run(["cache", "stats"], environment: ["WEBIMAGE_STORE_REMOTE_KIND": "redis"])
        #expect(byVariable.status == 2 && byVariable.stderr.contains("WEBIMAGE_STORE_REMOTE_KIND"), "\(byVariable.stderr)")
        let file = tool.home.appendingPathComponent("config.json")
        try Data(#"{"store": {"remote": {"kind": "redis"}}, "myapp": {"anything": 1}}"#.utf8).write(to: file)
        let byFile = try await tool.run(["cache", "stats", "--config", file.path])
        #expect(byFile.status == 2 && byFile.stderr.contains("store.remote.kind") && !byFile.stderr.contains("myapp"), "\(byFile.stderr)")
        let load = try await tool.run(["load", "--store", "none", "/nonexistent.png", "--set", "loader.proxyy=http://x"])
        #expect(load.status == 2 && load.stderr.contains("'loader.proxy'"), "\(load.stderr)")

        // Known keys pass, whichever layer sets them; a file's keys outside the package's namespaces are its own business.
        try Data(#"{"store": {"kind": "memory", "lmdb": {"mapSize": "64MiB"}}, "myapp": {"anything": 1}}"#.utf8).write(to: file)
        let good = try await tool.run(["cache", "stats", "--json", "--config", file.path, "--set", "loader.fileRoot=/tmp"],
                                      environment: ["WEBIMAGE_STORE_MAX_AGE": "1d", "WEBIMAGE_LOADER_BLOCK_PRIVATE_ADDRESSES": "true"])
        #expect(good.status == 0, "\(good.stderr)")
    }

    @Test("serve's keys in the environment (a container configured for serve) pass every other command; as flags they do not, and typos still stop")
    func serveKeysInTheEnvironment() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let logo = samples.appendingPathComponent("logo.png").path
        let serving = ["WEBIMAGE_ALLOCATOR": "system", "WEBIMAGE_HTTP_PORT": "23001", "WEBIMAGE_THUMBNAIL_ALLOWED_HOSTS": "example.com",
                       "WEBIMAGE_THUMBNAIL_PRESETS_AVATAR": "w=64"]
        for arguments in [["cache", "stats"], ["info", logo], ["load", "--quiet", logo]] {
            let result = try await tool.run(arguments, environment: serving)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
        let flag = try await tool.run(["cache", "stats", "--set", "http.port=23001"])
        #expect(flag.status == 2 && flag.stderr.contains("http.port"), "\(flag.stderr)")
        let typo = try await tool.run(["cache", "stats"], environment: ["WEBIMAGE_HTTP_PROT": "23001"])
        #expect(typo.status == 2 && typo.stderr.contains("WEBIMAGE_HTTP_PROT"), "\(typo.stderr)")
    }
}

@Suite("ConfigKeyCheck")
struct ConfigKeyCheckTests {
    @Test("environment names as swift-configuration spells them")
    func environmentNames() {
        #expect(ConfigKeyCheck.environmentName(for: "webimage.store.maxAge") == "WEBIMAGE_STORE_MAX_AGE")
        #expect(ConfigKeyCheck.environmentName(for: "webimage.store.lmdb.readsOnCallingThread") == "WEBIMAGE_STORE_LMDB_READS_ON_CALLING_THREAD")
        #expect(ConfigKeyCheck.environmentName(for: "webimage.http.port") == "WEBIMAGE_HTTP_PORT")
        // Found by the config fuzz target: a letter whose upper case is two letters trapped.
        #expect(ConfigKeyCheck.environmentName(for: "straße.größe") == "STRASSE_GRÖSSE")
    }

    @Test("the nearest key: by edit distance, else by the last component; none when nothing is close")
    func nearest() throws {
        let known = PluginCatalog.standard.knownKeys
        #expect(ConfigKeyCheck.nearest("store.maxsize", in: known) == "store.maxSize")
        #expect(ConfigKeyCheck.nearest("store.remote.kind", in: known) == "store.shared.kind")
        #expect(ConfigKeyCheck.nearest("zzzzzzzzzzzzzzzzzzzzzzzzzzz", in: known) == nil)
        let check = ConfigKeyCheck(known: known)
        #expect(throws: Never.self) { try check.check(["otherapp.key"], source: "f", onlyNamespaces: true) }
        #expect(throws: WebImageError.self) { try check.check(["otherapp.key"], source: "f") }
        #expect(throws: Never.self) { try check.check(known.sorted(), source: "f") }
    }
}

@Suite("webimage info reads headers only", .serialized, .timeLimit(.minutes(2)))
struct InfoHeaderTests {
    @Test("a 400 MP PNG is described from its header, within a small RSS, and nothing is written to the cache")
    func headerOnly() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let huge = tool.home.appendingPathComponent("huge.png")
        try SyntheticImages.pngHeader(width: 20_000, height: 20_000, idat: true).write(to: huge)
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])

        // The baseline: the same command on a 64-pixel image, in this run.
        let small = try await tool.run(["info", "--json", "--store", "none", samples.appendingPathComponent("icon@2x.png").path])
        // The default LMDB store in ~/.cache/webimage.
        let result = try await tool.run(["info", "--json", huge.path])
        #expect(result.status == 0, "\(result.stderr)")
        let info = try #require(result.lines.first)
        #expect(info["pixelWidth"] as? Int == 20_000 && info["format"] as? String == "png" && info["colorSpace"] as? String == "srgb")
        #expect(info["hasColorProfile"] as? Bool == false && info["cacheType"] as? String == "none")
        #expect(result.peakResidentBytes < small.peakResidentBytes + (100 << 20),
                "decoding would take 1.2 GB: \(result.peakResidentBytes >> 20) MiB, against \(small.peakResidentBytes >> 20) MiB for a small image")

        let gif = try #require(try await tool.run(["info", "--json", samples.appendingPathComponent("spinner.gif").path]).lines.first)
        #expect(gif["frameCount"] as? Int == 8 && gif["loopCount"] as? Int == 0)
        let stats = try #require(try await tool.run(["cache", "stats", "--json"]).lines.first)
        #expect(stats["count"] as? Int == 0, "info wrote nothing to the store")

        // An image already cached is described from the disk tier.
        _ = try await tool.run(["load", samples.appendingPathComponent("logo.png").path])
        let cached = try #require(try await tool.run(["info", "--json", samples.appendingPathComponent("logo.png").path]).lines.first)
        #expect(cached["cacheType"] as? String == "disk" && cached["hasAlpha"] as? Bool == true)
    }

    @Test("a few hundred bytes declaring 10000x10000 with ten components: a typed error at once, the peak RSS far under 500 MB")
    func tenComponents() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let file = tool.home.appendingPathComponent("ten.jpg")
        try SyntheticImages.declaredJPEG(width: 10_000, height: 10_000, components: 10, progressive: true).write(to: file)
        for arguments in [["--thumbnail", "256"], []] {
            let result = try await tool.run(["load", "--json", "--store", "none"] + arguments + [file.path])
            let error = try #require(result.lines.first?["error"] as? [String: Any], "\(result.stdout) \(result.stderr)")
            #expect(result.status == 1 && error["code"] as? String == "pixelLimitExceeded", "\(error)")
            #expect(result.peakResidentBytes < 500 << 20, "it took 1986 MiB: \(result.peakResidentBytes >> 20) MiB")
        }
    }

    @Test("13 rotations: refused as a spec of too many steps; 8 of them refused at the step that would pass the limits, within seconds")
    func rotations() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let photo = samples.appendingPathComponent("photo-1.jpg").path
        let thirteen = try await tool.run(["load", "--store", "none", "--transform", Array(repeating: "rotate:45", count: 13).joined(separator: ";"), photo])
        #expect(thirteen.status != 0 && thirteen.stderr.contains("13 steps"), "\(thirteen.status) \(thirteen.stderr)")
        let started = ContinuousClock.now
        let eight = try await tool.run(["load", "--json", "--store", "none", "--transform", Array(repeating: "rotate:45", count: 8).joined(separator: ";"), photo])
        let error = try #require(eight.lines.first?["error"] as? [String: Any], "\(eight.stdout) \(eight.stderr)")
        #expect(eight.status == 1 && error["code"] as? String == "pixelLimitExceeded", "\(error)")
        #expect(eight.peakResidentBytes < 1 << 30, "\(eight.peakResidentBytes >> 20) MiB")
        #expect(ContinuousClock.now - started < .seconds(120), "generous for a busy machine; 13 steps took 23 s and 2.2 GB before")
    }

    @Test("a GIF of 5000 frames: load and info fail with a typed error naming the count")
    func manyFrames() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let gif = tool.home.appendingPathComponent("many.gif")
        try SyntheticImages.manyFrameGIF(frames: 5000).write(to: gif)
        for command in ["load", "info"] {
            let result = try await tool.run([command, "--json", "--store", "none", gif.path])
            let error = try #require(result.lines.first?["error"] as? [String: Any], "\(command): \(result.stdout)")
            #expect(result.status == 1 && error["code"] as? String == "decodeFailed" && (error["message"] as? String)?.contains("5000 frames") == true)
        }
    }
}

@Suite("The tool on a full disk", .serialized, .enabled(if: getuid() == 0, "mounting a tmpfs needs root"), .timeLimit(.minutes(2)))
struct ToolDiskFullTests {
    @Test("an image the LMDB cache cannot hold still loads: exit 0 and a warning; smaller ones are cached")
    func warning() async throws {
        let disk = try SmallFileSystem(size: "512k")
        defer { disk.unmount() }
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let photo = samples.appendingPathComponent("photo-3.jpg").path, logo = samples.appendingPathComponent("logo.png").path
        let result = try await tool.run(["load", "--json", "--cache-dir", disk.path.path, photo])
        #expect(result.status == 0, "\(result.stderr)")
        let line = try #require(result.lines.first)
        #expect(line["error"] is NSNull && line["pixelWidth"] as? Int == 2400)
        #expect((line["warning"] as? String)?.contains("not cached") == true, "\(line)")
        let small = try await tool.run(["load", "--json", "--cache-dir", disk.path.path, logo])
        #expect(small.status == 0 && small.lines.first?["warning"] is NSNull, "\(small.stdout)")
        let again = try await tool.run(["load", "--json", "--cache-dir", disk.path.path, logo])
        #expect(again.lines.first?["cacheType"] as? String == "disk")
    }

    @Test("--out on a full disk: the input fails with storeFailed and leaves no file behind, neither empty nor partial")
    func outputOnFullDisk() async throws {
        // The PNG of the 2400x1350 sample is about 170 kB.
        let disk = try SmallFileSystem(size: "64k")
        defer { disk.unmount() }
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let photo = samples.appendingPathComponent("photo-3.jpg").path
        let out = disk.path.appendingPathComponent("out")
        let result = try await tool.run(["load", "--json", "--store", "none", photo, "--format", "png", "--out", out.path])
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        let error = try #require(result.lines.first?["error"] as? [String: Any])
        #expect(error["code"] as? String == "storeFailed" && (error["message"] as? String)?.contains("No space left") == true, "\(error)")
        #expect(!FileManager.default.fileExists(atPath: out.path), "nothing is left: not even the --out directory made for the run")
    }
}

/// Inputs the fuzz targets found (docs/testing.md), kept as regression tests.
@Suite("Fuzz findings")
struct FuzzFindingTests {
    @Test("numbers too large for an Int, infinite or NaN are refused, never trapped on", arguments: [
        "round:866666666666666666666666666666666666666666666666666666666666666666", "crop:0,0,1e30,5", "crop:inf,0,5,5",
        "rotate:nan", "blur:1e9", "blur:-1", "crop:-5,0,10,10", "crop:0,0,0,10", "tint:255,0,0,7", "resize:99999999999999999999x5",
    ])
    func transformSpecs(spec: String) {
        #expect(throws: WebImageError.self, "\(spec)") { _ = try TransformSpec.parse(spec) }
    }

    @Test("sizes and durations: inf, nan and absurd exponents are not values")
    func sizesAndDurations() {
        for text in ["inf", "nan", "1e300GB", "infKB", "-1", "1e30", "9223372036854775807", "1025TiB", "1125899906842625"] {
            #expect(ByteCount.parse(text) == nil, "\(text)")
        }
        // Up to 1 PiB, so that sums of sizes cannot overflow.
        #expect(ByteCount.parse("1TiB") == 1 << 40 && ByteCount.parse("2tb") == 2 << 40 && ByteCount.parse("1024TiB") == ByteCount.maximum)
        #expect(ByteCount.parse("1125899906842624") == 1 << 50)
        // Plain decimals only, as sizes: what Double(_:) reads besides is refused.
        for text in ["inf", "nan", "1e300d", "infs", "-5s", "1e30", "1e3", "1e-9", "0x10", "+5", ".5", "5.", "1.2.3s", "s", ""] {
            #expect(ConfigValues.parseDuration(text) == nil, "\(text)")
        }
        #expect(ByteCount.parse("64MiB") == 64 << 20 && ConfigValues.parseDuration("1.5s") == .milliseconds(1500))
        // A positive duration is never zero (which turns some settings off); zero stays zero.
        #expect(ConfigValues.parseDuration("0.0001s") == .milliseconds(1) && ConfigValues.parseDuration("0.000000001") == .milliseconds(1))
        #expect(ConfigValues.parseDuration(" 0.5 ") == .milliseconds(500) && ConfigValues.parseDuration("10M") == .seconds(600))
        #expect(ConfigValues.parseDuration("0") == .zero && ConfigValues.parseDuration("0ms") == .zero)
    }
}

@Suite("load --cache-only", .serialized, .timeLimit(.minutes(2)))
struct CacheOnlyTests {
    @Test("answers from the tiers alone: cached inputs are disk hits, the rest notCached, nothing is loaded, exit 1")
    func cacheOnly() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let cached = ["photo-1.jpg", "logo.png"].map { samples.appendingPathComponent($0).path }
        let uncached = samples.appendingPathComponent("spinner.gif").path
        #expect(try await tool.run(["load", "--json"] + cached).status == 0)

        let result = try await tool.run(["load", "--json", "--cache-only"] + cached + [uncached])
        #expect(result.status == 1)
        let byInput = Dictionary(uniqueKeysWithValues: result.lines.map { ($0["input"] as! String, $0) })
        for path in cached { #expect(byInput[path]?["cacheType"] as? String == "disk", "\(path)") }
        #expect((byInput[uncached]?["error"] as? [String: Any])?["code"] as? String == "notCached")
        let stats = try #require(try await tool.run(["cache", "stats", "--json"]).lines.first)
        #expect(stats["count"] as? Int == 2, "the uncached input was not loaded")
    }
}

@Suite("The tool and SIGTERM", .serialized, .timeLimit(.minutes(3)))
struct ToolSignalTests {
    @Test("SIGTERM mid-batch: the tool stops taking inputs, finishes those in flight, exits 143; every input it reported is cached")
    func sigterm() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let server = try await TestHTTPServer.start()
        defer { Task { await server.shutdown() } }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let jpeg = try Data(contentsOf: samples.appendingPathComponent("photo-1.jpg"))
        // 80 inputs of 1 s at 8 in flight: a batch of 10 s, long enough that a busy
        // machine's test still signals it mid-batch.
        let urls = (0..<80).map { index in
            server.serve("/img/\(index).jpg", jpeg, contentType: "image/jpeg", delay: 1000)
            return server.url("/img/\(index).jpg").absoluteString
        }
        func started() -> Int { (0..<80).reduce(0) { $0 + server.requestCount(path: "/img/\($1).jpg") } }
        // The default concurrency (8 in flight), with inputs read ahead of it.
        let running = try tool.start(["load", "--json"] + urls)
        // Wait for a few results (bounded by the suite's time limit), then stop it.
        #expect(await eventually { running.stdout.split(separator: "\n").count >= 3 })
        let startedAtSignal = started()
        running.signal(SIGTERM)
        let result = try await running.wait()
        #expect(result.status == 143, "\(result.stderr)")
        #expect(result.stderr.contains("stopped by signal 15"))
        let reported = result.lines
        #expect(reported.count >= 3 && reported.count < 80, "\(reported.count) inputs reported")
        // No input starts after the signal, and every one that started is reported. A
        // few may race it: started by the tool, their requests not yet at the origin
        // when it was counted (before the fix, 26 more started after a signal).
        #expect(started() <= startedAtSignal + 3, "\(started()) downloads started, \(startedAtSignal) at the signal")
        #expect(reported.count == started(), "\(reported.count) reported, \(started()) started")
        #expect(reported.allSatisfy { $0["error"] is NSNull }, "inputs in flight finished rather than failing")

        let inputs = reported.compactMap { $0["input"] as? String }
        let cached = try await tool.run(["load", "--json", "--cache-only"] + inputs)
        #expect(cached.status == 0 && cached.lines.count == inputs.count)
        #expect(cached.lines.allSatisfy { $0["cacheType"] as? String == "disk" }, "every reported input is a disk hit")
    }
}

@Suite("ImageManagerService")
struct ImageManagerServiceTests {
    @Test("graceful shutdown of its group shuts the manager down: later loads fail with shutDown")
    func gracefulShutdown() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("service-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("a.png")
        _ = try await onThread { try SampleImages.write(to: directory) }
        let manager = try ConfigLayers.manager(config: try await ConfigLayers.reader(flags: ["store.kind": "memory"], file: nil, environment: [:]))
        let logo = directory.appendingPathComponent("logo.png")
        #expect(try await manager.loadImage(with: logo).image != nil)
        let group = ServiceGroup(configuration: .init(services: [ImageManagerService(manager)], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        try await running.value
        let error = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: file) }
        #expect(error?.code == .shutDown)
    }
}
