/// Which part of an image a fill (cover-and-crop) keeps.
public enum CropFocus: String, Sendable, Hashable, CaseIterable {
    /// The centre (the default).
    case centre
    /// libvips' attention strategy: skin tones, saturated colour and edges
    /// (faces and subjects, as thumbor's and imgproxy's smart crops find them).
    case attention
    /// The part with the most entropy (detail).
    case entropy
}
