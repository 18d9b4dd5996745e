/// What the user set on the agent that outlives it (a restart, a crash, an update): the microphone's
/// mute for every app and silent mode. Kept by the shell in the state directory; the tower says when it
/// changes (`TowerEffect.keep`) and is given it back at the start (`TowerInput.kept`).
public struct KeptSettings: Hashable, Sendable {
    /// The microphone muted for every app (`InputMuted` on the agent's object).
    public var inputMuted = false
    /// Ambient sound silenced (`SilentMode`).
    public var silentMode = false

    public init(inputMuted: Bool = false, silentMode: Bool = false) {
        self.inputMuted = inputMuted; self.silentMode = silentMode
    }
}
