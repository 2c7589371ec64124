/// The cache tiers of the pipeline.
public struct CacheTiers: OptionSet, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let memory = CacheTiers(rawValue: 1)
    public static let disk = CacheTiers(rawValue: 2)
    public static let all: CacheTiers = [.memory, .disk]
    public static let none: CacheTiers = []
}
