/*
 * audiosession-listen: the music as heard, for the benchmark.
 *
 * Plays a steady tone as a music stream (media.role=music; a 1 kHz square wave of amplitude 0.5, so
 * that every 1 ms block peaks at its level) to a sink and records that sink's monitor in 1 ms blocks.
 * Each time the level heard moves by more than a fiftieth of the tone's since the last line, it writes "<CLOCK_MONOTONIC microseconds> <peak 0..1>" to stdout (flushed), so
 * the benchmark can tell when silence (or a lowered level) reached the sink's output. The first line
 * says "ready <sink-input index of the tone>" once the tone plays.
 *
 * With --voice, it also plays a voice as a screen reader's speech-dispatcher does (media.role=a11y):
 * a stream open from the start, writing silence, that speaks (quiet noise, -34 dBFS) from SIGUSR1
 * until SIGUSR2. That voice alone is heard through a capture of its own stream (as the agent's meters
 * hear a stream, but in 1 ms blocks); each time it becomes audible or silent, a line
 * "voice <CLOCK_MONOTONIC microseconds> <1|0>" says so. "voice-ready <sink-input index>" once it is open.
 * With --voice-only, only that voice (on the default sink unless --sink): no tone, no ear.
 */
#include <signal.h>
#include <math.h>
#include <stdint.h>
#include <pulse/pulseaudio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RATE 48000
#define AMPLITUDE 0.5f
#define BLOCK_FRAMES (RATE / 1000)

static double phase; /* in periods */
static float printed = -1;
static int announced;
static pa_stream *tone, *ear, *voice, *voice_ear;
static const char *sink;
static int with_voice, voice_only, speaking, voice_heard = -1;

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void fail(pa_context *c, const char *what) {
    fprintf(stderr, "audiosession-listen: %s: %s\n", what, pa_strerror(pa_context_errno(c)));
    exit(1);
}

static void on_write(pa_stream *s, size_t bytes, void *userdata) {
    (void) userdata;
    float *data;
    if (pa_stream_begin_write(s, (void **) &data, &bytes) < 0) return;
    size_t frames = bytes / (2 * sizeof(float));
    for (size_t i = 0; i < frames; i++) {
        /* A 1 kHz square wave: every 1 ms block of it peaks at the full amplitude. */
        float v = phase < 0.5 ? AMPLITUDE : -AMPLITUDE;
        data[2 * i] = data[2 * i + 1] = v;
        phase += 1000.0 / RATE;
        if (phase >= 1) phase -= 1;
    }
    pa_stream_write(s, data, frames * 2 * sizeof(float), NULL, 0, PA_SEEK_RELATIVE);
}

static void on_read(pa_stream *s, size_t bytes, void *userdata) {
    (void) userdata;
    long long t = now_us();
    const void *raw;
    while (pa_stream_readable_size(s) > 0) {
        if (pa_stream_peek(s, &raw, &bytes) < 0 || bytes == 0) return;
        if (raw) {
            const float *data = raw;
            size_t n = bytes / sizeof(float);  /* two channels, interleaved */
            for (size_t start = 0; start < n; start += 2 * BLOCK_FRAMES) {
                float peak = 0;
                for (size_t i = start; i < n && i < start + 2 * BLOCK_FRAMES; i++) peak = fmaxf(peak, fabsf(data[i]));
                if (printed < 0 || fabsf(peak - printed) > AMPLITUDE / 50) {
                    printed = peak;
                    printf("%lld %.3f\n", t, peak);
                    fflush(stdout);
                }
            }
        }
        pa_stream_drop(s);
    }
}

/* The voice: silence, or quiet noise while speaking. */
static void on_voice_write(pa_stream *s, size_t bytes, void *userdata) {
    (void) userdata;
    float *data;
    static uint32_t seed = 1;
    if (pa_stream_begin_write(s, (void **) &data, &bytes) < 0) return;
    size_t n = bytes / sizeof(float);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        data[i] = speaking ? ((float) (seed >> 8) / (float) (1u << 24) - 0.5f) * 0.04f : 0.0f;
    }
    pa_stream_write(s, data, n * sizeof(float), NULL, 0, PA_SEEK_RELATIVE);
}

