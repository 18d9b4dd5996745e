/// An error in a policy file, with where it is: `file:line:column: message`. An error about a policy
/// directory as a whole (one that cannot be read) has no line: `directory: message`, line and column 0.
public struct PolicyFileError: Error, Hashable, Sendable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public var message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file; self.line = line; self.column = column; self.message = message
    }

    /// An error about a whole directory of policy files.
    public init(directory: String, message: String) {
        self.init(file: directory, line: 0, column: 0, message: message)
    }

    /// Whether the error is about a whole directory (it could not be read), not one file.
    public var isAboutDirectory: Bool { line == 0 }

    public var description: String { isAboutDirectory ? "\(file): \(message)" : "\(file):\(line):\(column): \(message)" }
}
