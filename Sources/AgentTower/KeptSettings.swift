public import AudioPolicy

/// What the user set on the agent that outlives it (a restart, a crash, an update): the microphone's
/// mute for every app, silent mode, and the route choices per set of devices. Kept by the shell in the
/// state directory; the tower says when it changes (`TowerEffect.keep`) and is given it back at the
/// start (`TowerInput.kept`).
public struct KeptSettings: Hashable, Sendable {
    /// The microphone muted for every app (`InputMuted` on the agent's object).
    public var inputMuted = false
    /// Ambient sound silenced (`SilentMode`).
    public var silentMode = false
    /// The user's route choices per set of devices (SPEC.md section 10).
    public var routes = RememberedRoutes()

    public init(inputMuted: Bool = false, silentMode: Bool = false, routes: RememberedRoutes = RememberedRoutes()) {
        self.inputMuted = inputMuted; self.silentMode = silentMode; self.routes = routes
    }
}
