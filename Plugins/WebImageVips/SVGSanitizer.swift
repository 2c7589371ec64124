public import Foundation
import WebImage

/// Internal to the package (SPI `Internals`, for its tests and fuzzers).
///
/// An SVG rewritten so that librsvg gets nothing to fetch and nothing to
/// expand, before it sees the file (`vips.svg`, docs/coder.md):
/// - a document type declaration (`<!DOCTYPE`, and with it every `<!ENTITY`:
///   external entities, "billion laughs") refuses the file;
/// - `script`, `foreignObject` and `filter` elements go, with what is in them,
///   and so do event attributes (`onload`, …) and `filter` attributes and
///   styles (a blur of radius 1000 drew for minutes); more than ``maxElements``
///   elements refuse the file;
/// - an `href` (or `xlink:href`, `src`) that is not a fragment (`#id`) or a
///   `data:` raster image (PNG, JPEG, GIF, WebP) goes; so does any attribute, and
///   any `style` element, with a `url(…)` that is not a fragment, or an `@import`;
/// - entity references other than XML's five and character references go;
///   comments and processing instructions (but the XML declaration) go.
///
/// It is a tokenizer of its own, not an XML library's parser, so that no DTD
/// machinery runs at all. Markup it cannot follow (an unclosed tag, a stray
/// `<`) refuses the file with `decodeFailed`.
@_spi(Internals) public enum SVGSanitizer {
    /// The cleaned document, or a `decodeFailed` error saying what was refused.
    public static func clean(_ data: Data) throws -> Data {
        var input = [UInt8](data)
        // UTF-8 only (with or without its BOM): what librsvg reads by default, and what this scans.
        if input.starts(with: [0xEF, 0xBB, 0xBF]) { input.removeFirst(3) }
        guard String(validating: input, as: UTF8.self) != nil else {
            throw refused("it is not UTF-8")
        }
        var scanner = Scanner(bytes: input)
        return Data(try scanner.run())
    }

    static func refused(_ why: String) -> WebImageError {
        WebImageError(.decodeFailed, "SVG refused before rendering: \(why)")
    }

    /// Elements dropped with everything inside them. Filters are dropped too:
    /// a few hundred bytes of blur or morphology radius kept librsvg drawing for
    /// minutes, past any deadline (it cannot be stopped mid-page).
    static let droppedElements: Set<String> = ["script", "foreignobject", "handler", "listener", "filter"]
    /// Attributes dropped wherever they are (`on…` handlers are matched apart).
    static let droppedAttributes: Set<String> = ["filter"]
    /// The most elements a document may have: each is drawn, so this bounds the work.
    public static let maxElements = 10_000
    /// Attributes whose value names a resource.
    static let linkAttributes: Set<String> = ["href", "xlink:href", "src"]
    /// `data:` images librsvg may embed.
    static let dataImages = ["data:image/png", "data:image/jpeg", "data:image/jpg", "data:image/gif", "data:image/webp"]

    /// Whether a link stays in the document: a fragment or an embedded raster image.
    static func allowsLink(_ value: String) -> Bool {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        return trimmed.hasPrefix("#") || dataImages.contains { trimmed.hasPrefix($0 + ";") || trimmed.hasPrefix($0 + ",") }
    }

    /// Whether CSS (an attribute value or a `style` element) reaches outside the
    /// document: `@import`, or `url(` of anything but a fragment.
    static func reachesOut(_ text: String) -> Bool {
        let lower = text.lowercased()
        if lower.contains("@import") { return true }
        var rest = lower[...]
        while let range = rest.range(of: "url(") {
            let after = rest[range.upperBound...].drop { $0 == " " || $0 == "\"" || $0 == "'" || $0 == "\t" || $0 == "\n" }
            if !after.hasPrefix("#") { return true }
            rest = rest[range.upperBound...]
        }
        return false
    }

    struct Scanner {
        let bytes: [UInt8]
        var i = 0
        var out: [UInt8] = []
        /// Open elements, and how deep inside a dropped one the scan is (0: not).
        var open: [String] = []
        var droppedDepth = 0
        var elements = 0
        /// Inside a `style` element whose text is being gathered.
        var styleText: [UInt8]?

        init(bytes: [UInt8]) {
            self.bytes = bytes
            out.reserveCapacity(bytes.count)
        }

        func starts(with text: String, at index: Int) -> Bool {
            let pattern = Array(text.utf8)
            guard index + pattern.count <= bytes.count else { return false }
            for k in 0..<pattern.count {
                var b = bytes[index + k]
                if b >= 0x41 && b <= 0x5A { b += 0x20 }  // ASCII case-insensitive
                var p = pattern[k]
                if p >= 0x41 && p <= 0x5A { p += 0x20 }
                if b != p { return false }
            }
            return true
        }