/* The voice as heard on its own: a line each time it becomes audible or silent. */
static void on_voice_read(pa_stream *s, size_t bytes, void *userdata) {
    (void) userdata;
    long long t = now_us();
    const void *raw;
    while (pa_stream_readable_size(s) > 0) {
        if (pa_stream_peek(s, &raw, &bytes) < 0 || bytes == 0) return;
        if (raw) {
            const float *data = raw;
            size_t n = bytes / sizeof(float);
            for (size_t start = 0; start < n; start += BLOCK_FRAMES) {
                float peak = 0;
                for (size_t i = start; i < n && i < start + BLOCK_FRAMES; i++) peak = fmaxf(peak, fabsf(data[i]));
                int heard = peak >= 1e-4f;
                if (heard != voice_heard) {
                    voice_heard = heard;
                    printf("voice %lld %d\n", t, heard);
                    fflush(stdout);
                }
            }
        }
        pa_stream_drop(s);
    }
}

static void on_voice_state(pa_stream *s, void *userdata) {
    (void) userdata;
    if (pa_stream_get_state(s) == PA_STREAM_FAILED) fail(pa_stream_get_context(s), "the voice");
    if (pa_stream_get_state(s) != PA_STREAM_READY || voice_ear) return;
    pa_context *c = pa_stream_get_context(s);
    pa_sample_spec mono = { .format = PA_SAMPLE_FLOAT32LE, .rate = RATE, .channels = 1 };
    voice_ear = pa_stream_new(c, "Voice heard", &mono, NULL);
    if (!voice_ear) fail(c, "new stream");
    pa_stream_set_monitor_stream(voice_ear, pa_stream_get_index(s));
    pa_stream_set_read_callback(voice_ear, on_voice_read, NULL);
    pa_buffer_attr in = { .maxlength = (uint32_t) -1, .fragsize = (uint32_t) pa_usec_to_bytes(1000, &mono),
                          .tlength = (uint32_t) -1, .prebuf = (uint32_t) -1, .minreq = (uint32_t) -1 };
    if (pa_stream_connect_record(voice_ear, NULL, &in, PA_STREAM_ADJUST_LATENCY | PA_STREAM_DONT_MOVE) < 0) fail(c, "hear the voice");
    printf("voice-ready %u\n", pa_stream_get_index(s));
    fflush(stdout);
}

static void on_signal(pa_mainloop_api *api, pa_signal_event *e, int number, void *userdata) {
    (void) api; (void) e; (void) userdata;
    speaking = number == SIGUSR1;
}

static void on_tone_state(pa_stream *s, void *userdata) {
    (void) userdata;
    if (pa_stream_get_state(s) == PA_STREAM_READY && !announced) {
        announced = 1;
        printf("ready %u\n", pa_stream_get_index(s));
        fflush(stdout);
    }
    if (pa_stream_get_state(s) == PA_STREAM_FAILED) fail(pa_stream_get_context(s), "the tone");
}

static void on_ear_state(pa_stream *s, void *userdata) {
    (void) userdata;
    if (pa_stream_get_state(s) == PA_STREAM_FAILED) fail(pa_stream_get_context(s), "the monitor");
}

