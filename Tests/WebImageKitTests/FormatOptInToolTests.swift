import Foundation
import Testing
import WebImage
import WebImageTestSupport

/// The opt-in formats through the tool, as a user runs it.
@Suite("Opt-in formats through webimage", .offCooperativePool)
struct FormatOptInToolTests {
    @Test("--format jxl writes JPEG XL with vips.allowUntrusted, and is refused without it; an SVG draws with vips.svg, a PDF with vips.pdf, each refused without it")
    func optIns() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let photo = samples.appendingPathComponent("photo-1.jpg").path
        let out = tool.home.appendingPathComponent("out")
        let allowed = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "64", "--format", "jxl", "--out", out.path,
                                          "--set", "vips.allowUntrusted=true", photo])
        let file = try #require(allowed.lines.first?["output"] as? String, "\(allowed.stdout) \(allowed.stderr)")
        let written = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(file.hasSuffix(".jxl") && ImageFormat.sniff(written) == .jxl)
        let refused = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "64", "--format", "jxl", "--out", out.path, photo])
        #expect(refused.status != 0 && (refused.stdout + refused.stderr).contains("vips.allowUntrusted"), "\(refused.stdout) \(refused.stderr)")

        let svg = tool.home.appendingPathComponent("a.svg")
        try Data("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"200\"><rect width=\"400\" height=\"200\" fill=\"red\"/></svg>".utf8).write(to: svg)
        let drawn = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "100", "--format", "png", "--out", out.path, "--set", "vips.svg=true", svg.path])
        #expect(drawn.status == 0 && drawn.lines.first?["pixelWidth"] as? Int == 100 && drawn.lines.first?["pixelHeight"] as? Int == 50, "\(drawn.stdout) \(drawn.stderr)")
        let notDrawn = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "100", svg.path])
        let error = notDrawn.lines.first?["error"] as? [String: Any]
        #expect(notDrawn.status == 1 && error?["code"] as? String == "unsupportedFormat" && (error?["message"] as? String)?.contains("vips.svg") == true, "\(notDrawn.stdout)")

        let pdf = tool.home.appendingPathComponent("a.pdf"), bomb = tool.home.appendingPathComponent("bomb.pdf")
        try PDFFixtures.pages(2).write(to: pdf)
        try PDFFixtures.nestedForms().write(to: bomb)
        let page = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "60", "--format", "png", "--out", out.path, "--set", "vips.pdf=true", pdf.path])
        #expect(page.status == 0 && page.lines.first?["pixelWidth"] as? Int == 60 && page.lines.first?["pixelHeight"] as? Int == 40, "\(page.stdout) \(page.stderr)")
        let pdfRefused = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "60", pdf.path])
        #expect(pdfRefused.status == 1 && (pdfRefused.stdout).contains("vips.pdf"), "\(pdfRefused.stdout)")
        // The bomb is stopped at the time limit, and the batch goes on to the next file.
        let both = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "60", "--set", "vips.pdf=true", "--set", "vips.pdfTimeLimit=1s", bomb.path, pdf.path])
        // (Files are loaded side by side: lines come in the order they finish.)
        let bombLine = both.lines.first { $0["input"] as? String == bomb.path }, pageLine = both.lines.first { $0["input"] as? String == pdf.path }
        let bombError = bombLine?["error"] as? [String: Any]
        #expect(bombError?["code"] as? String == "workTimedOut" && (bombError?["message"] as? String)?.contains("vips.pdfTimeLimit") == true, "\(both.stdout)")
        #expect(pageLine?["pixelWidth"] as? Int == 60, "\(both.stdout)")
    }
}
