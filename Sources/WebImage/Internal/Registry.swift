import Synchronization

/// The shared machinery of the three registries: entries under names, looked up
/// newest first, safe from any thread. Lookups copy the entries out of the lock so
/// that no user code (a coder's `canDecode`) ever runs while it is held.
final class Registry<Value: Sendable>: Sendable {
    struct Entry: Sendable {
        let token: RegistrationToken
        let names: [String]
        let value: Value
    }

    private struct State {
        var entries: [Entry] = []
        var nextID: UInt64 = 1
    }

    private let state = Lock(State())

    init() {}

    func register(_ value: Value, names: [String]) -> RegistrationToken {
        let lowered = names.map { $0.lowercased() }
        return state.withLock { state in
            let token = RegistrationToken(id: state.nextID)
            state.nextID += 1
            state.entries.append(Entry(token: token, names: lowered, value: value))
            return token
        }
    }

    @discardableResult
    func unregister(_ token: RegistrationToken) -> Bool {
        state.withLock { state in
            guard let index = state.entries.firstIndex(where: { $0.token == token }) else { return false }
            state.entries.remove(at: index)
            return true
        }
    }

    /// Every entry, newest first.
    var entries: [Entry] { state.withLock { $0.entries.reversed() } }

    /// The newest value registered under `name` (case-insensitive).
    func value(named name: String) -> Value? {
        let name = name.lowercased()
        return entries.first { $0.names.contains(name) }?.value
    }

    var names: [String] {
        var seen = Set<String>()
        return entries.flatMap(\.names).filter { seen.insert($0).inserted }
    }
}