        func find(_ text: String, from index: Int) -> Int? {
            var k = index
            while k < bytes.count {
                if starts(with: text, at: k) { return k }
                k += 1
            }
            return nil
        }

        mutating func emit(_ text: String) { if droppedDepth == 0 { out.append(contentsOf: Array(text.utf8)) } }
        mutating func emitText(_ slice: ArraySlice<UInt8>) {
            guard droppedDepth == 0 else { return }
            let text = SVGSanitizer.keepingKnownReferences(String(decoding: slice, as: UTF8.self))
            if styleText != nil { styleText!.append(contentsOf: Array(text.utf8)) } else { out.append(contentsOf: Array(text.utf8)) }
        }

        mutating func run() throws -> [UInt8] {
            while i < bytes.count {
                guard bytes[i] == UInt8(ascii: "<") else {
                    let end = bytes[i...].firstIndex(of: UInt8(ascii: "<")) ?? bytes.count
                    emitText(bytes[i..<end])
                    i = end
                    continue
                }
                if starts(with: "<!--", at: i) {
                    guard let end = find("-->", from: i + 4) else { throw SVGSanitizer.refused("a comment is never closed") }
                    i = end + 3
                } else if starts(with: "<![CDATA[", at: i) {
                    guard let end = find("]]>", from: i + 9) else { throw SVGSanitizer.refused("a CDATA section is never closed") }
                    // As text, escaped: the same characters, with no CDATA to parse.
                    let text = String(decoding: bytes[(i + 9)..<end], as: UTF8.self)
                    if droppedDepth == 0 {
                        let escaped = Array(SVGSanitizer.escape(text, quote: false).utf8)
                        if styleText != nil { styleText!.append(contentsOf: escaped) } else { out.append(contentsOf: escaped) }
                    }
                    i = end + 3
                } else if starts(with: "<!", at: i) {
                    // DOCTYPE, ENTITY, ELEMENT, ATTLIST: any declaration.
                    throw SVGSanitizer.refused("it has a document type declaration (<!DOCTYPE or <!ENTITY: entities are never expanded here)")
                } else if starts(with: "<?", at: i) {
                    guard let end = find("?>", from: i + 2) else { throw SVGSanitizer.refused("a processing instruction is never closed") }
                    if starts(with: "<?xml ", at: i), out.isEmpty {
                        emit("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
                    }
                    i = end + 2
                } else if starts(with: "</", at: i) {
                    try endTag()
                } else {
                    try startTag()
                }
            }
            guard open.isEmpty else { throw SVGSanitizer.refused("<\(open.last!)> is never closed") }
            return out
        }

        /// A name: letters, digits, `-`, `_`, `.`, `:`.
        mutating func name() -> String {
            let start = i
            while i < bytes.count {
                let b = bytes[i]
                let isName = (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39)
                    || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".") || b == UInt8(ascii: ":") || b >= 0x80
                guard isName else { break }
                i += 1
            }
            return String(decoding: bytes[start..<i], as: UTF8.self)
        }

        mutating func skipSpace() {
            while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 }
        }

