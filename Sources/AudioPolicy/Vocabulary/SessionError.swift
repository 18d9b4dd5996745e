/// An error of the audio-session model, with AVAudioSession's codes (SPEC.md section 5).
public struct SessionError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: Int
        public let name: String
        public init(rawValue: Int) {
            self.rawValue = rawValue
            self.name = Code.all.first { $0.rawValue == rawValue }?.name ?? "code\(rawValue)"
        }
        init(_ name: String, _ rawValue: Int) { self.name = name; self.rawValue = rawValue }

        static func fourCC(_ s: String) -> Int { s.utf8.reduce(0) { $0 << 8 | Int($1) } }

        /// Activation would interrupt others and may not. Apple's '!int'.
        public static let cannotInterruptOthers = Code("cannotInterruptOthers", fourCC("!int"))
        /// A higher-priority session (a call) is active. Apple's '!pri'.
        public static let insufficientPriority = Code("insufficientPriority", fourCC("!pri"))
        /// The category does not accept the mode or an option. Apple's '!cat'.
        public static let incompatibleCategory = Code("incompatibleCategory", fourCC("!cat"))
        /// Deactivation with I/O still running. Apple's '!act'.
        public static let isBusy = Code("isBusy", fourCC("!act"))
        /// The sound server is gone. Apple's 'msrv'.
        public static let mediaServicesFailed = Code("mediaServicesFailed", fourCC("msrv"))
        /// The operation needs an active session. Apple's 'inac'.
        public static let sessionNotActive = Code("sessionNotActive", fourCC("inac"))
        /// No device can serve the category. Apple's '!res'.
        public static let resourceNotAvailable = Code("resourceNotAvailable", fourCC("!res"))
        /// Recording may not start (permission denied). Apple's '!rec'.
        public static let cannotStartRecording = Code("cannotStartRecording", fourCC("!rec"))
        /// Playing may not start. Apple's '!pla'.
        public static let cannotStartPlaying = Code("cannotStartPlaying", fourCC("!pla"))
        /// A bad argument. Apple's -50.
        public static let badParam = Code("badParam", -50)
        /// Anything else. Apple's 'what'.
        public static let unspecified = Code("unspecified", fourCC("what"))

        public static let all: [Code] = [
            .cannotInterruptOthers, .insufficientPriority, .incompatibleCategory, .isBusy, .mediaServicesFailed,
            .sessionNotActive, .resourceNotAvailable, .cannotStartRecording, .cannotStartPlaying, .badParam, .unspecified,
        ]

        public var description: String { name }

        public init(from decoder: any Decoder) throws { self.init(rawValue: try decoder.singleValueContainer().decode(Int.self)) }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(rawValue)
        }
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) { self.code = code; self.message = message }

    public var description: String { "\(code): \(message)" }
}
