import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing

/// audiosessiond against a private PipeWire 1.4 (WirePlumber 0.5).
@Suite("audiosessiond on PipeWire 1.4", .serialized, .timeLimit(.minutes(2)))
struct AgentOnPipeWire14 {
    let kind = ServerKind.pipewire14

    @Test("PipeWire 1.4: agent: call interrupts and resumes music")
    func callInterruptsAndResumesMusic() async throws { try await AgentScenarios.callInterruptsAndResumesMusic(kind) }
    @Test("PipeWire 1.4: agent: two players do not mix")
    func twoPlayersDoNotMix() async throws { try await AgentScenarios.twoPlayersDoNotMix(kind) }
    @Test("PipeWire 1.4: agent: a chain of three players ends with the first playing (issue 10 case 2)")
    func chainOfThreePlayers() async throws { try await AgentScenarios.chainOfThreePlayersEndsWithTheFirstPlaying(kind) }
    @Test("PipeWire 1.4: agent: ambient mixes")
    func ambientMixes() async throws { try await AgentScenarios.ambientMixes(kind) }
    @Test("PipeWire 1.4: agent: duck others lowers and restores")
    func duckOthersLowersAndRestores() async throws { try await AgentScenarios.duckOthersLowersAndRestores(kind) }
    @Test("PipeWire 1.4: agent: a screen reader's voice open and silent ducks nothing; speaking, it ducks the music; silent, the music is back")
    func openSilentVoiceDucksOnlyWhileItSpeaks() async throws { try await AgentScenarios.openSilentVoiceDucksOnlyWhileItSpeaks(kind) }
    @Test("PipeWire 1.4: agent: an app that records from the microphone while it plays is a call")
    func recordingWhilePlayingIsACall() async throws { try await AgentScenarios.recordingWhilePlayingIsACall(kind) }
    @Test("PipeWire 1.4: agent: a server that stops answering during a call is taken as lost, and the call held again when it serves (issue 20 case 3)")
    func stalledServerKeepsTheCall() async throws { try await AgentScenarios.stalledServerKeepsTheCall(kind) }
    @Test("PipeWire 1.4: agent: a stream interrupted and ducked that goes away leaves nothing in the server's memory (issue 20 case 7b)")
    func interruptedAndDuckedLeavesNoMemory() async throws { try await AgentScenarios.interruptedAndDuckedLeavesNoMemory(kind) }
    @Test("PipeWire 1.4: agent: record silences output")
    func recordSilencesOutput() async throws { try await AgentScenarios.recordSilencesOutput(kind) }
    @Test("PipeWire 1.4: agent: a player started during a call does not keep the mute the server remembered from us")
    func newStreamDoesNotInheritOurMute() async throws { try await AgentScenarios.newStreamDoesNotInheritOurMute(kind) }
    @Test("PipeWire 1.4: agent: a server restart during a call leaves no remembered mute")
    func restartDuringHoldLeavesNoTrace() async throws { try await AgentScenarios.restartDuringHoldLeavesNoTrace(kind) }
    @Test("PipeWire 1.4: agent: a player started during a duck does not keep the volume the server remembered from us")
    func newStreamDoesNotInheritOurDuck() async throws { try await AgentScenarios.newStreamDoesNotInheritOurDuck(kind) }
    @Test("PipeWire 1.4: agent: capturing what a sink plays silences nothing")
    func monitorCaptureSilencesNothing() async throws { try await AgentScenarios.monitorCaptureSilencesNothing(kind) }
    @Test("PipeWire 1.4: agent: microphone deny records silence")
    func microphoneDenyRecordsSilence() async throws { try await AgentScenarios.microphoneDenyRecordsSilence(kind) }
    @Test("PipeWire 1.4: agent: remembered volumes untouched")
    func rememberedVolumesUntouched() async throws { try await AgentScenarios.rememberedVolumesUntouched(kind) }
    @Test("PipeWire 1.4: agent: the user's mute of a stream started during a duck wins")
    func userMuteOfANewStreamDuringADuckWins() async throws { try await AgentScenarios.userMuteOfANewStreamDuringADuckWins(kind) }
    @Test("PipeWire 1.4: agent: an app's 60,000-character name is shortened in every log line (issue 20 case 9)")
    func longAppNamesAreShortened() async throws { try await AgentScenarios.longAppNamesAreShortenedInTheLog(kind) }
    @Test("PipeWire 1.4: agent: user volume change wins")
    func userVolumeChangeWins() async throws { try await AgentScenarios.userVolumeChangeWins(kind) }
    @Test("PipeWire 1.4: agent: route reasons")
    func routeReasons() async throws { try await AgentScenarios.routeReasons(kind) }
    @Test("PipeWire 1.4: agent: a Bluetooth headset switches to hands-free for a call and back")
    func bluetoothHeadsetSwitchesProfileForACall() async throws { try await AgentScenarios.bluetoothHeadsetSwitchesProfileForACall(kind) }
    @Test("PipeWire 1.4: agent: a Bluetooth headset switches for a call, the server's own autoswitch off")
    func bluetoothHeadsetSwitchedByTheAgentAlone() async throws {
        try await AgentScenarios.bluetoothHeadsetSwitchesProfileForACall(kind, serverAutoswitch: false)
    }
    @Test("PipeWire 1.4: agent: Bluetooth headphones without hands-free stay in A2DP for a call")
    func bluetoothHeadphonesWithoutHandsFree() async throws { try await AgentScenarios.bluetoothHeadphonesWithoutHandsFree(kind) }
    @Test("PipeWire 1.4: agent: a default device the user picks stands until a new device comes")
    func userChosenDefaultDeviceStands() async throws { try await AgentScenarios.userChosenDefaultDeviceStands(kind) }
    @Test("PipeWire 1.4: agent: a default the user picks right after plugging a device in stands (issue 23)")
    func userPickRightAfterPluggingStands() async throws { try await AgentScenarios.userPickRightAfterPluggingStands(kind) }
    @Test("PipeWire 1.4: agent: music on the speaker by its policy file's output, a call on the USB headset, at once (issue 23)")
    func musicAndACallOnTwoOutputs() async throws { try await AgentScenarios.musicAndACallOnTwoOutputs(kind) }
    @Test("PipeWire 1.4: agent: preferred outputs per category and per app in outputs.yaml: music on the speaker by its category, an app named there on the headset by its own (issue 23)")
    func outputsPerCategoryAndApp() async throws { try await AgentScenarios.outputsPerCategoryAndApp(kind) }
    @Test("PipeWire 1.4: agent: a stream following the default that the user moves stays where the user put it when its preferred output comes (issue 23)")
    func userMoveOfAStreamFollowingTheDefaultStands() async throws { try await AgentScenarios.userMoveOfAStreamFollowingTheDefaultStands(kind) }
    @Test("PipeWire 1.4: agent: an alarm whose policy says everywhere is heard on the USB headset and the speaker at once, through a sink of the agent's that goes with it (issue 23)")
    func alarmOnEveryOutput() async throws { try await AgentScenarios.alarmOnEveryOutput(kind) }
    @Test("PipeWire 1.4: agent: a stream moved off the default that ends leaves the server remembering no device for its role (issue 23)")
    func movedStreamThatEndsLeavesNoMemory() async throws { try await AgentScenarios.movedStreamThatEndsLeavesNoMemory(kind) }
    @Test("PipeWire 1.4: agent: a stream the user moves off its policy's output stays where the user put it (issue 23)")
    func userMoveOfAPreferredStreamStands() async throws { try await AgentScenarios.userMoveOfAPreferredStreamStands(kind) }
    @Test("PipeWire 1.4: agent: a USB headset plugged twice: the user's pick with it comes back the second time, not for a set never seen (issue 23)")
    func pickComesBackWithItsDevices() async throws { try await AgentScenarios.pickComesBackWithItsDevices(kind) }
    @Test("PipeWire 1.4: agent: bad policy files are rejected")
    func badPolicyFilesAreRejected() async throws { try await AgentScenarios.badPolicyFilesAreRejected(kind) }
    @Test("PipeWire 1.4: agent: stop undoes everything")
    func stopUndoesEverything() async throws { try await AgentScenarios.stopUndoesEverything(kind) }
    @Test("PipeWire 1.4: agent: server restart is reapplied")
    func serverRestartIsReapplied() async throws { try await AgentScenarios.serverRestartIsReapplied(kind) }
    @Test("PipeWire 1.4: agent: a call pauses mpv through MPRIS and plays it again after")
    func callPausesAndResumesThePlayer() async throws { try await PlayerScenarios.callPausesAndResumesThePlayer(kind) }
    @Test("PipeWire 1.4: agent: the media keys (audiosessionctl play-pause) go to the player now playing, of two real ones, also through a call; the agent's MPRIS player mirrors its status and title (issue 24)")
    func mediaKeysGoToWhatIsNowPlaying() async throws { try await PlayerScenarios.mediaKeysGoToWhatIsNowPlaying(kind) }
    @Test("PipeWire 1.4: agent: mpv paused by the user before a call stays paused after it")
    func playerPausedBeforeTheCallStaysPaused() async throws { try await PlayerScenarios.playerPausedBeforeTheCallStaysPaused(kind) }
    @Test("PipeWire 1.4: agent: mpv played and paused by the user during a call is left as the user left it")
    func playerTouchedDuringTheCallIsLeftAlone() async throws { try await PlayerScenarios.playerTouchedDuringTheCallIsLeftAlone(kind) }
    @Test("PipeWire 1.4: agent: the session bus dies (players muted only) and comes back (paused again)")
    func sessionBusDiesAndComesBack() async throws { try await PlayerScenarios.sessionBusDiesAndComesBack(kind) }
    @Test("PipeWire 1.4: agent: no session bus at all: a call mutes the music, and the absence is said once")
    func noSessionBusMutesOnly() async throws { try await PlayerScenarios.noSessionBusMutesOnly(kind) }
    @Test("PipeWire 1.4: agent: the screen reader pauses a podcast in mpv (spoken audio) rather than ducking it")
    func screenReaderPausesAPodcast() async throws { try await PlayerScenarios.screenReaderPausesAPodcast(kind) }
    @Test("PipeWire 1.4: agent: the screen lock (logind) silences a game, not the music; the unlock brings it back")
    func screenLockSilencesAmbient() async throws { try await DesktopScenarios.screenLockSilencesAmbient(kind) }
    @Test("PipeWire 1.4: agent: a device that comes just after waking (logind) is logged as wakeFromSleep")
    func deviceAfterWakingIsWakeFromSleep() async throws { try await DesktopScenarios.deviceAfterWakingIsWakeFromSleep(kind) }
    @Test("PipeWire 1.4: agent: headphones gone pause mpv through MPRIS; back, they start nothing")
    func headphonesGonePauseThePlayer() async throws { try await PlayerScenarios.headphonesGonePauseThePlayer(kind) }
    @Test("PipeWire 1.4: agent: a declared call (D-Bus) silences a declared player at its activation; its end says shouldResume")
    func declaredCallInterruptsADeclaredPlayer() async throws { try await AppScenarios.declaredCallInterruptsADeclaredPlayer(kind) }
    @Test("PipeWire 1.4: agent: music during a declared call is refused (InsufficientPriority), a mode its category refuses too (IncompatibleCategory)")
    func refusalsAreNamedErrors() async throws { try await AppScenarios.refusalsAreNamedErrors(kind) }
    @Test("PipeWire 1.4: agent: a declared call killed with -9 ends: the player it interrupted may resume, and plays again")
    func killedCallEndsItsSession() async throws { try await AppScenarios.killedCallEndsItsSession(kind) }
    @Test("PipeWire 1.4: agent: another app's session is refused, malformed calls are errors that say what was wrong")
    func anothersSessionAndMalformedCalls() async throws { try await AppScenarios.anothersSessionAndMalformedCalls(kind) }
    @Test("PipeWire 1.4: agent: a flood of calls from one app is answered, bounded, and the agent goes on")
    func floodOfCalls() async throws { try await AppScenarios.floodOfCalls(kind) }
    @Test("PipeWire 1.4: agent: a declared call's end without notifyOthersOnDeactivation says ended without shouldResume")
    func quietEndDoesNotResume() async throws { try await AppScenarios.quietEndDoesNotResume(kind) }
    @Test("PipeWire 1.4: agent: a policy file with declare: no-calls keeps its app from declaring a call")
    func policyFileLimitsDeclaring() async throws { try await AppScenarios.policyFileLimitsDeclaring(kind) }
    @Test("PipeWire 1.4: agent: a policy file that says declare: deny keeps its app from declaring a session, and says why")
    func policyFileDeniesDeclaring() async throws { try await AppScenarios.policyFileDeniesDeclaring(kind) }
    @Test("PipeWire 1.4: agent: a mixable session is told when another app's non-mixable audio begins and ends (SilenceSecondaryAudioHint)")
    func silenceHintReachesAMixableSession() async throws { try await AppScenarios.silenceHintReachesAMixableSession(kind) }
    @Test("PipeWire 1.4: agent: audiosessionctl status says why the music is silent (interrupted by the declared call, since when, what is held)")
    func statusExplainsTheSilence() async throws { try await AppScenarios.statusExplainsTheSilence(kind) }
    @Test("PipeWire 1.4: agent: the record permission as the user decided it: denied, the app is told so and records silence")
    func recordPermissionAsTheUserDecided() async throws { try await AppScenarios.recordPermissionAsTheUserDecided(kind) }
    @Test("PipeWire 1.4: agent: a sandboxed caller that forked and let its parent exit is refused, not taken for an unsandboxed app (issue 20 case 6)")
    func sandboxedCallerWhoseParentLeft() async throws { try await AppScenarios.aSandboxedCallerWhoseParentLeftIsRefused(kind) }
    @Test("PipeWire 1.4: agent: a sandboxed app (Flatpak) is told the desktop portal's record permission, which wins over the agent's own store")
    func sandboxedAppIsToldThePortalsDecision() async throws { try await AppScenarios.sandboxedAppIsToldThePortalsDecision(kind) }
    @Test("PipeWire 1.4: agent: a stuck desktop portal holds up only the sandboxed app that waits for it; gone, the agent's own store decides")
    func stuckPortalHoldsUpNoOtherApp() async throws { try await AppScenarios.stuckPortalHoldsUpNoOtherApp(kind) }
    @Test("PipeWire 1.4: agent: the Swift library's session is told a media key while now playing (issue 24), an interruption by a declared call, and to resume")
    func libraryIsToldOfAnInterruption() async throws { try await LibraryScenarios.libraryIsToldOfAnInterruption(kind) }
    @Test("PipeWire 1.4: agent: the Swift library's refusals carry Apple's codes; route and inputs read; its own input mute told and read (issue 24)")
    func libraryErrorsAndRoute() async throws { try await LibraryScenarios.libraryErrorsAndRoute(kind) }

