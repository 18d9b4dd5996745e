/// The words of `org.audiosession` that carry the core's values (SPEC.md section 9): a session's
/// category, mode and options as an app sends them, and where a session's object lives. Here, beside the
/// values they name, so that the agent's tower reads them without the bus module (`Wire` in
/// AudioSessionWire speaks D-Bus around them). What the library sends and what the agent reads back.
public enum SessionWords {
    /// A session's object: this, then its number (`/org/audiosession/Session1`).
    public static let sessionPathPrefix = "/org/audiosession/Session"

    static let notifyOthersOnDeactivation = "notifyOthersOnDeactivation"

    /// A word an app sent that the vocabulary does not have (the agent says which, and what is accepted).
    public enum UnknownWord: Error, Hashable, Sendable {
        case category(String)
        case mode(String)
        case option(String)
        case setActiveOption(String)
    }

    /// The configuration SetCategory's words say (an empty mode is `default`).
    public static func configuration(category: String, mode: String, options: [String]) -> Result<SessionConfiguration, UnknownWord> {
        guard Category.allCases.contains(Category(rawValue: category)) else { return .failure(.category(category)) }
        let modeName = mode.isEmpty ? "default" : mode
        guard Mode.allCases.contains(Mode(rawValue: modeName)) else { return .failure(.mode(mode)) }
        var set: CategoryOptions = []
        for name in options {
            guard let option = CategoryOptions(name: name) else { return .failure(.option(name)) }
            set.insert(option)
        }
        return .success(SessionConfiguration(Category(rawValue: category), mode: Mode(rawValue: modeName), options: set))
    }

    /// SetActive's options' names (`as`).
    public static func setActiveOptionNames(_ options: SetActiveOptions) -> [String] {
        options.contains(.notifyOthersOnDeactivation) ? [notifyOthersOnDeactivation] : []
    }

    /// The options SetActive's names say.
    public static func setActiveOptions(_ names: [String]) -> Result<SetActiveOptions, UnknownWord> {
        var set: SetActiveOptions = []
        for name in names {
            guard name == notifyOthersOnDeactivation else { return .failure(.setActiveOption(name)) }
            set.insert(.notifyOthersOnDeactivation)
        }
        return .success(set)
    }
}
