import ArgumentParser
import Foundation
import PolicyAgent

/// `audiosessionctl permission [APP allow|deny|reset]`: the user's record-permission decisions, which
/// the agent reads when an app asks (`RequestRecordPermission`). A denied app records silence.
struct Permission: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the apps allowed or denied to record, or decide for one (allow, deny, reset).",
        discussion: "APP is a Flatpak app id, else the program's file name. A decision applies the next time the app asks.")

    @Argument(help: "The app (nothing: list the decisions).")
    var app: String?

    @Argument(help: "allow, deny or reset.")
    var decision: String?

    @Option(name: .customLong("state-dir"), help: "The agent's state directory. Default: $XDG_STATE_HOME/audiosession.")
    var stateDir: String?

    func validate() throws {
        if let app, !RecordPermissions.isName(app) {
            throw ValidationError("'\(Escape.forDisplay(String(app.prefix(80))))' is not an app name (printable, no spaces, at most 255 bytes)")
        }
        if app != nil, decision == nil { throw ValidationError("say allow, deny or reset for \(app!)") }
        if let decision, !["allow", "deny", "reset"].contains(decision) {
            throw ValidationError("'\(Escape.forDisplay(String(decision.prefix(40))))' is none of allow, deny, reset")
        }
    }

    func run() async throws {
        try await reporting {
            var path = stateDir ?? ""
            if stateDir == nil {
                do { path = try StateDirectory.defaultPath(environment: ProcessInfo.processInfo.environment) } catch { throw Failure("\(error)") }
            }
            // (Made only to write a decision in: a list needs no directory.)
            let directory: StateDirectory?
            do { directory = try StateDirectory.open(path, creating: decision != nil) } catch let error as StateDirectoryError where error.kind == .missing && decision == nil {
                directory = nil
            } catch {
                throw Failure("\(error)")
            }
            var store = RecordPermissions.read(in: directory)
            if let app, let decision, let directory {
                store.set(app, decision == "reset" ? nil : decision == "allow")
                do { try store.write(in: directory) } catch { throw Failure("\(error)") }
                print("\(Escape.forDisplay(app)): \(decision == "reset" ? "undetermined" : decision == "allow" ? "granted" : "denied")")
                return
            }
            if store.decisions.isEmpty { print("no decisions: every app may record (undetermined)") }
            for name in store.decisions.keys.sorted() {
                print("\(Escape.forDisplay(name)): \(store.decisions[name]! ? "granted" : "denied")")
            }
        }
    }
}