    @Test("PipeWire 1.4: the AudioSession library: a call muted by itself is told of speech on its microphone (mutedSpeechActivity), and of its end (issue 24)")
    func libraryIsToldOfSpeechWhileMuted() async throws { try await LibraryScenarios.libraryIsToldOfSpeechWhileMuted(kind) }
    @Test("PipeWire 1.4: agent: the Swift example (the library, libpulse) pauses for a declared call and plays again after")
    func swiftExamplePausesAndPlaysAgain() async throws { try await LibraryScenarios.swiftExamplePausesAndPlaysAgain(kind) }
    @Test("PipeWire 1.4: agent: silent mode (D-Bus) silences an ambient app, and gives it back")
    func silentModeSilencesAmbient() async throws { try await AppScenarios.silentModeSilencesAmbient(kind) }
    @Test("PipeWire 1.4: agent: the microphone muted for every app (audiosessionctl mic) and a declared call's own input mute: told, captures muted, one started later too, and given back (issue 24)")
    func inputMuteReachesEveryApp() async throws { try await AppScenarios.inputMuteReachesEveryApp(kind) }

    @Test("PipeWire 1.4: agent: two real players, VLC and mpv: the media keys go to the one that last started playing, through its interruptions; the other takes them when it quits (issue 24)")
    func keysGoToTheRightOneOfTwoRealPlayers() async throws { try await PlayerScenarios.keysGoToTheRightOneOfTwoRealPlayers(kind) }

