#!/usr/bin/python3
"""Plays a tone inside an audio session declared to audiosessiond over D-Bus (python3-dbus).

    audiosession-play.py [--category playback] [--mode default] [--option NAME]... [--silent] [--record]
                         [--title TITLE]

It declares its session (GetSession, SetCategory, SetActive), then plays a 440 Hz tone through
pacat, a child process: the agent counts the streams of the caller's children as the session's.
It pauses (stops pacat) when an interruption begins, and plays again when one ends with
shouldResume. With --silent it plays nothing (a call whose stream is not there yet, say). With
--record it also records from the microphone while active (parec, to nowhere), as a call does. With
--title it says what it plays (SetNowPlayingInfo), for the desktop's media controls.

It says what happens on standard output, one line each (tests read them):
    session PATH | active | error NAME MESSAGE | interruption began REASON |
    interruption ended [shouldResume] | playing | paused | route-change REASON from OUTPUTS | inactive |
    media-services-lost | media-services-reset | silence-hint begin|end |
    record-permission yes|no undetermined|denied|granted | recording |
    input-muted yes|no (InputMuteChanged: the microphone muted for every app, or by its own mute) |
    remote-command COMMAND (RemoteCommand: a media key while it is now playing; it obeys play, pause
    and play-pause) |
    muted-speech started|ended (MutedSpeechActivity: someone speaks into the microphone while its
    input is muted, a call)
Lines on standard input drive it: "deactivate" (with notifyOthersOnDeactivation),
"deactivate-quietly" (without), "activate", "ask-record-permission" (what a recorder asks before
it records: RequestRecordPermission, then the RecordPermission property), "mute-input" and
"unmute-input" (SetInputMuted: its own input), "quit".
"""
import argparse
import math
import struct
import subprocess
import sys
import threading
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

AGENT = "org.audiosession.Agent1"


def say(*words):
    print(*words, flush=True)


