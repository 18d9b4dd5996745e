import CSystemd
import Glibc

/// A D-Bus value, typed as on the wire.
public indirect enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case bool(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// A file descriptor sent with the message: only its number, which belongs to the message and is
    /// closed with it (dup it to keep it).
    case unixFD(Int32)
    case variant(DBusValue)
    /// `elementSignature` is kept so that an empty array can be sent back as it came.
    case array(elementSignature: String, [DBusValue])
    case dictionary(keySignature: String, valueSignature: String, [DBusValue: DBusValue])
    case structure([DBusValue])

    /// The value's D-Bus type signature.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .bool: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .variant: "v"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _): "a{" + key + value + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        }
    }

    // MARK: reading values out (nil when the value is of another type)

    public var string: String? {
        switch self {
        case .string(let s), .objectPath(let s), .signature(let s): s
        case .variant(let inner): inner.string
        default: nil
        }
    }

    public var bool: Bool? {
        switch self {
        case .bool(let b): b
        case .variant(let inner): inner.bool
        default: nil
        }
    }

    /// Any integer type that fits.
    public var integer: Int64? {
        switch self {
        case .byte(let v): Int64(v)
        case .int16(let v): Int64(v)
        case .uint16(let v): Int64(v)
        case .int32(let v): Int64(v)
        case .uint32(let v): Int64(v)
        case .int64(let v): v
        case .uint64(let v): Int64(exactly: v)
        case .variant(let inner): inner.integer
        default: nil
        }
    }

    public var double: Double? {
        switch self {
        case .double(let d): d
        case .variant(let inner): inner.double
        default: nil
        }
    }

    public var array: [DBusValue]? {
        switch self {
        case .array(_, let values): values
        case .variant(let inner): inner.array
        default: nil
        }
    }

    /// A dictionary with string keys (`a{sv}` and the like), its values as they are.
    public var stringDictionary: [String: DBusValue]? {
        switch self {
        case .dictionary(_, _, let entries):
            var result: [String: DBusValue] = [:]
            for (key, value) in entries { if let name = key.string { result[name] = value } }
            return result
        case .variant(let inner): return inner.stringDictionary
        default: return nil
        }
    }

    /// Looks through variants.
    public var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }
}

// MARK: messages

enum Wire {
    static func char(_ c: Unicode.Scalar) -> CChar { CChar(bitPattern: UInt8(c.value)) }

    static func check(_ r: Int32, _ what: @autoclosure () -> String) throws {
        if r < 0 { throw DBusError.badMessage("\(what()): \(String(cString: strerror(-r)))") }
    }

    /// Appends values to a message being built.
    static func append(_ values: [DBusValue], to m: OpaquePointer) throws {
        for value in values { try append(value, to: m) }
    }

    static func append(_ value: DBusValue, to m: OpaquePointer) throws {
        func basic<T: BitwiseCopyable>(_ type: Unicode.Scalar, _ v: T) throws {
            var v = v
            try check(sd_bus_message_append_basic(m, char(type), &v), "append \(value.signature)")
        }
        switch value {
        case .byte(let v): try basic("y", v)
        case .bool(let v): try basic("b", Int32(v ? 1 : 0))  // a D-Bus boolean is 4 bytes
        case .int16(let v): try basic("n", v)
        case .uint16(let v): try basic("q", v)
        case .int32(let v): try basic("i", v)
        case .uint32(let v): try basic("u", v)
        case .int64(let v): try basic("x", v)
        case .uint64(let v): try basic("t", v)
        case .double(let v): try basic("d", v)
        case .unixFD(let v): try basic("h", v)
        case .string(let s), .objectPath(let s), .signature(let s):
            let type: Unicode.Scalar = value.signature == "s" ? "s" : value.signature == "o" ? "o" : "g"
            try s.withCString { p in try check(sd_bus_message_append_basic(m, char(type), p), "append a string") }
        case .variant(let inner):
            try container(m, "v", inner.signature) { try append(inner, to: m) }
        case .array(let element, let values):
            try container(m, "a", element) { try append(values, to: m) }
        case .dictionary(let key, let valueSignature, let entries):
            try container(m, "a", "{" + key + valueSignature + "}") {
                for (k, v) in entries {
                    try container(m, "e", key + valueSignature) { try append(k, to: m); try append(v, to: m) }
                }
            }
        case .structure(let fields):
            try container(m, "r", fields.map(\.signature).joined()) { try append(fields, to: m) }
        }
    }

