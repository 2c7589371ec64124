import Foundation
import Testing
import ThumbnailService
import WebImage
import WebImageVips

/// The tests that start processes, one at a time (Foundation's Process is not safe
/// to start from parallel tests on Linux): the gallery page in a real browser
/// (Debian's `chromium`, headless), and the server executable's graceful shutdown.
/// Each test has three minutes, but the soak, which `make soak` runs 20 000 requests long.
@Suite("Processes: the gallery in Chromium, the server's shutdown, the soak", .serialized, .timeLimit(.minutes(60)))
struct ProcessTests {
    @Test("every thumbnail loads with a non-zero natural size and a caption; a screenshot shows them", .timeLimit(.minutes(3)))
    func gallery() async throws {
        let browser = try #require(Browser.find(), "no chromium on PATH: install Debian's chromium (make example-deps)")
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The gallery's sources are the service's own samples, fetched over HTTP from itself.
        let service = try await makeService(directory: directory, overrides: ["thumbnail.allowedHosts": "127.0.0.1"])
        try await withApplication({ service.application(logger: quietLogger, onServerRunning: $0) }) { port in
            let page = "http://127.0.0.1:\(port)/"
            let first = try await Gallery(dom: browser.dumpDOM(page))
            #expect(first.total == 14 && first.images.count == 14, "14 samples on the page: \(first.total), \(first.images.count)")
            #expect(first.loaded == first.total && first.failed == 0, "loaded \(first.loaded), failed \(first.failed)")
            for image in first.images {
                #expect(image.state == "loaded", "\(image.name): \(image.state)")
                #expect(image.caption?.source == "network", "\(image.name) came over the network first: \(image.info)")
                #expect((image.caption?.width ?? 0) > 0 && (image.caption?.height ?? 0) > 0, "\(image.name) natural size: \(image.info)")
            }
            #expect(first.images.first { $0.name == "photo-1.jpg" }?.caption.map { ($0.width, $0.height) } ?? (0, 0) == (256, 192))
            // The eight EXIF-oriented samples show one upright landscape once their tags are applied.
            let oriented = first.images.filter { $0.name.hasPrefix("oriented-") }
            #expect(oriented.count == 8 && oriented.allSatisfy { $0.caption.map { ($0.width, $0.height) } ?? (0, 0) == (256, 160) },
                    "oriented samples upright: \(oriented.map(\.info))")

            let screenshot = directory.appendingPathComponent("gallery.png")
            try await browser.screenshot(page, to: screenshot, width: 1280, height: 1100)
            let kept = FileManager.default.temporaryDirectory.appendingPathComponent("thumbnail-server-gallery.png")
            try? FileManager.default.removeItem(at: kept)
            try? FileManager.default.copyItem(at: screenshot, to: kept)
            let data = try Data(contentsOf: screenshot)
            let image = try decode(data)
            #expect(image.pixelSize == PixelSize(width: 1280, height: 1100))
            // The page itself is grey and white; the photos' skies are blue. A page whose
            // images did not draw has none.
            let pixels = try #require(image.storage(as: VipsStorage.self)).pixels(frameHeight: image.pixelSize.height)
            var blue = 0
            for index in stride(from: 0, to: pixels.bytes.count, by: pixels.channels) {
                let r = Int(pixels.bytes[index]), b = Int(pixels.bytes[index + 2])
                if b > r + 60 { blue += 1 }
            }
            let share = Double(blue) / Double(image.pixelSize.area)
            #expect(share > 0.05, "thumbnails drawn: \(Int(share * 100))% of the screenshot is sky (kept at \(kept.path))")

            let second = try await Gallery(dom: browser.dumpDOM(page))
            #expect(second.loaded == 14 && second.images.allSatisfy { $0.caption?.source == "memory" },
                    "a reload is served from memory: \(second.images.map(\.info))")