class Tone:
    """A 440 Hz tone through pacat, fed from a thread (pacat's pipe paces it)."""

    def __init__(self):
        self.process = None
        rate = 44100
        frame = b"".join(struct.pack("<hh", v, v) for v in (
            int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(rate // 10)))
        self.block = frame

    def play(self):
        if self.process:
            return
        self.process = subprocess.Popen(
            ["pacat", "--raw", "--format=s16le", "--rate=44100", "--channels=2",
             "--property=media.name=audiosession-play"], stdin=subprocess.PIPE)
        process = self.process

        def feed():
            try:
                while process.poll() is None:
                    process.stdin.write(self.block)
            except (BrokenPipeError, ValueError, OSError):
                pass
        threading.Thread(target=feed, daemon=True).start()
        say("playing")

    def pause(self):
        if not self.process:
            return
        self.process.terminate()
        self.process.wait()
        self.process = None
        say("paused")


class Recorder:
    """The microphone, recorded to nowhere through parec."""

    def __init__(self):
        self.process = None

    def start(self):
        if self.process:
            return
        self.process = subprocess.Popen(
            ["parec", "--raw", "--format=s16le", "--rate=16000", "--channels=1",
             "--property=media.name=audiosession-record"], stdout=subprocess.DEVNULL)
        say("recording")

    def stop(self):
        if not self.process:
            return
        self.process.terminate()
        self.process.wait()
        self.process = None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--category", default="playback")
    parser.add_argument("--mode", default="default")
    parser.add_argument("--option", action="append", default=[])
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--title")
    args = parser.parse_args()

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    agent = dbus.Interface(bus.get_object(AGENT, "/org/audiosession/Agent1"), AGENT)
    try:
        path = agent.GetSession()
    except dbus.DBusException as error:
        say("error", error.get_dbus_name(), error.get_dbus_message())
        return 2
    say("session", path)
    session = dbus.Interface(bus.get_object(AGENT, path), "org.audiosession.Session1")
    tone = Tone()
    recorder = Recorder()
    loop = GLib.MainLoop()

    def interruption(kind, options, reason):
        if kind == "began":
            say("interruption began", reason)
            tone.pause()
        else:
            say("interruption ended", *options)
            if "shouldResume" in options and not args.silent:
                tone.play()

    def route_change(reason, previous):
        before = ",".join(str(port["uid"]) for port in previous.get("outputs", []))
        say("route-change", reason, "from", before or "-")

    def lost():
        say("media-services-lost")

    def hint(kind):
        # Another app's non-mixable audio began or ended: a game would silence its music meanwhile.
        say("silence-hint", kind)

    def reset():
        say("media-services-reset")

    def input_mute(muted):
        # A call app would show its microphone as muted.
        say("input-muted", "yes" if muted else "no")

    bus.add_signal_receiver(interruption, "Interruption", "org.audiosession.Session1", AGENT, path)
    bus.add_signal_receiver(route_change, "RouteChange", "org.audiosession.Session1", AGENT, path)
    bus.add_signal_receiver(lost, "MediaServicesWereLost", "org.audiosession.Session1", AGENT, path)
    bus.add_signal_receiver(reset, "MediaServicesWereReset", "org.audiosession.Session1", AGENT, path)
    bus.add_signal_receiver(hint, "SilenceSecondaryAudioHint", "org.audiosession.Session1", AGENT, path)
    bus.add_signal_receiver(input_mute, "InputMuteChanged", "org.audiosession.Session1", AGENT, path)

    def muted_speech(activity):
        # A call app would say "you are muted" while the user talks.
        say("muted-speech", activity)

    bus.add_signal_receiver(muted_speech, "MutedSpeechActivity", "org.audiosession.Session1", AGENT, path)

    def remote_command(command):
        say("remote-command", command)
        if command == "pause" or (command == "play-pause" and tone.process):
            tone.pause()
        elif command in ("play", "play-pause") and not args.silent:
            tone.play()

    bus.add_signal_receiver(remote_command, "RemoteCommand", "org.audiosession.Session1", AGENT, path)

    def activate():
        try:
            session.SetActive(True, dbus.Array([], signature="s"))
        except dbus.DBusException as error:
            say("error", error.get_dbus_name(), error.get_dbus_message())
            return False
        say("active")
        if not args.silent:
            tone.play()
        if args.record:
            recorder.start()
        return True

    try:
        session.SetCategory(args.category, args.mode, dbus.Array(args.option, signature="s"))
        if args.title:
            session.SetNowPlayingInfo(dbus.Dictionary({"xesam:title": args.title}, signature="sv"))
    except dbus.DBusException as error:
        say("error", error.get_dbus_name(), error.get_dbus_message())
        return 2
    activate()

    def command(source, condition):
        line = sys.stdin.readline()
        if not line or line.strip() == "quit":
            tone.pause()
            recorder.stop()
            loop.quit()
            return False
        word = line.strip()
        if word in ("deactivate", "deactivate-quietly"):
            tone.pause()
            recorder.stop()
            options = ["notifyOthersOnDeactivation"] if word == "deactivate" else []
            # The agent may not have seen our stream end yet (it hears of it from the sound server, and
            # of this call from the bus): it then says IsBusy, as AVAudioSession does while I/O runs.
            # Asked again a moment later, it has.
            for attempt in range(5):
                try:
                    session.SetActive(False, dbus.Array(options, signature="s"))
                    say("inactive")
                    break
                except dbus.DBusException as error:
                    if error.get_dbus_name() == "org.audiosession.Error.IsBusy" and attempt < 4:
                        time.sleep(0.1)
                        continue
                    say("error", error.get_dbus_name(), error.get_dbus_message())
                    break
        elif word == "activate":
            activate()
        elif word in ("mute-input", "unmute-input"):
            try:
                session.SetInputMuted(word == "mute-input")
            except dbus.DBusException as error:
                say("error", error.get_dbus_name(), error.get_dbus_message())
        elif word == "ask-record-permission":
            try:
                allowed = session.RequestRecordPermission()
                state = dbus.Interface(bus.get_object(AGENT, path), dbus.PROPERTIES_IFACE).Get(
                    "org.audiosession.Session1", "RecordPermission")
                say("record-permission", "yes" if allowed else "no", state)
            except dbus.DBusException as error:
                say("error", error.get_dbus_name(), error.get_dbus_message())
        return True

    GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, command)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