    @Test("PipeWire 1.4: agent: its MPRIS player's Position follows mpv's, says mpv's seek (Seeked), and stays while paused (issue 24)")
    func agentsPlayerFollowsThePosition() async throws { try await PlayerScenarios.agentsPlayerFollowsThePosition(kind) }

    @Test("PipeWire 1.4: agent: one app's microphone muted by its program's name (audiosessionctl mic mute APP): its captures, a later one too, not another's; a declared call so muted is told; given back (issue 24)")
    func oneAppsMicrophoneMuted() async throws { try await AppScenarios.oneAppsMicrophoneMuted(kind) }

    @Test("PipeWire 1.4: agent: a muted call is told when someone speaks into its microphone (MutedSpeechActivity started, then ended), not while it is quiet, and not once unmuted (issue 24)")
    func aMutedCallIsToldOfSpeech() async throws { try await AppScenarios.aMutedCallIsToldOfSpeech(kind) }
    @Test("PipeWire 1.4: agent: a declared player now playing is told the media keys (RemoteCommand) and obeys them; the agent's MPRIS player shows its title (issue 24)")
    func declaredPlayerToldTheMediaKeys() async throws { try await AppScenarios.aDeclaredPlayerIsToldTheMediaKeys(kind) }
    @Test("PipeWire 1.4: agent: a server restart tells a declared session its media services were lost, then reset")
    func mediaServicesLostAndReset() async throws { try await AppScenarios.mediaServicesLostAndReset(kind) }
    @Test("PipeWire 1.4: agent: route changes reach a declared session with their reasons")
    func routeChangesReachADeclaredSession() async throws { try await AppScenarios.routeChangesReachADeclaredSession(kind) }
    @Test("PipeWire 1.4: agent: without logind, the desktop's screen saver (session bus) says the lock")
    func screenSaverLockWithoutLogind() async throws { try await DesktopScenarios.screenSaverLockWithoutLogind(kind) }
    @Test("PipeWire 1.4: agent: WirePlumber's role-based policy configured: said, a call still silences the music, no stream is moved off its role sink, the role sinks' loopbacks are held by nobody")
    func serverRolePolicyIsNotFought() async throws { try await Self.serverRolePolicyIsNotFought() }
}

