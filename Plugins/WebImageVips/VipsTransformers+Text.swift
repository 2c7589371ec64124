internal import CVips
internal import CVipsOps
import Foundation
public import WebImage

extension ImageTransformers {
    /// Draws a line of text over every frame (`t=text:WORDS…`): in `font` at
    /// `size` pixels, in `colour` with its alpha times `opacity`, at `gravity`,
    /// `margin` pixels in from the edges it touches, scaled down to fit inside
    /// them when it is wider. Drawn by libvips' `text` (Pango) from the words as
    /// plain text: markup characters are escaped, never interpreted.
    ///
    /// ```swift
    /// let mark = try ImageTransformers.TextWatermark("© Example", size: 24, colour: .white)
    /// ```
    ///
    /// Bounded before anything is drawn: at most ``maxCharacters`` characters
    /// (``maxScalars`` Unicode scalars, ``maxScalarsPerCharacter`` in one, so that
    /// stacked combining marks stay short), one line (control characters refuse
    /// the text), a size of ``sizes`` pixels; and what Pango drew at most
    /// ``maxDrawnPixels`` pixels.
    public struct TextWatermark: ImageTransformer {
        public let text: String
        public var size: Int
        public var colour: RGBColor
        public var opacity: Double
        public var gravity: Gravity
        public var margin: Int
        /// A Pango font family (`DejaVu Sans`). A service takes it from a
        /// configured set (`thumbnail.fonts`), never from the request.
        public var font: String

        /// The most characters (grapheme clusters) a text may have.
        public static let maxCharacters = 100
        /// The most Unicode scalars a text may have.
        public static let maxScalars = 256
        /// The most Unicode scalars one character may have (a family emoji has 7):
        /// combining marks stack upwards, and Pango's drawing is as tall as the
        /// tallest stack across the whole line, so this bounds what it allocates
        /// before anything is drawn (about 100 × 256 by 5 × 256 pixels at worst).
        public static let maxScalarsPerCharacter = 8
        /// The sizes allowed, in pixels.
        public static let sizes = 4...256
        /// The most pixels the drawn text may have before it is scaled to fit.
        public static let maxDrawnPixels = 16_000_000
        /// The family used when none is named: DejaVu Sans, which fontconfig
        /// (and so libvips) depends on in Debian.
        public static let defaultFont = "DejaVu Sans"

        /// The generic families fontconfig maps to an installed one, which
        /// ``isInstalled(_:)`` takes as they are.
        static let genericFamilies: Set<String> = ["sans", "sans-serif", "serif", "monospace", "mono", "cursive", "fantasy", "system-ui", "emoji", "math"]

        /// Whether fontconfig has the family `name` (any case), or it is a generic
        /// family (`sans`, `serif`, `monospace` …); false when it would draw
        /// another family in its place, as Pango then does without a word; nil
        /// when fontconfig cannot be asked. A service checks its
        /// `thumbnail.fonts` with it at start-up.
        public static func isInstalled(_ name: String) -> Bool? {
            if genericFamilies.contains(name.lowercased()) { return true }
            return switch CVips_font_family_installed(name) {
            case 1: true
            case 0: false
            default: nil
            }
        }

        /// - Throws: `WebImageError` `invalidArgument` for an
        ///   empty or too long text, a control character, or a size, opacity or
        ///   margin out of range.
        /// A scalar that puts ink on the image by itself: a letter, number,
        /// punctuation mark or symbol (not a space, a format character, a
        /// combining mark, a private-use or unassigned code point).
        static func draws(_ scalar: Unicode.Scalar) -> Bool {
            // Letters and symbols that are blank by design: the Hangul fillers
            // (default ignorable) and the blank Braille pattern.
            if scalar.properties.isDefaultIgnorableCodePoint || scalar.properties.isWhitespace || scalar.value == 0x2800 { return false }
            return switch scalar.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
                 .decimalNumber, .letterNumber, .otherNumber,
                 .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation, .initialPunctuation, .finalPunctuation, .otherPunctuation,
                 .mathSymbol, .currencySymbol, .modifierSymbol, .otherSymbol:
                true
            default:
                false
            }
        }

