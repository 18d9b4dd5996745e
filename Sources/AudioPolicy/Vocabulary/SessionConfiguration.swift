/// A category with its mode and options, checked against SPEC.md sections 3 and 4.
public struct SessionConfiguration: Hashable, Sendable, Codable, CustomStringConvertible {
    public var category: Category
    public var mode: Mode
    /// The options as given.
    public var options: CategoryOptions

    public init(_ category: Category, mode: Mode = .default, options: CategoryOptions = []) {
        self.category = category; self.mode = mode; self.options = options
    }

    /// The options in force: as given, plus what they and the mode imply (duckOthers and
    /// interruptSpokenAudioAndMixWithOthers imply mixWithOthers; voiceChat implies allowBluetooth;
    /// videoChat and gameChat imply allowBluetooth and defaultToSpeaker).
    public var effectiveOptions: CategoryOptions {
        var o = options
        if o.contains(.duckOthers) || o.contains(.interruptSpokenAudioAndMixWithOthers) { o.insert(.mixWithOthers) }
        if mode == .voiceChat { o.insert(.allowBluetooth) }
        if mode == .videoChat || mode == .gameChat { o.formUnion([.allowBluetooth, .defaultToSpeaker]) }
        return o
    }

    /// Mixable sessions neither interrupt others nor are interrupted by non-mixable ones (SPEC.md 2).
    public var isMixable: Bool { category == .ambient || effectiveOptions.contains(.mixWithOthers) }

    /// A call: playAndRecord in voiceChat, videoChat or gameChat (SPEC.md 5.1).
    public var isCall: Bool { category == .playAndRecord && mode.isCallMode }

    /// Throws `incompatibleCategory` naming the offending mode or option and the accepted categories.
    public func validate() throws(SessionError) {
        if let accepted = mode.acceptedCategories, !accepted.contains(category) {
            throw SessionError(.incompatibleCategory, "mode \(mode) is not accepted by category \(category) "
                + "(accepted by: \(accepted.isEmpty ? "none" : accepted.map(\.rawValue).joined(separator: ", ")))")
        }
        for (name, option) in CategoryOptions.named where options.isSuperset(of: option) {
            // interruptSpokenAudioAndMixWithOthers includes the mixWithOthers bit: judge that bit once.
            if option == .mixWithOthers && options.contains(.interruptSpokenAudioAndMixWithOthers)
                && !CategoryOptions.acceptedCategories(of: .mixWithOthers).contains(category) { continue }
            let accepted = CategoryOptions.acceptedCategories(of: option)
            if !accepted.contains(category) {
                let note = category == .ambient && option == .mixWithOthers ? "; ambient always mixes" : ""
                throw SessionError(.incompatibleCategory, "option \(name) is not accepted by category \(category) "
                    + "(accepted by: \(accepted.map(\.rawValue).joined(separator: ", "))\(note))")
            }
        }
        let known = CategoryOptions.named.reduce(CategoryOptions()) { $0.union($1.option) }
        if !known.isSuperset(of: options) {
            throw SessionError(.badParam, "unknown option bits 0x\(String(options.subtracting(known).rawValue, radix: 16))")
        }
    }

    public var description: String {
        "\(category)" + (mode == .default ? "" : "/\(mode)") + (options.isEmpty ? "" : " \(options)")
    }
}