static void on_state(pa_context *c, void *userdata) {
    pa_mainloop_api *api = userdata;
    switch (pa_context_get_state(c)) {
    case PA_CONTEXT_READY: {
        pa_sample_spec play = { .format = PA_SAMPLE_FLOAT32LE, .rate = RATE, .channels = 2 };
        pa_sample_spec hear = { .format = PA_SAMPLE_FLOAT32LE, .rate = RATE, .channels = 2 };
        pa_proplist *p = pa_proplist_new();
        pa_proplist_sets(p, PA_PROP_MEDIA_ROLE, "music");
        tone = pa_stream_new_with_proplist(c, "Tone", &play, NULL, p);
        pa_proplist_free(p);
        p = pa_proplist_new();
        pa_proplist_sets(p, PA_PROP_MEDIA_ROLE, "production");
        ear = pa_stream_new_with_proplist(c, "Ear", &hear, NULL, p);
        pa_proplist_free(p);
        if (!tone || !ear) fail(c, "new stream");
        pa_stream_set_write_callback(tone, on_write, NULL);
        pa_stream_set_state_callback(tone, on_tone_state, NULL);
        pa_stream_set_read_callback(ear, on_read, NULL);
        pa_stream_set_state_callback(ear, on_ear_state, NULL);
        pa_buffer_attr out = { .maxlength = (uint32_t) -1, .tlength = (uint32_t) pa_usec_to_bytes(20000, &play),
                               .prebuf = (uint32_t) -1, .minreq = (uint32_t) -1, .fragsize = (uint32_t) -1 };
        if (voice_only) goto voice_alone;
        pa_buffer_attr in = { .maxlength = (uint32_t) -1, .fragsize = (uint32_t) pa_usec_to_bytes(2000, &hear),
                              .tlength = (uint32_t) -1, .prebuf = (uint32_t) -1, .minreq = (uint32_t) -1 };
        char monitor[512];
        snprintf(monitor, sizeof monitor, "%s.monitor", sink);
        if (pa_stream_connect_record(ear, monitor, &in, PA_STREAM_ADJUST_LATENCY) < 0) fail(c, "record the monitor");
        if (pa_stream_connect_playback(tone, sink, &out, PA_STREAM_ADJUST_LATENCY, NULL, NULL) < 0) fail(c, "play the tone");
    voice_alone:
        if (with_voice) {
            pa_sample_spec mono = { .format = PA_SAMPLE_FLOAT32LE, .rate = RATE, .channels = 1 };
            p = pa_proplist_new();
            pa_proplist_sets(p, PA_PROP_MEDIA_ROLE, "a11y");
            pa_proplist_sets(p, PA_PROP_APPLICATION_NAME, "Voice");
            voice = pa_stream_new_with_proplist(c, "Voice", &mono, NULL, p);
            pa_proplist_free(p);
            if (!voice) fail(c, "new stream");
            pa_stream_set_write_callback(voice, on_voice_write, NULL);
            pa_stream_set_state_callback(voice, on_voice_state, NULL);
            pa_buffer_attr v = out;
            v.tlength = (uint32_t) pa_usec_to_bytes(20000, &mono);
            if (pa_stream_connect_playback(voice, sink, &v, PA_STREAM_ADJUST_LATENCY, NULL, NULL) < 0) fail(c, "play the voice");
        }
        break;
    }
    case PA_CONTEXT_FAILED:
    case PA_CONTEXT_TERMINATED:
        fprintf(stderr, "audiosession-listen: %s\n", pa_strerror(pa_context_errno(c)));
        api->quit(api, 1);
        break;
    default:
        break;
    }
}

int main(int argc, char **argv) {
    const char *server = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--server") == 0 && i + 1 < argc) server = argv[++i];
        else if (strcmp(argv[i], "--sink") == 0 && i + 1 < argc) sink = argv[++i];
        else if (strcmp(argv[i], "--voice") == 0) with_voice = 1;
        else if (strcmp(argv[i], "--voice-only") == 0) with_voice = voice_only = 1;
        else { fprintf(stderr, "usage: audiosession-listen --sink NAME [--server ADDRESS] [--voice | --voice-only]\n"); return 2; }
    }
    if (!sink && !voice_only) { fprintf(stderr, "audiosession-listen: --sink NAME is required\n"); return 2; }
    pa_mainloop *loop = pa_mainloop_new();
    pa_mainloop_api *api = pa_mainloop_get_api(loop);
    pa_signal_init(api);
    pa_signal_new(SIGUSR1, on_signal, NULL);
    pa_signal_new(SIGUSR2, on_signal, NULL);
    pa_context *c = pa_context_new(api, "Music");
    pa_context_set_state_callback(c, on_state, api);
    if (pa_context_connect(c, server, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0) fail(c, "connect");
    int result = 0;
    pa_mainloop_run(loop, &result);
    pa_context_unref(c);
    pa_mainloop_free(loop);
    return result;
}
