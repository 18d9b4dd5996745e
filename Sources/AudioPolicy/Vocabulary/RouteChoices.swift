/// What a user's route choice applies to (SPEC.md section 10): every session of a category, or one app's
/// (by the name `audiosessionctl status` shows for it: its policy file's name, else its program's).
public enum RouteScope: Hashable, Sendable, Comparable, CustomStringConvertible {
    case category(Category)
    case app(String)

    public var description: String {
        switch self {
        case .category(let c): "category \(c.rawValue)"
        case .app(let name): "app \(name)"
        }
    }

    /// `category:playback`, `app:rhythmbox`: how the bus and the state directory write it.
    public var word: String {
        switch self {
        case .category(let c): "category:\(c.rawValue)"
        case .app(let name): "app:\(name)"
        }
    }

    public init?(word: String) {
        if word.hasPrefix("category:") {
            guard let c = Category.allCases.first(where: { $0.rawValue == word.dropFirst("category:".count) }) else { return nil }
            self = .category(c)
        } else if word.hasPrefix("app:"), word.count > 4, word.utf8.count <= 4 + Self.nameLimit {
            self = .app(String(word.dropFirst(4)))
        } else {
            return nil
        }
    }

    public static func < (a: RouteScope, b: RouteScope) -> Bool { a.word < b.word }

    /// The longest app name a choice is kept for, in bytes.
    public static let nameLimit = 256
}

/// The user's route choices with one set of devices connected: the default output and input picked (in
/// a mixer, or `audiosessionctl route DEVICE`) and the outputs chosen per category or app.
public struct RouteChoices: Hashable, Sendable {
    /// The most choices per category or app kept with one set of devices.
    public static let scopedLimit = 64

    public var output: String?
    public var input: String?
    public var scoped: [RouteScope: String]

    public init(output: String? = nil, input: String? = nil, scoped: [RouteScope: String] = [:]) {
        self.output = output; self.input = input; self.scoped = scoped
    }

    public var isEmpty: Bool { output == nil && input == nil && scoped.isEmpty }
}

/// The devices connected at one moment, as the user's choices are remembered against them: the outputs'
/// and inputs' uids (a Bluetooth device by its card, which stays while its profile and ports change),
/// sorted.
public struct DeviceSet: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let members: [String]

    public init(_ members: some Sequence<String>) { self.members = Set(members).sorted() }

    public var description: String { members.joined(separator: ", ") }

    public static func < (a: DeviceSet, b: DeviceSet) -> Bool { a.members.lexicographicallyPrecedes(b.members) }
}

/// The sets of devices seen, each with the user's route choices (none, for a set the user chose nothing
/// with), the most recently used last; at most `limit` sets (the least recently used goes first).
public struct RememberedRoutes: Hashable, Sendable {
    public static let limit = 32

    public private(set) var sets: [(set: DeviceSet, choices: RouteChoices)] = []

    public init() {}

    public init(_ entries: [(DeviceSet, RouteChoices)]) {
        for (set, choices) in entries { remember(choices, for: set) }
    }

    public subscript(set: DeviceSet) -> RouteChoices? { sets.first { $0.set == set }?.choices }

    /// Keeps these choices for the set (none: the set is seen), as the most recent.
    public mutating func remember(_ choices: RouteChoices, for set: DeviceSet) {
        sets.removeAll { $0.set == set }
        sets.append((set, choices))
        if sets.count > Self.limit { sets.removeFirst(sets.count - Self.limit) }
    }

    /// The set was seen again: the most recent now.
    public mutating func touch(_ set: DeviceSet) {
        guard let i = sets.firstIndex(where: { $0.set == set }), i != sets.count - 1 else { return }
        sets.append(sets.remove(at: i))
    }

    public static func == (a: RememberedRoutes, b: RememberedRoutes) -> Bool {
        a.sets.count == b.sets.count && zip(a.sets, b.sets).allSatisfy { $0.set == $1.set && $0.choices == $1.choices }
    }

    public func hash(into hasher: inout Hasher) {
        for entry in sets { hasher.combine(entry.set); hasher.combine(entry.choices) }
    }
}