        mutating func startTag() throws {
            i += 1
            let element = name()
            guard !element.isEmpty else { throw SVGSanitizer.refused("a '<' that starts no tag") }
            var attributes: [(String, String)] = []
            var selfClosing = false
            while true {
                skipSpace()
                guard i < bytes.count else { throw SVGSanitizer.refused("<\(element)> is never closed") }
                if bytes[i] == UInt8(ascii: ">") { i += 1; break }
                if bytes[i] == UInt8(ascii: "/"), i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: ">") { i += 2; selfClosing = true; break }
                let attribute = name()
                guard !attribute.isEmpty else { throw SVGSanitizer.refused("<\(element)> has an attribute that does not parse") }
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "=") else { throw SVGSanitizer.refused("\(attribute) in <\(element)> has no value") }
                i += 1
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") || bytes[i] == UInt8(ascii: "'") else {
                    throw SVGSanitizer.refused("\(attribute) in <\(element)> has an unquoted value")
                }
                let quote = bytes[i]
                guard let end = bytes[(i + 1)...].firstIndex(of: quote) else { throw SVGSanitizer.refused("\(attribute) in <\(element)> is never closed") }
                let raw = String(decoding: bytes[(i + 1)..<end], as: UTF8.self)
                i = end + 1
                guard !raw.contains("<") else { throw SVGSanitizer.refused("\(attribute) in <\(element)> holds a '<'") }
                let value = SVGSanitizer.unescape(raw)
                let lower = attribute.lowercased()
                if lower.hasPrefix("on") || SVGSanitizer.droppedAttributes.contains(lower) { continue }
                if lower == "style", value.lowercased().contains("filter") { continue }
                if SVGSanitizer.linkAttributes.contains(lower), !SVGSanitizer.allowsLink(value) { continue }
                if SVGSanitizer.reachesOut(value) { continue }
                attributes.append((attribute, value))
            }
            let lower = element.lowercased()
            elements += 1
            guard elements <= SVGSanitizer.maxElements else { throw SVGSanitizer.refused("it has more than \(SVGSanitizer.maxElements) elements") }
            let dropped = droppedDepth > 0 || SVGSanitizer.droppedElements.contains(lower)
            if !selfClosing {
                open.append(element)
                if dropped { droppedDepth += 1 }
            }
            guard !dropped else { return }
            var tag = "<" + element
            for (attribute, value) in attributes { tag += " \(attribute)=\"\(SVGSanitizer.escape(value, quote: true))\"" }
            tag += selfClosing ? "/>" : ">"
            emit(tag)
            if lower == "style", !selfClosing { styleText = [] }
        }

        mutating func endTag() throws {
            i += 2
            let element = name()
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ">") else { throw SVGSanitizer.refused("</\(element) is never closed") }
            i += 1
            guard let last = open.last, last == element else { throw SVGSanitizer.refused("</\(element)> closes <\(open.last ?? "nothing")>") }
            open.removeLast()
            if droppedDepth > 0 {
                droppedDepth -= 1
                return
            }
            if element.lowercased() == "style", let text = styleText {
                styleText = nil
                let css = String(decoding: text, as: UTF8.self)
                if !SVGSanitizer.reachesOut(SVGSanitizer.unescape(css)) { out.append(contentsOf: text) }
            }
            emit("</\(element)>")
        }
    }

    /// XML's five predefined entities and character references, turned back into characters.
    static func unescape(_ text: String) -> String {
        guard text.contains("&") else { return text }
        // By Unicode scalar: a `;` followed by a combining mark is one `Character`.
        let scalars = text.unicodeScalars
        var result = String.UnicodeScalarView()
        var rest = scalars[...]
        while let amp = rest.firstIndex(of: "&") {
            result.append(contentsOf: rest[..<amp])
            guard let semicolon = rest[amp...].firstIndex(of: ";"), scalars.distance(from: amp, to: semicolon) <= 10 else {
                rest = rest[scalars.index(after: amp)...]
                continue
            }
            let name = String(String.UnicodeScalarView(rest[scalars.index(after: amp)..<semicolon]))
            switch name {
            case "amp": result.append("&")
            case "lt": result.append("<")
            case "gt": result.append(">")
            case "quot": result.append("\"")
            case "apos": result.append("'")
            default:
                if name.hasPrefix("#x") || name.hasPrefix("#X"), let code = UInt32(name.dropFirst(2), radix: 16), let scalar = Unicode.Scalar(code) {
                    result.append(scalar)
                } else if name.hasPrefix("#"), let code = UInt32(name.dropFirst()), let scalar = Unicode.Scalar(code) {
                    result.append(scalar)
                }
                // Any other entity: undefined without a DTD, dropped.
            }
            rest = rest[scalars.index(after: semicolon)...]
        }
        result.append(contentsOf: rest)
        return String(result)
    }

    /// Text with every reference resolved (others dropped), escaped again: the
    /// same text whatever it held (a bare `>` too), so that cleaning a clean
    /// document gives it back (the `svg` fuzz target found one that did not).
    static func keepingKnownReferences(_ text: String) -> String {
        escape(unescape(text), quote: false)
    }

    /// XML's special characters as references: `&`, `<`, `>`, and the quotes asked for.
    /// By Unicode scalar, not by `Character`: `<` followed by a combining mark
    /// (`&lt;&#841;`) is one grapheme, which a `Character` match did not see as
    /// `<`, so it left the text raw (the `svg` fuzz target found it).
    static func escape(_ text: String, quote: Bool, apostrophe: Bool = false) -> String {
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": result.append(contentsOf: "&amp;".unicodeScalars)
            case "<": result.append(contentsOf: "&lt;".unicodeScalars)
            case ">": result.append(contentsOf: "&gt;".unicodeScalars)
            case "\"" where quote: result.append(contentsOf: "&quot;".unicodeScalars)
            case "'" where apostrophe: result.append(contentsOf: "&apos;".unicodeScalars)
            default: result.append(scalar)
            }
        }
        return String(result)
    }
}
