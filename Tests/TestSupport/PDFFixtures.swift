package import Foundation

/// PDFs written object by object, with a cross-reference table of their offsets.
package enum PDFFixtures {
    /// `pages` pages of `width` x `height` points, each a blue square in its middle.
    /// `entries` are added to each page's dictionary (`/Rotate 90`, `/CropBox [...]`).
    package static func pages(_ pages: Int, width: Int = 300, height: Int = 200, entries: String = "") -> Data {
        var objects: [String] = []
        let kids = (0..<pages).map { "\(3 + 2 * $0) 0 R" }.joined(separator: " ")
        objects.append("<< /Type /Catalog /Pages 2 0 R >>")
        objects.append("<< /Type /Pages /Kids [\(kids)] /Count \(pages) >>")
        let content = "0 0 1 rg \(width / 4) \(height / 4) \(width / 2) \(height / 2) re f"
        for page in 0..<pages {
            objects.append("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 \(width) \(height)] \(entries) /Contents \(4 + 2 * page) 0 R >>")
            objects.append(stream(content))
        }
        return document(objects)
    }

    /// One page whose content draws a form XObject that draws the next one ten
    /// times, `depth` deep: a few kilobytes that poppler draws 10^depth times
    /// (at 9, minutes of one core), and cannot be stopped in the middle of.
    package static func nestedForms(depth: Int = 9) -> Data {
        var objects = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R /Resources << /XObject << /X 5 0 R >> >> >>",
            stream("/X Do"),
        ]
        let tenTimes = Array(repeating: "q 0.9 0 0 0.9 1 1 cm /X Do Q", count: 10).joined(separator: " ")
        for level in 0..<depth {
            objects.append(stream(tenTimes, dictionary: "/Type /XObject /Subtype /Form /BBox [0 0 200 200] /Resources << /XObject << /X \(6 + level) 0 R >> >>"))
        }
        objects.append(stream("0 0 1 rg 10 10 50 50 re f", dictionary: "/Type /XObject /Subtype /Form /BBox [0 0 200 200]"))
        return document(objects)
    }

    static func stream(_ content: String, dictionary: String = "") -> String {
        "<< \(dictionary) /Length \(content.utf8.count) >>\nstream\n\(content)\nendstream"
    }

    /// Numbered objects 1…n (the first the catalog), their offsets and the trailer.
    static func document(_ objects: [String]) -> Data {
        var text = "%PDF-1.4\n"
        var offsets: [Int] = []
        for (index, object) in objects.enumerated() {
            offsets.append(text.utf8.count)
            text += "\(index + 1) 0 obj\n\(object)\nendobj\n"
        }
        let xref = text.utf8.count
        text += "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
        for offset in offsets { text += String(repeating: "0", count: 10 - String(offset).count) + "\(offset) 00000 n \n" }
        text += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
        return Data(text.utf8)
    }
}