            // The animated sample asked for as AVIF: a sequence Chromium reads as animated,
            // with the GIF's frames (WebCodecs' ImageDecoder, on a file:// page, a secure context).
            let client = Client(port: port)
            let gif = try await client.get("/samples/spinner.gif")
            let frames = try decode(gif.data).frameCount
            let avif = try await client.thumbnail("http://127.0.0.1:\(port)/samples/spinner.gif", "&w=48&format=avif")
            #expect(avif.statusCode == 200 && ImageFormat.sniff(avif.data) == .avif, "format=avif on an animated GIF: \(avif.statusCode)")
            let probe = directory.appendingPathComponent("avif-sequence.html")
            try Data("""
                <!doctype html><body>pending<script>
                const bytes = Uint8Array.from(atob("\(avif.data.base64EncodedString())"), c => c.charCodeAt(0));
                const decoder = new ImageDecoder({data: bytes, type: "image/avif"});
                decoder.tracks.ready.then(() => {
                  const track = decoder.tracks.selectedTrack;
                  document.body.textContent = "frames=" + track.frameCount + " animated=" + track.animated;
                }, error => { document.body.textContent = "error=" + error; });
                </script></body>
                """.utf8).write(to: probe)
            let dom = try await browser.dumpDOM(probe.absoluteString)
            #expect(frames > 1 && dom.contains("frames=\(frames) animated=true"), "Chromium reads the AVIF sequence: \(dom.suffix(300))")
        }
    }

    @Test("the ThumbnailServer executable finishes a request in flight on SIGTERM, then exits 0", .timeLimit(.minutes(3)))
    func gracefulShutdown() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let upstream = try Upstream()
        try await withApplication({ upstream.application(onServerRunning: $0) }) { upstreamPort in
            let server = try ServerProcess.thumbnailServer(in: directory, settings: ["WEBIMAGE_LOADER_TIMEOUT": "20s"])
            let port = try await server.port()
            let client = Client(port: port)
            let inFlight = Task { try await client.thumbnail("http://127.0.0.1:\(upstreamPort)/img/slow.jpg", "&w=50") }
            for _ in 0..<200 where upstream.count("/img/slow.jpg") == 0 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(upstream.count("/img/slow.jpg") == 1, "the request reached the upstream before the signal")
            kill(server.pid, SIGTERM)
            let response = try await inFlight.value
            #expect(response.statusCode == 200 && ImageFormat.sniff(response.data) == .jpeg, "the request in flight finished (format=auto, Accept */*: JPEG): \(response.statusCode)")
            let status = try await server.exitStatus(within: .seconds(20))
            #expect(status == 0, "exit status \(status)")
        }
    }

    @Test("soak: cold thumbnails through the server process, 4 clients, every request a new photo URL and size; every answer 200, the server alive")
    func soak() async throws {
        // CI runs a few hundred; `make soak` runs 20 000 against a release build.
        let total = ProcessInfo.processInfo.environment["WEBIMAGE_SOAK_REQUESTS"].flatMap(Int.init) ?? 240
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let upstream = try Upstream()
        try await withApplication({ upstream.application(onServerRunning: $0) }) { upstreamPort in
            let server = try ServerProcess.thumbnailServer(in: directory, settings: ["WEBIMAGE_LOADER_TIMEOUT": "60s", "WEBIMAGE_THUMBNAIL_DEADLINE": "120s"])
            let port = try await server.port()
            let client = Client(port: port)
            let failures = try await withThrowingTaskGroup(of: [String].self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        var failures: [String] = []
                        for index in stride(from: worker, to: total, by: 4) {
                            let width = 64 + (index * 37) % 449
                            let response = try await client.thumbnail("http://127.0.0.1:\(upstreamPort)/img/soak/\(index).jpg", "&w=\(width)&format=jpeg")
                            if response.statusCode != 200 { failures.append("\(index): \(response.statusCode)") }
                        }
                        return failures
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(failures.isEmpty, "\(failures.count) of \(total) failed: \(failures.prefix(10))")
            #expect(server.process.isRunning, "the server is alive after \(total) cold thumbnails")
            #expect(upstream.requests.withLock { $0.keys.filter { $0.hasPrefix("/img/soak/") }.count } == total, "every request was cold")
            kill(server.pid, SIGTERM)
            #expect(try await server.exitStatus(within: .seconds(30)) == 0)
        }
    }

    @Test("four concurrent requests for a JPEG declaring 10000x10000 with ten components: 413 each, the server's VmHWM under 1 GB", .timeLimit(.minutes(3)))
    func tenComponents() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let upstream = try Upstream()
        try await withApplication({ upstream.application(onServerRunning: $0) }) { upstreamPort in
            let server = try ServerProcess.thumbnailServer(in: directory, settings: [:])
            let client = Client(port: try await server.port())
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<4 {
                    group.addTask { try await client.thumbnail("http://127.0.0.1:\(upstreamPort)/img/ten-components.jpg?\(index)", "&w=\(200 + index)").statusCode }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == [413, 413, 413, 413], "\(statuses)")
            let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
            let hwm = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
                .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? .max
            #expect(hwm < 1 << 20, "VmHWM \(hwm) kB; a decode would take 2 GB")
            kill(server.pid, SIGTERM)
            #expect(try await server.exitStatus(within: .seconds(30)) == 0)
        }
    }

    @Test("SIGTERM with requests waiting on a silent origin: answered 503 when the grace period ends, and the process exits within it plus seconds", .timeLimit(.minutes(3)))
    func shutdownDeadline() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let upstream = try Upstream()
        try await withApplication({ upstream.application(onServerRunning: $0) }) { upstreamPort in
            let server = try ServerProcess.thumbnailServer(in: directory, settings: ["WEBIMAGE_LOADER_TIMEOUT": "120s", "WEBIMAGE_THUMBNAIL_SHUTDOWN_GRACE": "2s"])
            let port = try await server.port()
            let client = Client(port: port)
            // Six requests for a silent origin: four reach it (loader.maxConcurrentPerHost), two wait in its queue.
            let waiting = (1...6).map { index in
                Task { try await client.thumbnail("http://127.0.0.1:\(upstreamPort)/img/gated.jpg?\(index)", "&w=\(40 + index)") }
            }
            for _ in 0..<3000 where upstream.count("/img/gated.jpg") < 4 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(upstream.count("/img/gated.jpg") == 4)
            kill(server.pid, SIGTERM)
            for task in waiting {
                let response = try await task.value
                #expect(response.statusCode == 503, "\(response.statusCode) \(String(decoding: response.data, as: UTF8.self))")
            }
            let status = try await server.exitStatus(within: .seconds(30))
            #expect(status == 0, "exit status \(status)")
            upstream.openGate()
        }
    }
}