extension AgentOnPipeWire14 {
    /// WirePlumber 0.5's role-based policy configured (role sinks, as a distribution or a user may set
    /// up): it links music to its multimedia role sink and a call to its communication role sink.
    /// pipewire-pulse 1.4.2 may not list those sinks (then the streams show a sink index no listed sink
    /// has), and each role sink's output is a loopback stream with no client. The agent says it sees
    /// that policy, silences the music for the call as everywhere, never moves a stream off its role
    /// sink, and holds no loopback.
    static func serverRolePolicyIsNotFought() async throws {
        let log = LogRecorder()
        // (The user's choice of the speaker below is taken at once: no device is coming or going.)
        var settings = AgentSettings()
        settings.policy.deviceChurnSettles = .zero
        try await withAgent(.pipewire14, devices: [.speaker, .internalMic, .usbHeadset], roleSinks: true, settings: settings,
                            logger: log.logger) { w in
            // The speaker is the default while the USB headset is there (WirePlumber's choice, else the
            // user's): a call's route (headset-class first) is then not the default's, and the agent
            // would move the call's stream to the headset.
            // (Asked through a connection of its own: the observer's may have missed WirePlumber's choice.)
            if try await w.server.defaultSinkName() != "builtin_speaker" {
                try await w.observer.setDefault(deviceName: "builtin_speaker", direction: .output)
            }
            try await w.waitForAgent("the speaker as the default route") { $0.systemRoute.outputs.first?.uid == "builtin_speaker" }
            let song = try w.play(["media.role": "music"], name: "Music")
            /// On one of the role sinks: pipewire-pulse lists them or not (seen both ways, from one start
            /// to the next): a sink it does not list, or one named as WirePlumber's role sinks are.
            @Sendable func onARoleSink(_ stream: ClientStream, _ s: Snapshot) -> AudioStream? {
                stream.find(in: s).flatMap { found in
                    guard found.device != nil else { return nil }
                    let sink = s.device(of: found)
                    return sink == nil || sink?.name.hasPrefix("input.loopback.sink.role.") == true ? found : nil
                }
            }
            let music = try await w.observer.wait(for: "the music on a role sink") { onARoleSink(song, $0) }
            try await w.waitForAgent("the agent to see the role sinks' loopback", agent: { _ in
                log.count(containing: "the server links streams by role itself") > 0
            })
            let call = try w.play(["media.role": "phone"], name: "Call")
            let onRoleSink: AudioStream
            do {
                onRoleSink = try await w.observer.wait(for: "the call on a role sink") { onARoleSink(call, $0) }
            } catch {
                let seen = call.find(in: w.observer.snapshot).map { "device \($0.device.map(String.init) ?? "none"), corked \($0.isCorked)" } ?? "gone"
                let said = log.lines.suffix(40).joined(separator: "\n")
                Issue.record("\(error): the call's stream: \(seen); sinks: \(w.observer.snapshot.sinks.values.map(\.name)); the agent said:\n\(said)")
                throw error
            }
            try await w.waitMuted(song, true, "the music silenced by the call")
            try await w.waitForAgent("the call routed to the headset") { state in
                state.sessions.values.contains { $0.configuration.mode == .voiceChat && $0.route.outputs.first?.uid == "usb_headset" }
            }
            try await w.settle()
            #expect(call.find(in: w.observer.snapshot)?.device == onRoleSink.device, "the call left on its role sink")
            #expect(song.find(in: w.observer.snapshot)?.device == music.device, "the music left on its role sink")
            let loopbacks = w.observer.snapshot.sinkInputs.values.filter { $0.properties["node.link-group"] != nil && $0.client == nil }
            #expect(!loopbacks.isEmpty, "the role sinks' outputs are seen")
            #expect(loopbacks.allSatisfy { !$0.isMuted }, "no loopback held")
            call.stop()
            try await w.waitMuted(song, false, "the music back after the call")
            #expect(log.count(containing: "the server links streams by role itself") == 1)
        }
    }
}