    private static func container(_ m: OpaquePointer, _ type: Unicode.Scalar, _ contents: String, _ body: () throws -> Void) throws {
        try contents.withCString { try check(sd_bus_message_open_container(m, char(type), $0), "open \(type)\(contents)") }
        try body()
        try check(sd_bus_message_close_container(m), "close \(type)\(contents)")
    }

    /// Reads every value left in the current container of a message.
    static func readAll(_ m: OpaquePointer) throws -> [DBusValue] {
        var values: [DBusValue] = []
        while true {
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            let r = sd_bus_message_peek_type(m, &type, &contents)
            try check(r, "read a message")
            if r == 0 { return values }
            values.append(try readOne(m, type: UInt8(bitPattern: type), contents: contents.map { String(cString: $0) } ?? ""))
        }
    }

    private static func readOne(_ m: OpaquePointer, type: UInt8, contents: String) throws -> DBusValue {
        func basic<T: BitwiseCopyable>(_ initial: T) throws -> T {
            var v = initial
            try check(sd_bus_message_read_basic(m, CChar(bitPattern: type), &v), "read \(Character(Unicode.Scalar(type)))")
            return v
        }
        func string() throws -> String {
            var p: UnsafePointer<CChar>?
            try check(sd_bus_message_read_basic(m, CChar(bitPattern: type), &p), "read a string")
            return p.map { String(cString: $0) } ?? ""
        }
        func inside<R>(_ kind: Unicode.Scalar, _ body: () throws -> R) throws -> R {
            try contents.withCString { try check(sd_bus_message_enter_container(m, char(kind), $0), "enter \(kind)\(contents)") }
            let result = try body()
            try check(sd_bus_message_exit_container(m), "leave \(kind)\(contents)")
            return result
        }
        switch Unicode.Scalar(type) {
        case "y": return .byte(try basic(UInt8(0)))
        case "b": return .bool(try basic(Int32(0)) != 0)
        case "n": return .int16(try basic(Int16(0)))
        case "q": return .uint16(try basic(UInt16(0)))
        case "i": return .int32(try basic(Int32(0)))
        case "u": return .uint32(try basic(UInt32(0)))
        case "x": return .int64(try basic(Int64(0)))
        case "t": return .uint64(try basic(UInt64(0)))
        case "d": return .double(try basic(Double(0)))
        case "h": return .unixFD(try basic(Int32(-1)))
        case "s": return .string(try string())
        case "o": return .objectPath(try string())
        case "g": return .signature(try string())
        case "v": return .variant(try inside("v") { try readAll(m).first ?? .structure([]) })
        case "r": return .structure(try inside("r") { try readAll(m) })
        case "a" where contents.hasPrefix("{"):
            let inner = String(contents.dropFirst().dropLast())
            let keySignature = String(inner.prefix(1))  // a dictionary's key is a basic type
            let valueSignature = String(inner.dropFirst())
            return try inside("a") {
                var entries: [DBusValue: DBusValue] = [:]
                while true {
                    let r = inner.withCString { sd_bus_message_enter_container(m, char("e"), $0) }
                    try check(r, "enter a dictionary entry")
                    if r == 0 { break }
                    let pair = try readAll(m)
                    try check(sd_bus_message_exit_container(m), "leave a dictionary entry")
                    if pair.count == 2 { entries[pair[0]] = pair[1] }
                }
                return .dictionary(keySignature: keySignature, valueSignature: valueSignature, entries)
            }
        case "a": return .array(elementSignature: contents, try inside("a") { try readAll(m) })
        default:
            throw DBusError.badMessage("a value of the unknown type '\(Character(Unicode.Scalar(type)))'")
        }
    }
}
