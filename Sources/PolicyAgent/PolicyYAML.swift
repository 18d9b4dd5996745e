/// The YAML that policy files are written in: a small subset, read by a parser of our own so that the
/// agent needs neither a YAML library nor the whole of Foundation.
///
/// Accepted: UTF-8 text with LF or CRLF line ends and an optional byte-order mark; block mappings
/// (`key: value`, nesting by indentation with spaces), block sequences (`- value`), flow sequences and
/// flow mappings on one line (`[a, "b c", 'd']`, `{binary: [vlc], "role": [video]}`), plain,
/// single-quoted and double-quoted scalars, comments, and a leading `---` (alone on its line, or with a
/// comment). Anything else YAML has (anchors, aliases, tags, directives, block scalars, flow collections
/// over several lines, complex keys, several documents, tabs for indentation) is an error that says so,
/// with its line and column; so are control characters other than tab (NUL, escape ...), a lone
/// carriage return and invalid UTF-8. Duplicated keys are errors too.
///
/// Bad input costs little: the work is linear in the text (one pass to decode and split it into lines,
/// one to parse, sets for duplicated keys), and `Limits` bounds the size, the nesting (which also
/// bounds the parser's recursion, so no input can overflow the stack, in debug builds either) and the
/// number of keys and list items. Crossing a limit is an error naming it.
enum PolicyYAML {
    /// A place in the text, both 1-based; the column counts Unicode scalars.
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
        /// False for what is not about YAML itself: a limit crossed, bytes that are not UTF-8.
        var isSyntax = true
    }

    /// How much a text may hold. A policy file names one app in a few lines; the limits are hundreds of
    /// times that, and far below what would make the agent wait.
    struct Limits: Hashable, Sendable {
        /// The most bytes of UTF-8.
        var bytes: Int
        /// The deepest nesting of mappings and lists (the top-level mapping is level 1, `match:`'s is 2).
        /// The parser recurses once per level: this bounds its stack, so keep it small.
        var depth: Int
        /// The most keys and list items, in all.
        var entries: Int

        /// The limits of a policy file.
        static let policyFile = Limits(bytes: 1 << 20, depth: 32, entries: 10_000)
    }

    /// The document's root, or nil for a file with nothing in it.
    static func parse(_ text: String, limits: Limits = .policyFile) throws(Failure) -> Node? {
        try parse(utf8: text.utf8, limits: limits)
    }

    /// The document's root, or nil for a file with nothing in it, from the file's bytes (which may be
    /// anything: invalid UTF-8 is an error with its place).
    static func parse(utf8 bytes: some Collection<UInt8>, limits: Limits = .policyFile) throws(Failure) -> Node? {
        let text = try Text(utf8: bytes, limits: limits)
        var lines: [Line] = []
        var sawDocumentStart = false
        for (offset, range) in text.lines.enumerated() {
            let number = offset + 1
            var indent = 0
            while range.lowerBound + indent < range.upperBound, text.scalars[range.lowerBound + indent] == " " { indent += 1 }
            let body = (range.lowerBound + indent)..<range.upperBound
            if !body.isEmpty, text.scalars[body.lowerBound] == "\t" {
                throw Failure(mark: Mark(line: number, column: indent + 1), message: "tabs cannot indent YAML; use spaces")
            }
            if body.isEmpty || text.scalars[body.lowerBound] == "#" { continue }
            let first = text.scalars[body.lowerBound]
            if first == "%" && indent == 0 {
                throw Failure(mark: Mark(line: number, column: 1), message: "directives (%YAML, %TAG) are not used in policy files")
            }
            if text.starts(body, with: "---") || text.starts(body, with: "...") {
                let marker = body.count == 3 || text.scalars[body.lowerBound + 3] == " " || text.scalars[body.lowerBound + 3] == "\t"
                // One `---` may open the document, alone on its line or with a comment.
                if first == "-", marker, indent == 0, lines.isEmpty, !sawDocumentStart {
                    sawDocumentStart = true
                    var position = body.lowerBound + 3
                    while position < body.upperBound, text.scalars[position] == " " || text.scalars[position] == "\t" { position += 1 }
                    if position < body.upperBound, text.scalars[position] != "#" {
                        throw Failure(mark: Mark(line: number, column: position - range.lowerBound + 1),
                                      message: "nothing may follow '---' on its line in a policy file; start the document on the next line")
                    }
                    continue
                }
                throw Failure(mark: Mark(line: number, column: indent + 1),
                              message: first == "-" ? "a policy file holds one document ('---' starts another)"
                                                    : "a policy file holds one document ('...' ends it)")
            }
            lines.append(Line(number: number, indent: indent, range: range))
        }
        guard !lines.isEmpty else { return nil }
        var parser = Parser(text: text, lines: lines, limits: limits, endLine: text.lines.count + (text.endsWithLineBreak ? 0 : 1))
        let node = try parser.block(indent: lines[0].indent, depth: 1)
        if parser.index < lines.count {
            let line = lines[parser.index]
            throw Failure(mark: Mark(line: line.number, column: line.indent + 1), message: "this line is not indented like the ones before it")
        }
        return node
    }

    /// The text decoded once: its Unicode scalars, and each line's range of them (without its line
    /// break), the last line too (empty when the text ends with a line break).
    struct Text {
        var scalars: [Unicode.Scalar] = []
        var lines: [Range<Int>] = []
        var endsWithLineBreak = false

        init(utf8 bytes: some Collection<UInt8>, limits: Limits) throws(Failure) {
            if bytes.count > limits.bytes { throw Self.tooLarge(bytes, limits: limits) }
            scalars.reserveCapacity(bytes.count)
            var iterator = bytes.makeIterator()
            var decoder = Unicode.UTF8()
            var line = 1
            var column = 1
            var lineStart = 0
            var carriageReturn: Mark?
            var atStart = true
            decoding: while true {
                switch decoder.decode(&iterator) {
                case .scalarValue(let scalar):
                    let mark = Mark(line: line, column: column)
                    defer { atStart = false }
                    if let cr = carriageReturn, scalar != "\n" {
                        throw Failure(mark: cr, message: "a carriage return must be followed by a line feed (CRLF); a lone one is not a line break here")
                    }
                    switch scalar {
                    case "\n":
                        lines.append(lineStart..<scalars.count)
                        line += 1
                        column = 1
                        lineStart = scalars.count
                        carriageReturn = nil
                    case "\r":
                        carriageReturn = mark
                    case "\u{FEFF}" where atStart:
                        continue  // the byte-order mark some editors write
                    case "\t", " "..."~", "\u{A0}"..."\u{D7FF}", "\u{E000}"..."\u{FEFE}", "\u{FF00}"..."\u{FFFD}", "\u{10000}"...:
                        scalars.append(scalar)
                        column += 1
                    case "\u{FEFF}":
                        throw Failure(mark: mark, message: "a byte-order mark (U+FEFF) may only stand at the start of the file")
                    case "\0":
                        throw Failure(mark: mark, message: "a NUL byte is not allowed in a policy file")
                    default:
                        let code = String(scalar.value, radix: 16, uppercase: true)
                        throw Failure(mark: mark, message: "control character U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code) is not allowed in a policy file (in double quotes, write it as an escape: \\u\(String(repeating: "0", count: max(0, 4 - code.count)) + code))")
                    }
                case .emptyInput:
                    break decoding
                case .error:
                    throw Failure(mark: Mark(line: line, column: column), message: "not valid UTF-8 (policy files are UTF-8 text)", isSyntax: false)
                }
            }
            if let cr = carriageReturn {
                throw Failure(mark: cr, message: "a carriage return must be followed by a line feed (CRLF); a lone one is not a line break here")
            }
            endsWithLineBreak = lineStart == scalars.count && !lines.isEmpty
            lines.append(lineStart..<scalars.count)
        }

        /// The error for a text over the size limit, at the first character beyond it.
        static func tooLarge(_ bytes: some Collection<UInt8>, limits: Limits) -> Failure {
            var line = 1
            var column = 1
            for byte in bytes.prefix(limits.bytes) {
                if byte == UInt8(ascii: "\n") {
                    line += 1
                    column = 1
                } else if byte & 0xC0 != 0x80 && byte != UInt8(ascii: "\r") {
                    column += 1  // a character starts (continuation bytes and CR do not count)
                }
            }
            return Failure(mark: Mark(line: line, column: column),
                           message: "the file is larger than \(limits.bytes) bytes, the limit for a policy file", isSyntax: false)
        }

        func starts(_ range: Range<Int>, with prefix: String) -> Bool {
            var position = range.lowerBound
            for scalar in prefix.unicodeScalars {
                guard position < range.upperBound, scalars[position] == scalar else { return false }
                position += 1
            }
            return true
        }
    }

    /// A line with content (not blank, not only a comment).
    struct Line {
        var number: Int
        var indent: Int
        /// Its scalars in the text.
        var range: Range<Int>
        var count: Int { range.count }
    }

    /// Counts keys and list items against `Limits.entries`.
    struct Budget {
        var left: Int
        let limit: Int

        mutating func spend(at mark: Mark) throws(Failure) {
            left -= 1
            if left < 0 {
                throw Failure(mark: mark, message: "more than \(limit) keys and list items, the limit for a policy file", isSyntax: false)
            }
        }
    }

    struct Parser {
        let text: Text
        let lines: [Line]
        let limits: Limits
        /// Where the text ends, for errors at its end.
        let endLine: Int
        var index = 0
        var budget: Budget

        init(text: Text, lines: [Line], limits: Limits, endLine: Int) {
            self.text = text; self.lines = lines; self.limits = limits; self.endLine = endLine
            budget = Budget(left: limits.entries, limit: limits.entries)
        }

        func cursor(_ line: Line, at position: Int) -> Cursor {
            Cursor(text: text, line: line, position: position)
        }

        /// A mapping or a sequence whose lines start at `indent`, `depth` levels deep.
        mutating func block(indent: Int, depth: Int) throws(Failure) -> Node {
            let first = lines[index]
            if depth > limits.depth {
                throw Failure(mark: Mark(line: first.number, column: indent + 1),
                              message: "nested more than \(limits.depth) levels deep, the limit for a policy file", isSyntax: false)
            }
            if isSequenceItem(first, at: indent) { return try sequence(indent: indent) }
            return try mapping(indent: indent, depth: depth)
        }

        func isSequenceItem(_ line: Line, at indent: Int) -> Bool {
            line.indent == indent && text.scalars[line.range.lowerBound + indent] == "-"
                && (line.count == indent + 1 || text.scalars[line.range.lowerBound + indent + 1] == " ")
        }

        mutating func sequence(indent: Int) throws(Failure) -> Node {
            let start = Mark(line: lines[index].number, column: indent + 1)
            var items: [Node] = []
            while index < lines.count, isSequenceItem(lines[index], at: indent) {
                var cursor = cursor(lines[index], at: indent + 1)
                try budget.spend(at: Mark(line: lines[index].number, column: indent + 1))
                cursor.skipSpaces()
                index += 1
                if cursor.atEnd || cursor.peek == "#" {
                    throw Failure(mark: cursor.mark, message: "an empty list item")
                }
                if cursor.looksLikeKey() {
                    throw Failure(mark: cursor.mark, message: "lists of mappings are not used in policy files")
                }
                items.append(try value(&cursor))
            }
            return .sequence(items, start)
        }

        mutating func mapping(indent: Int, depth: Int) throws(Failure) -> Node {
            let start = Mark(line: lines[index].number, column: indent + 1)
            var entries: [(key: String, keyMark: Mark, value: Node)] = []
            var keys: Set<String> = []
            while index < lines.count, lines[index].indent == indent, !isSequenceItem(lines[index], at: indent) {
                var cursor = cursor(lines[index], at: indent)
                let keyMark = cursor.mark
                try budget.spend(at: keyMark)
                let key = try cursor.key()
                guard keys.insert(key).inserted else {
                    throw Failure(mark: keyMark, message: "duplicated key '\(key)'")
                }
                cursor.skipSpaces()
                index += 1
                if !cursor.atEnd && cursor.peek != "#" {
                    entries.append((key, keyMark, try value(&cursor)))
                } else if index < lines.count, lines[index].indent > indent
                            || (lines[index].indent == indent && isSequenceItem(lines[index], at: indent)) {
                    entries.append((key, keyMark, try block(indent: lines[index].indent, depth: depth + 1)))
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

        /// A value that fits on the rest of a line: a scalar or a flow collection.
        mutating func value(_ cursor: inout Cursor) throws(Failure) -> Node {
            let mark = cursor.mark
            let node: Node
            switch cursor.peek {
            case "[": node = try cursor.flowSequence(endLine: endLine, budget: &budget)
            case "{": node = try cursor.flowMapping(endLine: endLine, budget: &budget)
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

    /// Reads one line from a position (counted from the line's start).
    struct Cursor {
        let text: Text
        let line: Line
        var position: Int

        var atEnd: Bool { position >= line.count }
        var peek: Unicode.Scalar? { atEnd ? nil : text.scalars[line.range.lowerBound + position] }
        var mark: Mark { Mark(line: line.number, column: position + 1) }

        func at(_ offset: Int) -> Unicode.Scalar? {
            position + offset < line.count ? text.scalars[line.range.lowerBound + position + offset] : nil
        }

        mutating func skipSpaces() {
            while let c = peek, c == " " || c == "\t" { position += 1 }
        }

        /// Whether the rest of the line starts like `key: ...` (a plain key followed by a colon).
        func looksLikeKey() -> Bool {
            var probe = self
            guard let c = probe.peek, c != "\"", c != "'", c != "[", c != "{" else { return false }
            while let c = probe.peek {
                if c == ":" {
                    probe.position += 1
                    return probe.atEnd || probe.peek == " " || probe.peek == "\t"
                }
                if c == "#" && probe.at(-1) == " " { return false }
                probe.position += 1
            }
            return false
        }

        /// Refuses what YAML means by a plain scalar's (or key's) first character when policy files
        /// do not use it: anchors, aliases, tags, complex keys, reserved indicators, a flow collection
        /// or a list item where only text may stand.
        func checkPlainStart(inFlow: Bool, isKey: Bool) throws(Failure) {
            guard let c = peek else { return }
            let spaceAfter = at(1) == nil || at(1) == " " || at(1) == "\t"
            switch c {
            case "&", "*": throw Failure(mark: mark, message: "anchors and aliases are not used in policy files")
            case "!": throw Failure(mark: mark, message: "tags are not used in policy files")
            case "|", ">": throw Failure(mark: mark, message: "block scalars (| and >) are not used in policy files")
            case "@", "`", "%": throw Failure(mark: mark, message: "'\(c)' cannot start a plain value; quote it")
            case "?" where spaceAfter: throw Failure(mark: mark, message: "complex keys ('? ') are not used in policy files")
            case "-" where spaceAfter: throw Failure(mark: mark, message: "a list item ('- ') cannot stand here; put each item on a line of its own, or use [a, b]")
            case "[" where isKey, "{" where isKey:
                throw Failure(mark: mark, message: "a key is plain or quoted text, not a list or a mapping")
            case "[" where inFlow, "{" where inFlow:
                throw Failure(mark: mark, message: "nested lists are not used in policy files")
            case "]" where !inFlow, "}" where !inFlow, "," where !inFlow:
                throw Failure(mark: mark, message: "'\(c)' cannot start a plain value; quote it")
            default: return
            }
        }

        /// `key:` at the cursor; leaves the cursor after the colon.
        mutating func key() throws(Failure) -> String {
            let mark = self.mark
            let key: String
            if peek == "\"" || peek == "'" {
                key = try quoted()
                skipSpaces()
            } else {
                try checkPlainStart(inFlow: false, isKey: true)
                var text = ""
                while let c = peek, !(c == ":" && (at(1) == nil || at(1) == " " || at(1) == "\t")) {
                    if c == "#" && text.unicodeScalars.last == " " { break }
                    text.unicodeScalars.append(c)
                    position += 1
                }
                key = Self.trimmed(text)
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
            try checkPlainStart(inFlow: inFlow, isKey: false)
            var text = ""
            while let c = peek {
                if c == "#" && (text.isEmpty || text.unicodeScalars.last == " " || text.unicodeScalars.last == "\t") { break }
                if inFlow && (c == "," || c == "]" || c == "}") { break }
                if inFlow && (c == "[" || c == "{") {
                    throw Failure(mark: mark, message: "nested lists are not used in policy files")
                }
                if c == ":" && (at(1) == nil || at(1) == " " || at(1) == "\t") {
                    throw Failure(mark: mark, message: "a value cannot hold ': ' unless it is quoted")
                }
                text.unicodeScalars.append(c)
                position += 1
            }
            return Self.trimmed(text)
        }

        /// Without the spaces and tabs at its end.
        static func trimmed(_ text: String) -> String {
            var scalars = text.unicodeScalars[...]
            while let last = scalars.last, last == " " || last == "\t" { scalars = scalars.dropLast() }
            return String(scalars)
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
                        var digits = ""
                        for offset in 0..<4 { if let d = at(offset) { digits.unicodeScalars.append(d) } }
                        guard digits.unicodeScalars.count == 4, let value = UInt32(digits, radix: 16), let scalar = Unicode.Scalar(value) else {
                            throw Failure(mark: mark, message: "\\u needs four hexadecimal digits")
                        }
                        text.unicodeScalars.append(scalar)
                        position += 4
                    default:
                        throw Failure(mark: Mark(line: line.number, column: position), message: "unknown escape \\\(e)")
                    }
                    continue
                }
                text.unicodeScalars.append(c)
            }
            throw Failure(mark: start, message: "the quoted text is not closed on its line")
        }

        /// `{key: value, key: [a, b]}` on the rest of the line (values are scalars or flow sequences).
        mutating func flowMapping(endLine: Int, budget: inout Budget) throws(Failure) -> Node {
            var entries: [(key: String, keyMark: Mark, value: Node)] = []
            var keys: Set<String> = []
            let start = try flowCollection(endLine: endLine, budget: &budget) { (cursor: inout Cursor, budget: inout Budget) throws(Failure) in
                let keyMark = cursor.mark
                try budget.spend(at: keyMark)
                let key: String
                if cursor.peek == "\"" || cursor.peek == "'" {
                    key = try cursor.quoted()
                } else {
                    try cursor.checkPlainStart(inFlow: true, isKey: true)
                    var text = ""
                    while let k = cursor.peek, k != ":", k != ",", k != "}" { text.unicodeScalars.append(k); cursor.position += 1 }
                    key = Cursor.trimmed(text)
                }
                cursor.skipSpaces()
                guard cursor.peek == ":", !key.isEmpty else { throw Failure(mark: keyMark, message: "expected 'key: value' in the mapping") }
                cursor.position += 1
                guard keys.insert(key).inserted else { throw Failure(mark: keyMark, message: "duplicated key '\(key)'") }
                cursor.skipSpaces()
                let valueMark = cursor.mark
                switch cursor.peek {
                case "[": entries.append((key, keyMark, try cursor.flowSequence(endLine: endLine, budget: &budget)))
                case "{": throw Failure(mark: valueMark, message: "mappings inside {...} are not used in policy files")
                default: entries.append((key, keyMark, .scalar(try cursor.scalar(inFlow: true), valueMark)))
                }
            }
            return .mapping(entries, start)
        }

        /// `[a, b, c]` on the rest of the line.
        mutating func flowSequence(endLine: Int, budget: inout Budget) throws(Failure) -> Node {
            var items: [Node] = []
            let start = try flowCollection(endLine: endLine, budget: &budget) { (cursor: inout Cursor, budget: inout Budget) throws(Failure) in
                let itemMark = cursor.mark
                try budget.spend(at: itemMark)
                let item = try cursor.scalar(inFlow: true)
                if item.isEmpty && cursor.peek != "]" { throw Failure(mark: itemMark, message: "an empty list item") }
                if !item.isEmpty { items.append(.scalar(item, itemMark)) }  // "[a, ]": nothing after the last comma
            }
            return .sequence(items, start)
        }

        /// A flow collection, `[...]` or `{...}`, on the rest of the line: `item` reads each entry; the
        /// commas and the closing bracket are read here. Returns where it opened.
        mutating func flowCollection(
            endLine: Int, budget: inout Budget, _ item: (inout Cursor, inout Budget) throws(Failure) -> Void
        ) throws(Failure) -> Mark {
            let start = mark
            let (close, what): (Unicode.Scalar, String) = peek == "[" ? ("]", "list") : ("}", "mapping")
            position += 1
            while true {
                skipSpaces()
                guard let c = peek else {
                    throw Failure(mark: Mark(line: endLine, column: 1),
                                  message: "the \(what) opened at \(start.line):\(start.column) is not closed (with '\(close)' on the same line)")
                }
                if c == close { position += 1; return start }
                try item(&self, &budget)
                skipSpaces()
                if peek == "," { position += 1 } else if peek != close && peek != nil {
                    throw Failure(mark: mark, message: "expected ',' or '\(close)' in the \(what)")
                }
            }
        }
    }
}