extension ServerProcess {
    /// The `ThumbnailServer` executable built beside the tests, as a deployment
    /// on loopback would configure it (the origin lives on 127.0.0.1), with
    /// `settings` as `WEBIMAGE_*` variables on top.
    static func thumbnailServer(in directory: URL, settings: [String: String]) throws -> ServerProcess {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("ThumbnailServer")
        return try ServerProcess(executable: executable, directory: directory, environment: [
            "HOME": directory.path,
            "WEBIMAGE_HTTP_PORT": "0",
            "WEBIMAGE_THUMBNAIL_ALLOWED_HOSTS": "127.0.0.1",
            "WEBIMAGE_LOADER_EXEMPT_ADDRESSES": "127.0.0.1/32",
            "WEBIMAGE_SAMPLES_PATH": directory.appendingPathComponent("samples").path,
            "LOG_LEVEL": "error",
        ].merging(settings) { $1 })
    }
}

/// The server executable as a child process, reading its standard output for the
/// "listening on" line.
final class ServerProcess: @unchecked Sendable {
    let process = Process()
    let output = Pipe()
    var pid: Int32 { process.processIdentifier }

    init(executable: URL, directory: URL, environment: [String: String]) throws {
        process.executableURL = executable
        process.currentDirectoryURL = directory
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("WEBIMAGE_") && $0.key != "THUMBNAIL_SERVER_CONFIG" }
            .merging(environment) { $1 }
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    deinit { if process.isRunning { process.terminate() } }

