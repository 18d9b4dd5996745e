/// The YAML that policy files are written in: a small subset, read by a parser of our own so that the
/// agent needs neither a YAML library nor the whole of Foundation.
///
/// Accepted: block mappings (`key: value`, nesting by indentation with spaces), block sequences
/// (`- value`), flow sequences and flow mappings on one line (`[a, "b c", 'd']`,
/// `{binary: [vlc], "role": [video]}`), plain, single-quoted and double-quoted scalars, comments, and
/// a leading `---`. Anything else YAML has (anchors, aliases, tags, block scalars, flow collections
/// over several lines, several documents, tabs for indentation) is an error that says so, with its line
/// and column. Duplicated keys are errors too.
enum PolicyYAML {
    /// A place in the text, both 1-based.
    struct Mark: Hashable, Sendable {
        var line: Int
        var column: Int
    }

    indirect enum Node: Sendable {
        case scalar(String, Mark)
        case sequence([Node], Mark)
        case mapping([(key: String, keyMark: Mark, value: Node)], Mark)

        var mark: Mark {
            switch self {
            case .scalar(_, let m), .sequence(_, let m), .mapping(_, let m): m
            }
        }
    }

    struct Failure: Error, Sendable {
        var mark: Mark
        var message: String
    }

    /// The document's root, or nil for a file with nothing in it.
    static func parse(_ text: String) throws(Failure) -> Node? {
        var lines: [Line] = []
        var number = 0
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            number += 1
            let chars = Array(raw.hasSuffix("\r") ? raw.dropLast() : raw)
            var indent = 0
            while indent < chars.count, chars[indent] == " " { indent += 1 }
            if indent < chars.count, chars[indent] == "\t" {
                throw Failure(mark: Mark(line: number, column: indent + 1), message: "tabs cannot indent YAML; use spaces")
            }
            let body = Array(chars[indent...])
            if body.isEmpty || body.first == "#" { continue }
            // One `---` may open the document.
            if lines.isEmpty, body.starts(with: Array("---")), body.count == 3 || body[3] == " " { continue }
            if body.starts(with: Array("---")) || body.starts(with: Array("...")) {
                throw Failure(mark: Mark(line: number, column: indent + 1), message: "a policy file holds one document")
            }
            lines.append(Line(number: number, indent: indent, chars: chars))
        }
        guard !lines.isEmpty else { return nil }
        var parser = Parser(lines: lines, endLine: number + (text.hasSuffix("\n") ? 0 : 1))
        let node = try parser.block(indent: lines[0].indent)
        if parser.index < lines.count {
            let line = lines[parser.index]
            throw Failure(mark: Mark(line: line.number, column: line.indent + 1), message: "this line is not indented like the ones before it")
        }
        return node
    }

    struct Line {
        var number: Int
        var indent: Int
        var chars: [Character]
    }

    struct Parser {
        let lines: [Line]
        /// Where the text ends, for errors at its end.
        let endLine: Int
        var index = 0

        /// A mapping or a sequence whose lines start at `indent`.
        mutating func block(indent: Int) throws(Failure) -> Node {
            let first = lines[index]
            if isSequenceItem(first, at: indent) { return try sequence(indent: indent) }
            return try mapping(indent: indent)
        }

        func isSequenceItem(_ line: Line, at indent: Int) -> Bool {
            line.indent == indent && line.chars[indent] == "-" && (line.chars.count == indent + 1 || line.chars[indent + 1] == " ")
        }

        mutating func sequence(indent: Int) throws(Failure) -> Node {
            let start = Mark(line: lines[index].number, column: indent + 1)
            var items: [Node] = []
            while index < lines.count, isSequenceItem(lines[index], at: indent) {
                let line = lines[index]
                var cursor = Cursor(line: line, position: indent + 1)
                cursor.skipSpaces()
                index += 1
                if cursor.atEnd {
                    throw Failure(mark: cursor.mark, message: "an empty list item")
                }
                if cursor.looksLikeKey() {
                    throw Failure(mark: cursor.mark, message: "lists of mappings are not used in policy files")
                }
                items.append(try value(&cursor, endLine: endLine))
            }
            return .sequence(items, start)
        }

        mutating func mapping(indent: Int) throws(Failure) -> Node {
            let start = Mark(line: lines[index].number, column: indent + 1)
            var entries: [(key: String, keyMark: Mark, value: Node)] = []
            while index < lines.count, lines[index].indent == indent, !isSequenceItem(lines[index], at: indent) {
                let line = lines[index]
                var cursor = Cursor(line: line, position: indent)
                let keyMark = cursor.mark
                let key = try cursor.key()
                if entries.contains(where: { $0.key == key }) {
                    throw Failure(mark: keyMark, message: "duplicated key '\(key)'")
                }
                cursor.skipSpaces()
                index += 1
                if !cursor.atEnd {
                    entries.append((key, keyMark, try value(&cursor, endLine: endLine)))
                } else if index < lines.count, lines[index].indent > indent
                            || (lines[index].indent == indent && isSequenceItem(lines[index], at: indent)) {
                    entries.append((key, keyMark, try block(indent: lines[index].indent)))
                } else {
                    entries.append((key, keyMark, .scalar("", cursor.mark)))
                }
            }
            if index < lines.count, lines[index].indent > indent {
                let line = lines[index]
                throw Failure(mark: Mark(line: line.number, column: line.indent + 1), message: "this line is indented more than the key before it")
            }
            return .mapping(entries, start)
        }

        /// A value that fits on the rest of a line: a scalar or a flow sequence.
        func value(_ cursor: inout Cursor, endLine: Int) throws(Failure) -> Node {
            let mark = cursor.mark
            let node: Node
            switch cursor.peek {
            case "[": node = try cursor.flowSequence(endLine: endLine)
            case "{": node = try cursor.flowMapping(endLine: endLine)
            case "&", "*": throw Failure(mark: mark, message: "anchors and aliases are not used in policy files")
            case "!": throw Failure(mark: mark, message: "tags are not used in policy files")
            case "|", ">": throw Failure(mark: mark, message: "block scalars (| and >) are not used in policy files")
            default: node = .scalar(try cursor.scalar(inFlow: false), mark)
            }
            cursor.skipSpaces()
            if !cursor.atEnd && cursor.peek != "#" {
                throw Failure(mark: cursor.mark, message: "unexpected text after the value")
            }
            return node
        }
    }

    /// Reads one line from a position.
    struct Cursor {
        let line: Line
        var position: Int

        var atEnd: Bool { position >= line.chars.count }
        var peek: Character? { atEnd ? nil : line.chars[position] }
        var mark: Mark { Mark(line: line.number, column: position + 1) }

        mutating func skipSpaces() {
            while let c = peek, c == " " || c == "\t" { position += 1 }
        }

        /// Whether the rest of the line starts like `key: ...` (a plain key followed by a colon).
        func looksLikeKey() -> Bool {
            var probe = self
            guard let c = probe.peek, c != "\"", c != "'", c != "[" else { return false }
            while let c = probe.peek {
                if c == ":" {
                    probe.position += 1
                    return probe.atEnd || probe.peek == " "
                }
                if c == "#" && probe.position > 0 && line.chars[probe.position - 1] == " " { return false }
                probe.position += 1
            }
            return false
        }

        /// `key:` at the cursor; leaves the cursor after the colon.
        mutating func key() throws(Failure) -> String {
            let mark = self.mark
            let key: String
            if peek == "\"" || peek == "'" {
                key = try quoted()
                skipSpaces()
            } else {
                var text = ""
                while let c = peek, !(c == ":" && (position + 1 >= line.chars.count || line.chars[position + 1] == " ")) {
                    if c == "#" && !text.isEmpty && text.last == " " { break }
                    text.append(c)
                    position += 1
                }
                key = String(text.reversed().drop { $0 == " " }.reversed())
            }
            guard peek == ":" else {
                throw Failure(mark: mark, message: "expected 'key: value'")
            }
            position += 1
            if key.isEmpty { throw Failure(mark: mark, message: "a key is missing before ':'") }
            return key
        }

        /// A plain or quoted scalar. In a flow collection, a plain one ends at ',', ']' or '}'.
        mutating func scalar(inFlow: Bool) throws(Failure) -> String {
            if peek == "\"" || peek == "'" { return try quoted() }
            var text = ""
            while let c = peek {
                if c == "#" && (text.isEmpty || text.last == " ") { break }
                if inFlow && (c == "," || c == "]" || c == "}") { break }
                if inFlow && (c == "[" || c == "{") {
                    throw Failure(mark: mark, message: "nested lists are not used in policy files")
                }
                if c == ":" && (position + 1 >= line.chars.count || line.chars[position + 1] == " ") {
                    throw Failure(mark: mark, message: "a value cannot hold ': ' unless it is quoted")
                }
                text.append(c)
                position += 1
            }
            return String(text.reversed().drop { $0 == " " }.reversed())
        }

        /// A single- or double-quoted scalar; leaves the cursor after the closing quote.
        mutating func quoted() throws(Failure) -> String {
            let start = mark
            let quote = peek!
            position += 1
            var text = ""
            while let c = peek {
                position += 1
                if c == quote {
                    if quote == "'" && peek == "'" { text.append("'"); position += 1; continue }
                    return text
                }
                if quote == "\"" && c == "\\" {
                    guard let e = peek else { break }
                    position += 1
                    switch e {
                    case "\"": text.append("\"")
                    case "\\": text.append("\\")
                    case "/": text.append("/")
                    case "n": text.append("\n")
                    case "t": text.append("\t")
                    case "r": text.append("\r")
                    case "0": text.append("\0")
                    case "u":
                        let digits = String(line.chars[min(position, line.chars.count)..<min(position + 4, line.chars.count)])
                        guard digits.count == 4, let value = UInt32(digits, radix: 16), let scalar = Unicode.Scalar(value) else {
                            throw Failure(mark: mark, message: "\\u needs four hexadecimal digits")
                        }
                        text.unicodeScalars.append(scalar)
                        position += 4
                    default:
                        throw Failure(mark: Mark(line: line.number, column: position), message: "unknown escape \\\(e)")
                    }
                    continue
                }
                text.append(c)
            }
            throw Failure(mark: start, message: "the quoted text is not closed on its line")
        }

        /// `{key: value, key: [a, b]}` on the rest of the line (values are scalars or flow sequences).
        mutating func flowMapping(endLine: Int) throws(Failure) -> Node {
            var entries: [(key: String, keyMark: Mark, value: Node)] = []
            let start = try flowCollection(endLine: endLine) { (cursor: inout Cursor) throws(Failure) in
                let keyMark = cursor.mark
                let key: String
                if cursor.peek == "\"" || cursor.peek == "'" {
                    key = try cursor.quoted()
                } else {
                    var text = ""
                    while let k = cursor.peek, k != ":", k != ",", k != "}" { text.append(k); cursor.position += 1 }
                    key = String(text.reversed().drop { $0 == " " }.reversed())
                }
                cursor.skipSpaces()
                guard cursor.peek == ":", !key.isEmpty else { throw Failure(mark: keyMark, message: "expected 'key: value' in the mapping") }
                cursor.position += 1
                if entries.contains(where: { $0.key == key }) { throw Failure(mark: keyMark, message: "duplicated key '\(key)'") }
                cursor.skipSpaces()
                let valueMark = cursor.mark
                switch cursor.peek {
                case "[": entries.append((key, keyMark, try cursor.flowSequence(endLine: endLine)))
                case "{": throw Failure(mark: valueMark, message: "mappings inside {...} are not used in policy files")
                default: entries.append((key, keyMark, .scalar(try cursor.scalar(inFlow: true), valueMark)))
                }
            }
            return .mapping(entries, start)
        }

        /// `[a, b, c]` on the rest of the line.
        mutating func flowSequence(endLine: Int) throws(Failure) -> Node {
            var items: [Node] = []
            let start = try flowCollection(endLine: endLine) { (cursor: inout Cursor) throws(Failure) in
                let itemMark = cursor.mark
                let item = try cursor.scalar(inFlow: true)
                if item.isEmpty && cursor.peek != "]" { throw Failure(mark: itemMark, message: "an empty list item") }
                if !item.isEmpty { items.append(.scalar(item, itemMark)) }  // "[a, ]": nothing after the last comma
            }
            return .sequence(items, start)
        }

        /// A flow collection, `[...]` or `{...}`, on the rest of the line: `item` reads each entry; the
        /// commas and the closing bracket are read here. Returns where it opened.
        mutating func flowCollection(endLine: Int, _ item: (inout Cursor) throws(Failure) -> Void) throws(Failure) -> Mark {
            let start = mark
            let (close, what): (Character, String) = peek == "[" ? ("]", "list") : ("}", "mapping")
            position += 1
            while true {
                skipSpaces()
                guard let c = peek else {
                    throw Failure(mark: Mark(line: endLine, column: 1),
                                  message: "the \(what) opened at \(start.line):\(start.column) is not closed (with '\(close)' on the same line)")
                }
                if c == close { position += 1; return start }
                try item(&self)
                skipSpaces()
                if peek == "," { position += 1 } else if peek != close && peek != nil {
                    throw Failure(mark: mark, message: "expected ',' or '\(close)' in the \(what)")
                }
            }
        }
    }
}
