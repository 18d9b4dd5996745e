import Foundation

/// One line of the benchmark's table.
struct Row {
    enum Unit { case milliseconds, microseconds }
    var measurement: String
    var server: String
    var who: String
    var median = "-"
    var p95 = "-"
    var p99 = "-"
    var note: String

    init(measurement: String, server: String, who: String, samples: [Duration], unit: Unit, note: String) {
        self.measurement = measurement; self.server = server; self.who = who; self.note = note
        guard !samples.isEmpty else { median = "no samples"; return }
        func format(_ d: Duration) -> String {
            switch unit {
            case .milliseconds: String(format: "%.2f ms", d.seconds * 1000)
            case .microseconds: String(format: "%.1f µs", d.seconds * 1_000_000)
            }
        }
        median = format(Row.percentile(samples, 0.5))
        p95 = format(Row.percentile(samples, 0.95))
        p99 = format(Row.percentile(samples, 0.99))
    }

    init(measurement: String, server: String, who: String, value: String, note: String) {
        self.measurement = measurement; self.server = server; self.who = who; self.median = value; self.note = note
    }

    static func percentile(_ samples: [Duration], _ p: Double) -> Duration {
        let sorted = samples.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

struct Table {
    var rows: [Row] = []
    mutating func add(_ row: Row) { add(contentsOf: [row]) }
    mutating func add(contentsOf more: [Row]) {
        rows += more
        for r in more {
            FileHandle.standardError.write(Data("bench: | \(r.measurement) | \(r.server) | \(r.who) | \(r.median) | \(r.p95) | \(r.p99) | \(r.note) |\n".utf8))
        }
    }

    /// A Markdown table, to paste into the README as it is.
    func render() -> String {
        var lines = ["| measurement | server | who | median | p95 | p99 | notes |", "|---|---|---|---|---|---|---|"]
        for r in rows {
            lines.append("| \(r.measurement) | \(r.server) | \(r.who) | \(r.median) | \(r.p95) | \(r.p99) | \(r.note) |")
        }
        return lines.joined(separator: "\n")
    }
}
