/// An EXIF orientation: how the stored pixels must be turned to look upright.
///
/// Raw values are the EXIF tag's values 1...8.
public enum ImageOrientation: Int, Sendable, Hashable, Codable, CaseIterable {
    /// Stored upright (EXIF 1, and what a missing tag means).
    case up = 1
    case upMirrored = 2
    case down = 3
    case downMirrored = 4
    case leftMirrored = 5
    case right = 6
    case rightMirrored = 7
    case left = 8

    /// Whether showing the image upright swaps its width and height.
    public var swapsDimensions: Bool { rawValue >= 5 }

    /// The orientation for an EXIF value; values outside 1...8 (0 included) mean `.up`.
    public init(exif value: Int) { self = ImageOrientation(rawValue: value) ?? .up }
}
