import Foundation

/// A tmpfs of a few kilobytes, to make the disk full or read-only for real (needs root, as the tests
/// run in CI: a machine where it cannot be mounted fails the test, it does not skip it).
public struct TinyDisk: Sendable {
    public let path: String

    /// (Mode 0700, as a state directory must be: a tmpfs is world-writable, 1777, unless told.)
    public init(at path: String, size: String = "16k") throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try Self.run("mount", "-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path)
        self.path = path
    }

    /// Takes every free block (dd stops with "no space left", which is the point).
    public func fill() {
        try? Self.run("dd", "if=/dev/zero", "of=\(path)/filler", "bs=1k", "count=1024")
    }

    public func empty() throws { try FileManager.default.removeItem(atPath: "\(path)/filler") }

    public func readOnly() throws { try Self.run("mount", "-o", "remount,ro", path) }

    /// Unmounts it, and returns once it is gone (lazily, should something still hold a file there).
    public func unmount() { try? Self.run("umount", "-l", path) }

    static func run(_ arguments: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TinyDiskError(words: "\(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): mounting a tmpfs needs root")
        }
    }
}

public struct TinyDiskError: Error, CustomStringConvertible {
    public var words: String
    public var description: String { words }
}
