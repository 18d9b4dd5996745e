import DBus
import Foundation
import SoundServerTesting
import Synchronization
import Testing

/// The D-Bus binding against a real bus daemon of the test's own.
@Suite("D-Bus")
struct DBusTests {
    /// A private bus daemon and a connection to it, both gone after `body`.
    func withBus(_ body: (PrivateSessionBus, DBusConnection) async throws -> Void) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        let connection = try bus.connect()
        defer { connection.close() }
        try await body(bus, connection)
    }
    @Test("a method call: the daemon's own names, a D-Bus error as .remote")
    func calls() async throws { try await withBus { _, connection in
        let names = try await connection.callDaemon("ListNames")
        #expect(names.first?.array?.contains(.string("org.freedesktop.DBus")) == true, "\(names)")
        await #expect(throws: DBusError.self) {
            _ = try await connection.callDaemon("GetNameOwner",
                                          [.string("org.example.Nobody")])
        }
        do {
            _ = try await connection.callDaemon("GetNameOwner",
                                          [.string("org.example.Nobody")])
        } catch DBusError.remote(let name, _) {
            #expect(name == "org.freedesktop.DBus.Error.NameHasNoOwner")
        }
    } }

    @Test("signals of two rules in one stream, in the bus's order; a dictionary and variants read back")
    func signals() async throws { try await withBus { bus, watcher in
        let owner = try bus.connect()
        let stream = watcher.signals(matching: [
            "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.example.First'",
            "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.example.Second'",
        ])
        // (The matches are made in order on the watcher's thread before this call is sent.)
        _ = try await watcher.callDaemon("GetId")
        for name in ["org.example.First", "org.example.Second"] {
            _ = try await owner.callDaemon("RequestName",
                                     [.string(name), .uint32(0)])
        }
        var seen: [String] = []
        for await signal in stream {
            seen.append(signal.body.first?.string ?? "?")
            if seen.count == 2 { break }
        }
        #expect(seen == ["org.example.First", "org.example.Second"])
        // A dictionary of variants, sent and read back through the daemon's own echo of it.
        let credentials = try await watcher.callDaemon("GetConnectionCredentials", [.string("org.example.First")])
        #expect(credentials.first?.stringDictionary?["ProcessID"]?.integer == Int64(getpid()))
        owner.close()
    } }

    @Test("a match from others only is not handed the connection's own signals, another connection's are; a plain match is handed both", .timeLimit(.minutes(1)))
    func ownSignalsDropped() async throws { try await withBus { bus, watcher in
        let other = try bus.connect()
        let rule = "type='signal',interface='org.example.Ticks',member='Tick'"
        let others = watcher.signals(matching: rule, fromOthersOnly: true)
        let all = watcher.signals(matching: rule)
        _ = try await watcher.callDaemon("GetId")  // (the matches are made)
        watcher.emit("/org/example/Ticks", "org.example.Ticks", "Tick", [.string("own")])
        _ = try await watcher.callDaemon("GetId")  // (its own signal has come back by now, if it comes)
        other.emit("/org/example/Ticks", "org.example.Ticks", "Tick", [.string("other")])
        func first(_ count: Int, of stream: AsyncStream<DBusSignal>) async -> [String] {
            var seen: [String] = []
            for await signal in stream {
                seen.append(signal.body.first?.string ?? "?")
                if seen.count == count { break }
            }
            return seen
        }
        #expect(await first(1, of: others) == ["other"])
        #expect(await first(2, of: all) == ["own", "other"])
        other.close()
    } }

    @Test("the daemon killed: lost() tells, calls fail with .disconnected, streams end; after close() nothing hangs")
    func lost() async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        let connection = try bus.connect()
        let lost = connection.lost()
        let stream = connection.signals(matching: "type='signal',member='NameOwnerChanged'")
        _ = try await connection.callDaemon("GetId")
        await bus.kill()
        var told = false
        for await _ in lost { told = true }
        #expect(told)
        for await _ in stream {}
        await #expect(throws: DBusError.disconnected) {
            _ = try await connection.callDaemon("GetId")
        }
        connection.close()
        for await _ in connection.lost() {}  // (ends at once: lost already)

        try await bus.startAgain()
        let second = try bus.connect()
        second.close()
        for await _ in second.lost() {}  // ends once closed, without a yield
        for await _ in second.signals(matching: "type='signal'") {}
        await #expect(throws: DBusError.disconnected) {
            _ = try await second.callDaemon("GetId")
        }
    }

    @Test("a call queue's calls carry the stamp the bus thread read as it took them, and none without a stamp; finished, it takes none")
    func queueStamps() async throws { try await withBus { bus, service in
        let client = try bus.connect()
        defer { client.close() }
        let counter = Mutex(0)
        let (taken, took) = AsyncStream.makeStream(of: DBusIncomingCall.self)
        let stamped = DBusCallQueue(stamp: { counter.withLock { $0 += 1; return .milliseconds($0) } }, handler: { call, _ in took.yield(call) })
        let plain = DBusCallQueue(handler: { call, _ in took.yield(call) })
        service.export("/org/example/Stamped", into: stamped)
        service.export("/org/example/Plain", into: plain)
        try await service.requestName("org.example.Stamps")
        var calls = taken.makeAsyncIterator()
        for (path, expected) in [("/org/example/Stamped", Duration?.some(.milliseconds(1))), ("/org/example/Plain", nil)] {
            async let answer = client.call("org.example.Stamps", path, "org.example.Stamps", "Ping")
            let incoming = await calls.next()
            #expect(incoming?.received == expected, "\(path)")
            #expect(incoming?.call.member == "Ping")
            incoming?.reply(.values([]))
            _ = try await answer
        }
        plain.finish()
        await #expect(throws: DBusError.self) {
            _ = try await client.call("org.example.Stamps", "/org/example/Plain", "org.example.Stamps", "Ping")
        }
    } }

    @Test("no daemon at the address: a clear error naming it")
    func noBus() {
        #expect(throws: DBusError.self) { _ = try DBusConnection.connect(.session, address: "unix:path=/nonexistent/bus") }
        do {
            _ = try DBusConnection.connect(.session, address: "unix:path=/nonexistent/bus")
        } catch {
            #expect("\(error)".contains("/nonexistent/bus"), "\(error)")
        }
    }

    @Test("an exported object: calls answered with values or a D-Bus error, the caller known, signals emitted")
    func exportedObject() async throws { try await withBus { bus, service in
        let client = try bus.connect()
        defer { client.close() }
        service.export("/org/example/Echo") { [service] call in
            switch call.member {
            case "Echo":
                return .values(call.arguments)
            case "WhoAmI":
                let pid = try? await service.callDaemon("GetConnectionUnixProcessID", [.string(call.sender)]).first
                return .values([pid ?? .uint32(0)])
            default:
                return .error(name: "org.example.Error.Unknown", message: "no method \(call.member)")
            }
        }
        try await service.requestName("org.example.Echo")
        await #expect(throws: DBusError.self) { try await client.requestName("org.example.Echo") }

        let values: [DBusValue] = [.string("héllo"), .bool(true), .uint32(7), .variant(.int64(-3)),
                                   .dictionary(keySignature: "s", valueSignature: "v", [.string("k"): .variant(.double(0.5))]),
                                   .structure([.string("a"), .objectPath("/b")]), .array(elementSignature: "s", [])]
        let echoed = try await client.call("org.example.Echo", "/org/example/Echo", "org.example.Echo", "Echo", values)
        #expect(echoed == values)
        let me = try await client.call("org.example.Echo", "/org/example/Echo", "org.example.Echo", "WhoAmI")
        #expect(me.first?.integer == Int64(getpid()))
        do {
            _ = try await client.call("org.example.Echo", "/org/example/Echo", "org.example.Echo", "Nope")
            Issue.record("an unknown method answered")
        } catch DBusError.remote(let name, let message) {
            #expect(name == "org.example.Error.Unknown")
            #expect(message == "no method Nope")
        }

        let signals = client.signals(matching: "type='signal',interface='org.example.Echo',member='Changed'")
        _ = try await client.callDaemon("GetId")
        service.emit("/org/example/Echo", "org.example.Echo", "Changed", [.string("now")])
        for await signal in signals {
            #expect(signal.path == "/org/example/Echo")
            #expect(signal.body == [.string("now")])
            break
        }
    } }
}
