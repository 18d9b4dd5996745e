// swift-tools-version: 6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "audiosession",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PulseClient", targets: ["PulseClient"]),
        .library(name: "AudioPolicy", targets: ["AudioPolicy"]),
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "AudioSession", targets: ["AudioSession"]),
        .executable(name: "audiosessionctl", targets: ["audiosessionctl"]),
        .executable(name: "audiosessiond", targets: ["audiosessiond"]),
        .executable(name: "audiosession-bench", targets: ["audiosession-bench"]),
        .executable(name: "audiosession-listen", targets: ["audiosession-listen"]),
        .executable(name: "audiosession-play", targets: ["audiosession-play"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // libpulse, from Debian's libpulse-dev. No pkgConfig: its -pthread/-D_REENTRANT flags only
        // make SwiftPM warn, and the headers are in /usr/include.
        .systemLibrary(name: "CLibPulse"),
        // What the sound server reports and is asked, as values: no libpulse (the core and the tower
        // use these; PulseClient fills and sends them).
        .target(name: "ServerModel", swiftSettings: strict),
        // The only code that touches libpulse.
        .target(name: "PulseClient", dependencies: ["CLibPulse", "ServerModel"], swiftSettings: strict),
        // libsystemd's sd-bus, from Debian's libsystemd-dev.
        .systemLibrary(name: "CSystemd"),
        // The only code that touches sd-bus: D-Bus connections, each on a thread of its own.
        .target(name: "DBus", dependencies: ["CSystemd"], swiftSettings: strict),
        // The pure policy core: no I/O, no clock.
        .target(name: "AudioPolicy", dependencies: ["ServerModel"], swiftSettings: strict),
        // org.audiosession on the session bus, as both ends speak it: names, errors, signals, routes.
        .target(name: "AudioSessionWire", dependencies: ["AudioPolicy", "DBus"], swiftSettings: strict),
        // The library apps use to declare their session to the agent (AVAudioSession's API).
        .target(name: "AudioSession", dependencies: ["AudioPolicy", "DBus", "AudioSessionWire"], swiftSettings: strict),
        // libpulse-simple, for the example app.
        .systemLibrary(name: "CLibPulseSimple"),
        // An app to copy: plays a WAV through libpulse inside a session (the AudioSession library).
        .executableTarget(name: "audiosession-play", dependencies: ["AudioSession", "AudioPolicy", "CLibPulseSimple"], swiftSettings: strict),
        // The control tower: every decision of the agent's shell as one pure machine (server events,
        // answers, app calls and the clock in; commands, journal lines, log lines, replies out). No I/O
        // and nothing of libpulse or sd-bus: it sees the server as ServerModel's values.
        .target(
            name: "AgentTower",
            dependencies: ["ServerModel", "AudioPolicy", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // The shell between the server and the policy core: the loop, the server and bus connections,
        // the state directory and its journal, around the tower.
        .target(
            name: "PolicyAgent",
            dependencies: [
                "AgentTower", "ServerModel", "PulseClient", "AudioPolicy", "DBus", "AudioSessionWire",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "audiosessiond",
            dependencies: [
                "PolicyAgent",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "audiosessionctl",
            dependencies: [
                "PulseClient", "AudioPolicy", "PolicyAgent", "DBus", "AudioSessionWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // The benchmark's floor: a minimal C client that mutes music when a call appears (or, with --bus,
        // when a call is declared on the session bus).
        .executableTarget(name: "audiosession-floor", linkerSettings: [.linkedLibrary("pulse"), .linkedLibrary("systemd")]),
        // The benchmark's load generator: one client, many streams.
        .executableTarget(name: "audiosession-load", linkerSettings: [.linkedLibrary("pulse")]),
        // The benchmark's ear: plays a tone as music and records the sink's monitor (the level as heard).
        .executableTarget(name: "audiosession-listen", linkerSettings: [.linkedLibrary("pulse"), .linkedLibrary("m")]),
        // scripts/soak: the agent through a seeded storm, on each server.
        .executableTarget(
            name: "audiosession-soak",
            dependencies: ["SoundServerTesting", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "audiosession-bench",
            dependencies: ["PulseClient", "AudioPolicy", "SoundServerTesting", "DBus", "AudioSessionWire", "AgentTower", "TowerTesting"],
            swiftSettings: strict
        ),
        // Private PulseAudio / PipeWire servers with imitation devices, and real client streams.
        .target(name: "SoundServerTesting", dependencies: ["PulseClient", "DBus", .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .testTarget(
            name: "AudioPolicyTests",
            dependencies: ["AudioPolicy", "ServerModel", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "AgentIntegrationTests",
            dependencies: [
                "PolicyAgent", "AgentTower", "AudioPolicy", "PulseClient", "SoundServerTesting", "audiosessiond", "DBus", "AudioSession",
                "audiosession-play",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // An in-memory sound server that imitates each server's memory, and the control tower on it
        // under a manual clock (TowerWorld): for the tower's tests and the shell's. No libpulse, no sd-bus.
        .target(name: "TowerTesting", dependencies: ["AgentTower", "AudioPolicy", "ServerModel"], swiftSettings: strict),
        // The control tower and its machines on the in-memory server: links no C library (no libpulse,
        // no sd-bus), as the core's tests do not.
        .testTarget(
            name: "AgentTowerTests",
            dependencies: ["AgentTower", "AudioPolicy", "ServerModel", "TowerTesting"],
            swiftSettings: strict
        ),
        // The agent's shell and its input, with no sound server: the tower with the journal file and
        // the policy files, the journal, bad input (policy files, what apps put in their properties, the
        // command line), in the process and through the built programs.
        .testTarget(
            name: "PolicyAgentTests",
            dependencies: [
                "PolicyAgent", "AgentTower", "AudioPolicy", "PulseClient", "SoundServerTesting", "TowerTesting", "audiosessionctl", "audiosessiond",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The D-Bus binding against bus daemons of the tests' own.
        .testTarget(name: "DBusTests", dependencies: ["DBus", "SoundServerTesting", "AudioSessionWire", "AudioPolicy"], swiftSettings: strict),
        .testTarget(
            name: "PulseClientIntegrationTests",
            dependencies: ["PulseClient", "AudioPolicy", "PolicyAgent", "SoundServerTesting", "audiosessionctl"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
