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
    /// The median and p95 as numbers (samples rows only), for `--check`.
    var medianSamples: Duration?
    var p95Samples: Duration?

    init(measurement: String, server: String, who: String, samples: [Duration], unit: Unit, note: String) {
        self.measurement = measurement; self.server = server; self.who = who; self.note = note
        guard !samples.isEmpty else { median = "no samples"; return }
        func format(_ d: Duration) -> String {
            switch unit {
            case .milliseconds: String(format: "%.2f ms", d.seconds * 1000)
            case .microseconds: String(format: "%.1f µs", d.seconds * 1_000_000)
            }
        }
        medianSamples = Row.percentile(samples, 0.5)
        p95Samples = Row.percentile(samples, 0.95)
        median = format(medianSamples!)
        p95 = format(p95Samples!)
        p99 = format(Row.percentile(samples, 0.99))
    }

    init(measurement: String, server: String, who: String, value: String, note: String) {
        self.measurement = measurement; self.server = server; self.who = who; self.median = value; self.note = note
    }

    /// The first number in the value ("18.7 MB" → 18.7, "0.33 % (0.20 s)" → 0.33).
    var leadingNumber: Double? { Row.leadingNumber(median) }

    static func leadingNumber<S: StringProtocol>(_ text: S) -> Double? {
        Double(text.drop { $0 == " " }.prefix { $0.isNumber || $0 == "." })
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

/// `--check`: issue 22's targets, read off the rows this run measured (a target whose rows were not
/// measured is not checked). For people comparing runs, not for CI: a 2-core machine's mood moves
/// these figures more than most changes do.
struct Targets {
    struct Check {
        var what: String
        var server: String
        var measured: String
        var target: String
        var holds: Bool
    }

    static func check(_ rows: [Row]) -> [Check] {
        var checks: [Check] = []
        func row(_ measurement: String, _ server: String, _ who: String) -> Row? {
            rows.first { $0.measurement == measurement && $0.server == server && $0.who == who }
        }
        func ms(_ d: Duration) -> String { String(format: "%.2f ms", d.seconds * 1000) }
        for server in Set(rows.map(\.server)).sorted() where server != "-" {
            let measurement = "interruption latency"
            // On PipeWire 0.3 the agent is measured from the call's stream linked: WirePlumber 0.4 starts
            // it some milliseconds after it appears, and a stream that has not started is no call yet (the
            // floor mutes at the stream's appearance, whatever it does next).
            let agentMeasurement = server == "PipeWire" ? "\(measurement), after linking" : measurement
            if let agent = row(agentMeasurement, server, "audiosessiond"), let floor = row(measurement, server, "C floor client"),
               let a = agent.medianSamples, let f = floor.medianSamples, let a95 = agent.p95Samples, let f95 = floor.p95Samples {
                checks.append(Check(what: "call stream → music muted, agent / C floor, median" + (agentMeasurement == measurement ? "" : " (the agent after linking)"), server: server,
                                    measured: "\(ms(a)) / \(ms(f)) = \(String(format: "%.2fx", a / f))", target: "≤ 1.2x", holds: a / f <= 1.2))
                checks.append(Check(what: "the same at p95", server: server,
                                    measured: "\(ms(a95)) / \(ms(f95)) = \(String(format: "%.2fx", a95 / f95))", target: "≤ 1.5x", holds: a95 / f95 <= 1.5))
            }
            if let declared = row("interruption latency, declared call, as heard", server, "audiosessiond")?.medianSamples {
                if let s = row("interruption latency, as heard", server, "audiosessiond")?.medianSamples {
                    checks.append(Check(what: "declared call → music silent, as heard / the stream path", server: server,
                                        measured: "\(ms(declared)) / \(ms(s)) = \(String(format: "%.2fx", declared / s))", target: "≤ 1.5x", holds: declared / s <= 1.5))
                }
                // (Not one of the issue's targets: the same call against its own floor, a C client on the bus,
                // which tells what of the ratio above any D-Bus client pays.)
                if let f = row("interruption latency, declared call, as heard", server, Variant.busFloorName)?.medianSamples {
                    checks.append(Check(what: "declared call → music silent, as heard / the C floor on the bus", server: server,
                                        measured: "\(ms(declared)) / \(ms(f)) = \(String(format: "%.2fx", declared / f))", target: "none (for comparison)", holds: true))
                }
            }
            if let load = row("load: resident memory before / peak / idle after", server, "audiosessiond") {
                let values = load.median.split(separator: "/").compactMap(Row.leadingNumber)
                if values.count == 3 {
                    checks.append(Check(what: "agent RSS idle / after the load", server: server,
                                        measured: String(format: "%.1f / %.1f MB", values[0], values[2]), target: "< 20 / < 22 MB",
                                        holds: values[0] < 20 && values[2] < 22))
                }
            }
            if let idle = rows.first(where: { $0.measurement.hasPrefix("10 silent streams, 5 apps: agent CPU") && $0.server == server && $0.who == "audiosessiond" }),
               let percent = idle.leadingNumber {
                checks.append(Check(what: "agent CPU, 10 silent open streams", server: server, measured: String(format: "%.2f %%", percent),
                                    target: "≤ 0.5 %", holds: percent <= 0.5))
            }
        }
        return checks
    }

    static func render(_ checks: [Check]) -> String {
        var lines = ["| target | server | measured | target | holds |", "|---|---|---|---|---|"]
        for c in checks { lines.append("| \(c.what) | \(c.server) | \(c.measured) | \(c.target) | \(c.holds ? "yes" : "NO") |") }
        return lines.joined(separator: "\n")
    }
}
