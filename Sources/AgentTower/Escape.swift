/// Text that apps and files control (application names, binaries, roles, ids, device descriptions,
/// file names), made safe for the places it is shown: a log line or a terminal must never be split,
/// forged or sent escape sequences by a stream's properties.
///
/// Two forms, one rule about which characters are dangerous (`isDangerous`): the C0 controls (line
/// feed, escape, NUL ...), DEL, the C1 controls (U+0080-U+009F: U+009B starts an escape sequence on some
/// terminals, U+0085 is a line break to some readers), the Unicode line and paragraph separators, and the
/// bidirectional controls that make a line read other than it is written.
public enum Escape {
    /// For people: each dangerous character as a visible escape, `\n`, `\r`, `\t`, `\x1b` (C0 and DEL),
    /// `\u{9b}` (the others); a backslash as `\\`, so that what is shown reads back one way only (an
    /// app named `a\nb` with a real backslash does not look like one with a line feed). Everything else,
    /// accents and emoji included, is shown as it is.
    public static func forDisplay(_ text: String) -> String {
        guard needsWork(text, escapingBackslash: true) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: result += "\\x" + hex(scalar.value, digits: 2)
            case _ where isDangerous(scalar): result += "\\u{" + hex(scalar.value, digits: 1) + "}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// For a log line: as `forDisplay`, shortened when long. What an app controls can be as long as the
    /// server lets it (a 64 KB stream name, logged with every event of its 50 streams, made megabytes
    /// of log): past `limit` characters of the escaped text the rest is left out, which says an ellipsis
    /// and the whole text's length in characters (`… (65536 characters)`). An escape is never cut.
    public static func forLog(_ text: String, limit: Int = 200) -> String {
        guard text.utf8.count > limit || needsWork(text, escapingBackslash: true) else { return text }
        var result = ""
        var shown = 0
        for scalar in text.unicodeScalars {
            let piece = forDisplay(String(scalar))
            if shown + piece.unicodeScalars.count > limit {
                return result + "… (\(text.unicodeScalars.count) characters)"
            }
            result += piece
            shown += piece.unicodeScalars.count
        }
        return result
    }

    /// `text` with no more than `limit` characters of it, the rest left out as `forLog` leaves it out
    /// (an ellipsis and the whole length), not escaped: for messages whose sink escapes them.
    public static func shortened(_ text: String, limit: Int = 200) -> String {
        guard text.utf8.count > limit else { return text }
        let scalars = text.unicodeScalars
        guard scalars.count > limit else { return text }
        var result = String.UnicodeScalarView()
        result.append(contentsOf: scalars.prefix(limit))
        return String(result) + "… (\(scalars.count) characters)"
    }

    /// For JSON text (what `JSONEncoder` wrote): each dangerous character as a `\uXXXX` escape, which
    /// JSON reads back as the same character. `JSONEncoder` escapes the C0 controls itself but not DEL,
    /// the C1 controls or the separators; they can only stand inside strings there, so the result is
    /// the same JSON value, safe to print on one line. A raw newline, tab or carriage return can only be
    /// the layout of pretty-printed JSON (inside strings the encoder escapes them): it stays.
    public static func inJSON(_ json: String) -> String {
        guard needsWork(json, escapingBackslash: false) else { return json }
        var result = ""
        result.reserveCapacity(json.utf8.count + 8)
        for scalar in json.unicodeScalars {
            if isDangerous(scalar) && scalar != "\n" && scalar != "\t" && scalar != "\r" {
                result += "\\u" + hex(scalar.value, digits: 4)  // every dangerous character is in the BMP
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Whether a name the user gives an app by (`audiosessionctl permission APP`, `mic mute APP`) is one:
    /// printable, no spaces, at most 255 bytes.
    public static func isAppName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255 && !name.unicodeScalars.contains { $0.properties.isWhitespace || isDangerous($0) }
    }

    /// Whether a character can break a line, drive a terminal or reorder what a line shows.
    public static func isDangerous(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true   // C0, DEL, C1
        case 0x2028, 0x2029: true             // line and paragraph separators
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true  // bidirectional marks, embeddings, overrides, isolates
        default: false
        }
    }

    /// The fast path: most text is plain printable ASCII and is returned as it is.
    static func needsWork(_ text: String, escapingBackslash: Bool) -> Bool {
        for byte in text.utf8 where byte < 0x20 || byte >= 0x7F || (escapingBackslash && byte == UInt8(ascii: "\\")) {
            if byte < 0x80 { return true }
            // Non-ASCII: decide per character (accents and emoji are safe).
            return text.unicodeScalars.contains { isDangerous($0) || (escapingBackslash && $0 == "\\") }
        }
        return false
    }

    static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