        public init(_ text: String, size: Int = 24, colour: RGBColor = .white, opacity: Double = 0.7, gravity: Gravity = .southEast,
                    margin: Int = 10, font: String = TextWatermark.defaultFont) throws {
            guard !text.isEmpty, text.count <= Self.maxCharacters, text.unicodeScalars.count <= Self.maxScalars else {
                throw WebImageError(.invalidArgument, "a text watermark has 1 to \(Self.maxCharacters) characters (and at most \(Self.maxScalars) Unicode scalars), not \(text.count)")
            }
            guard text.allSatisfy({ $0.unicodeScalars.count <= Self.maxScalarsPerCharacter }) else {
                throw WebImageError(.invalidArgument, "a text watermark's characters have at most \(Self.maxScalarsPerCharacter) Unicode scalars each (combining marks stack)")
            }
            guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw WebImageError(.invalidArgument, "a text watermark is one line: no control characters (newlines, tabs)")
            }
            guard text.unicodeScalars.contains(where: Self.draws) else {
                throw WebImageError(.invalidArgument, "a text watermark needs a letter, digit, punctuation mark or symbol: spaces, format characters (U+200B, U+202E, U+FEFF, tags) and combining marks alone draw nothing")
            }
            guard Self.sizes.contains(size) else { throw WebImageError(.invalidArgument, "a text size from \(Self.sizes.lowerBound) to \(Self.sizes.upperBound) pixels, not \(size)") }
            guard (0...1).contains(opacity) else { throw WebImageError(.invalidArgument, "text opacity must be 0 to 1, not \(opacity)") }
            guard (0...10_000).contains(margin) else { throw WebImageError(.invalidArgument, "text margin must be 0 to 10000, not \(margin)") }
            guard !font.isEmpty, !font.contains(where: { $0.isNewline || $0 == "," }) else { throw WebImageError(.invalidArgument, "a font family name, not '\(font)'") }
            self.text = text
            self.size = size
            self.colour = colour
            self.opacity = opacity
            self.gravity = gravity
            self.margin = margin
            self.font = font
        }

        /// The text enters the key as a hash (`XXH64` of its UTF-8), so keys stay short.
        public var key: String {
            "text(\(String(XXH64.hash(Data(text.utf8)), radix: 16)),\(size),\(colour),\(opacity),\(gravity.shortName),\(margin),\(font))"
        }

        /// The text with Pango's markup characters escaped.
        static func markup(_ text: String) -> String { SVGSanitizer.escape(text, quote: true, apostrophe: true) }

        public func transform(_ image: Image) throws -> Image {
            try Vips.ensureInitialized()
            let description = "\(font) \(size)px"
            // What libvips finds nothing to draw in (a blank the check above does
            // not know) is the request's mistake, as the check's own refusals are.
            let mark: VipsHandle
            do {
                mark = try Vips.make(.transformFailed, "vips_text") { out in
                    CVips_text_overlay(out, Self.markup(text), description, Double(colour.red), Double(colour.green), Double(colour.blue))
                }
            } catch let error as WebImageError where error.message.contains("no text to render") {
                throw WebImageError(.invalidArgument, "a text watermark needs something to draw: the font draws nothing for these characters")
            }
            guard mark.width * mark.height <= Self.maxDrawnPixels else {
                throw WebImageError(.stepDoesNotFit, "text watermark: Pango drew \(mark.width)x\(mark.height) pixels, more than the \(Self.maxDrawnPixels) allowed")
            }
            return try Watermark.composite(image, mark: mark, gravity: gravity, opacity: opacity, margin: margin, what: "text")
        }
    }
}
