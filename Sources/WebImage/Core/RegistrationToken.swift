/// A token returned by every registration; pass it back to unregister.
public struct RegistrationToken: Hashable, Sendable {
    let id: UInt64
}
