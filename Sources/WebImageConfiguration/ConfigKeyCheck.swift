import WebImage

/// Refuses configuration keys that nothing reads, so that a typo or a key from a
/// newer version (`store.shared.kind`) stops start-up instead of being ignored.
///
/// ```swift
/// let known = PluginCatalog.standard.knownKeys.union(["http.port"])
/// try ConfigKeyCheck(known: known).check(["store.kind", "store.maxSise"], source: "--set")
/// // invalidArgument: unknown configuration key 'store.maxSise' (--set); did you mean 'store.maxSize'?
/// ```
public struct ConfigKeyCheck: Sendable {
    /// Every key something reads.
    public let known: Set<String>
    /// The first components of the known keys (`store`, `loader`, …): keys under
    /// these are the package's; a shared file's other keys are left alone.
    public let namespaces: Set<String>
    /// Keys whose last component is a name the user chooses: `thumbnail.presets`
    /// accepts `thumbnail.presets.avatar` and any other `thumbnail.presets.NAME`.
    public let families: Set<String>

    public init(known: Set<String>, families: Set<String> = []) {
        self.known = known
        self.families = families
        namespaces = Set(known.union(families).map { String($0.split(separator: ".").first ?? Substring($0)) })
    }

    /// Whether something reads `key`: a known key, or a name in a family.
    public func isKnown(_ key: String) -> Bool {
        if known.contains(key) { return true }
        guard let dot = key.lastIndex(of: "."), key.index(after: dot) < key.endIndex else { return false }
        return families.contains(String(key[..<dot]))
    }

    /// Throws for the first key that nothing reads.
    /// - Parameters:
    ///   - keys: dotted keys (`store.kind`).
    ///   - source: where they came from, for the message (`--set`, a file's path).
    ///   - onlyNamespaces: check only keys under ``namespaces`` (a file other
    ///     programs read too); otherwise every key is the package's.
    public func check(_ keys: some Sequence<String>, source: String, onlyNamespaces: Bool = false) throws {
        for key in keys where !isKnown(key) {
            if onlyNamespaces, let first = key.split(separator: ".").first, !namespaces.contains(String(first)) { continue }
            throw error(for: key, source: source)
        }
    }

    /// Throws for the first `PREFIX_*` environment variable that names no known key.
    public func checkEnvironment(_ environment: [String: String], prefix: String = "webimage") throws {
        let head = Self.environmentName(for: prefix) + "_"
        // Most processes set none: the known keys' names (Unicode case tests
        // over every key) are worked out only when there is one to check.
        guard environment.keys.contains(where: { $0.hasPrefix(head) }) else { return }
        let byName = Dictionary(known.map { (Self.environmentName(for: "\(prefix).\($0)"), $0) }, uniquingKeysWith: { a, _ in a })
        let familyHeads = families.map { Self.environmentName(for: "\(prefix).\($0)") + "_" }
        for name in environment.keys.sorted() where name.hasPrefix(head) && byName[name] == nil {
            if familyHeads.contains(where: { name.hasPrefix($0) && name.count > $0.count }) { continue }
            let guess = Self.nearest(String(name.dropFirst(head.count)), in: Set(byName.keys.map { String($0.dropFirst(head.count)) }))
            var message = "unknown configuration variable \(name): no setting reads it"
            if let guess { message += "; did you mean \(head)\(guess) (\(byName[head + guess]!))?" }
            throw WebImageError(.invalidArgument, message)
        }
    }

    func error(for key: String, source: String) -> WebImageError {
        var message = "unknown configuration key '\(key)' (\(source)): no setting reads it"
        if let guess = Self.nearest(key, in: known) { message += "; did you mean '\(guess)'?" }
        return WebImageError(.invalidArgument, message)
    }

    /// The environment variable of a key, as swift-configuration spells it:
    /// camelCase split at each lower-to-upper step, upper case, `_` between parts.
    @_spi(Internals) public static func environmentName(for key: String) -> String {
        key.split(separator: ".").map { component -> String in
            var out = ""
            var previous: Character?
            for character in component {
                if let previous, previous.isLowercase, character.isUppercase { out.append("_") }
                // uppercased() is a String: "ß" becomes "SS" (found by fuzzing: a Character trapped).
                out += character.isLetter || character.isNumber ? character.uppercased() : "_"
                previous = character
            }
            return out
        }.joined(separator: "_")
    }

    /// The known key closest to `key` by edit distance, if it is close enough to be a typo
    /// (or shares the key's last component, as `store.shared.kind` does `store.kind`).
    package static func nearest(_ key: String, in known: Set<String>) -> String? {
        let last = key.split(separator: ".").last.map(String.init)
        let ranked = known.map { ($0, distance(key.lowercased(), $0.lowercased())) }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }
        guard let best = ranked.first else { return nil }
        if best.1 <= max(2, key.count / 3) { return best.0 }
        return ranked.first { $0.0.split(separator: ".").last.map(String.init) == last }?.0
    }

    /// Levenshtein distance.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var previous = row[0]
            row[0] = i
            for j in 1...b.count {
                let current = row[j]
                row[j] = a[i - 1] == b[j - 1] ? previous : 1 + min(previous, row[j], row[j - 1])
                previous = current
            }
        }
        return row[b.count]
    }
}