    /// The port from "listening on http://HOST:PORT" (reads on a thread of its own).
    func port() async throws -> Int {
        let handle = output.fileHandleForReading
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                var text = ""
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { continuation.resume(throwing: WebImageError(.loadFailed, "the server exited before listening: \(text)")); return }
                    text += String(decoding: chunk, as: UTF8.self)
                    if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
                       let port = line.split(separator: ":").last.flatMap({ Int($0) }) {
                        continuation.resume(returning: port)
                        return
                    }
                }
            }
        }
    }

    func exitStatus(within limit: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + limit
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.terminate()
                throw WebImageError(.timedOut, "the server did not exit within \(limit)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }
}

/// What the gallery's script left in the DOM.
struct Gallery {
    struct Caption { var source: String; var milliseconds: Double; var width: Int; var height: Int }
    struct Item {
        var name: String
        var state: String
        var info: String
        var caption: Caption?
    }

    var total = 0, loaded = 0, failed = 0
    var images: [Item] = []

    init(dom: String) throws {
        func attribute(_ name: String, in text: Substring) -> String? {
            guard let range = text.range(of: "\(name)=\"") else { return nil }
            let rest = text[range.upperBound...]
            return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
        }
        if let status = dom.range(of: "id=\"status\"").map({ dom[$0.lowerBound...].prefix(200) }) {
            total = Int(attribute("data-total", in: status) ?? "") ?? 0
            loaded = Int(attribute("data-loaded", in: status) ?? "") ?? 0
            failed = Int(attribute("data-failed", in: status) ?? "") ?? 0
        }
        for figure in dom.components(separatedBy: "<figure>").dropFirst() {
            let text = Substring(figure)
            guard let img = text.range(of: "<img ").map({ text[$0.lowerBound...] }) else { continue }
            let info = text.range(of: "class=\"info\">").map { range -> String in
                let rest = text[range.upperBound...]
                return String(rest[..<(rest.firstIndex(of: "<") ?? rest.endIndex)])
            } ?? ""
            // "network · 12.3 ms · 256×192"
            let parts = info.components(separatedBy: " · ")
            var caption: Caption?
            if parts.count == 3, let ms = Double(parts[1].replacingOccurrences(of: " ms", with: "")) {
                let size = parts[2].split(separator: "×").compactMap { Int($0) }
                if size.count == 2 { caption = Caption(source: parts[0], milliseconds: ms, width: size[0], height: size[1]) }
            }
            images.append(Item(name: attribute("alt", in: img) ?? "?", state: attribute("data-state", in: img) ?? "none",
                               info: info, caption: caption))
        }
    }
}

/// Headless Chromium, run as a child process.
struct Browser {
    let executable: String

    static func find() -> Browser? {
        let environment = ProcessInfo.processInfo.environment
        var candidates = ["chromium", "chromium-browser", "google-chrome"].flatMap { name in
            (environment["PATH"] ?? "/usr/bin").split(separator: ":").map { "\($0)/\(name)" }
        }
        if let chosen = environment["CHROMIUM"] { candidates.insert(chosen, at: 0) }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map(Browser.init)
    }

    /// Flags for a container: no sandbox (root), no GPU, no /dev/shm; a virtual time
    /// budget makes Chromium wait for the page's images and scripts before it reports.
    /// Each run gets a new profile, so nothing comes from the browser's own cache.
    private func common(profile: URL) -> [String] {
        ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--no-first-run", "--user-data-dir=\(profile.path)", "--virtual-time-budget=20000"]
    }

    func dumpDOM(_ url: String) async throws -> String {
        let output = try await run(["--dump-dom", url])
        return String(decoding: output, as: UTF8.self)
    }

    func screenshot(_ url: String, to file: URL, width: Int, height: Int) async throws {
        _ = try await run(["--window-size=\(width),\(height)", "--screenshot=\(file.path)", url])
        guard FileManager.default.fileExists(atPath: file.path) else {
            throw WebImageError(.loadFailed, "chromium wrote no screenshot at \(file.path)")
        }
    }

    /// Runs chromium on a thread of its own (the wait blocks) and returns its standard output.
    private func run(_ arguments: [String]) async throws -> Data {
        let executable = executable
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("thumbnail-tests-chromium-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: profile) }
        let arguments = common(profile: profile) + arguments
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                do {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: executable)
                    process.arguments = arguments
                    let output = Pipe()
                    process.standardOutput = output
                    process.standardError = FileHandle.nullDevice
                    try process.run()
                    let data = output.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    guard process.terminationStatus == 0 else {
                        throw WebImageError(.loadFailed, "chromium exited with \(process.terminationStatus)")
                    }
                    continuation.resume(returning: data)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
