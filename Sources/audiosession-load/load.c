/*
 * audiosession-load: the benchmark's load generator. One client opens N playback streams as fast as
 * libpulse allows, each looking like a different app (its own application.process.id and name, so
 * that each is a session of its own), plays silence, and drops them all at once on SIGTERM.
 * One client, because the servers accept only about 64 clients.
 */
#include <pulse/pulseaudio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count = 200;
static const char *role = "music";
static pa_stream **streams;

static void on_write(pa_stream *s, size_t length, void *userdata) {
    (void) userdata;
    void *data;
    if (pa_stream_begin_write(s, &data, &length) < 0 || !data) return;
    memset(data, 0, length);
    pa_stream_write(s, data, length, NULL, 0, PA_SEEK_RELATIVE);
}

static void on_state(pa_context *c, void *userdata) {
    pa_mainloop_api *api = userdata;
    switch (pa_context_get_state(c)) {
    case PA_CONTEXT_READY: {
        pa_sample_spec spec = { .format = PA_SAMPLE_S16LE, .rate = 48000, .channels = 2 };
        pa_buffer_attr attr = { .maxlength = (uint32_t) -1, .tlength = 19200, .prebuf = (uint32_t) -1,
                                .minreq = (uint32_t) -1, .fragsize = (uint32_t) -1 };
        for (int i = 0; i < count; i++) {
            char value[64];
            pa_proplist *p = pa_proplist_new();
            pa_proplist_sets(p, PA_PROP_MEDIA_ROLE, role);
            snprintf(value, sizeof value, "%d", 4000000 + i);
            pa_proplist_sets(p, PA_PROP_APPLICATION_PROCESS_ID, value);
            snprintf(value, sizeof value, "Storm %d", i);
            pa_proplist_sets(p, PA_PROP_APPLICATION_NAME, value);
            streams[i] = pa_stream_new_with_proplist(c, value, &spec, NULL, p);
            pa_proplist_free(p);
            pa_stream_set_write_callback(streams[i], on_write, NULL);
            pa_stream_connect_playback(streams[i], NULL, &attr, PA_STREAM_ADJUST_LATENCY, NULL, NULL);
        }
        printf("started %d streams\n", count);
        fflush(stdout);
        break;
    }
    case PA_CONTEXT_FAILED:
    case PA_CONTEXT_TERMINATED:
        fprintf(stderr, "audiosession-load: %s\n", pa_strerror(pa_context_errno(c)));
        api->quit(api, 1);
        break;
    default:
        break;
    }
}

static void on_signal(pa_mainloop_api *api, pa_signal_event *e, int sig, void *userdata) {
    (void) e; (void) sig; (void) userdata;
    api->quit(api, 0);
}

int main(int argc, char **argv) {
    const char *server = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--streams") == 0 && i + 1 < argc) count = atoi(argv[++i]);
        else if (strcmp(argv[i], "--role") == 0 && i + 1 < argc) role = argv[++i];
        else if (strcmp(argv[i], "--server") == 0 && i + 1 < argc) server = argv[++i];
        else { fprintf(stderr, "usage: audiosession-load [--streams N] [--role ROLE] [--server ADDRESS]\n"); return 2; }
    }
    streams = calloc((size_t) count, sizeof *streams);
    pa_mainloop *loop = pa_mainloop_new();
    pa_mainloop_api *api = pa_mainloop_get_api(loop);
    pa_signal_init(api);
    pa_signal_new(SIGTERM, on_signal, NULL);
    pa_signal_new(SIGINT, on_signal, NULL);
    pa_context *c = pa_context_new(api, "audiosession-load");
    pa_context_set_state_callback(c, on_state, api);
    if (pa_context_connect(c, server, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0) {
        fprintf(stderr, "audiosession-load: %s\n", pa_strerror(pa_context_errno(c)));
        return 1;
    }
    int result = 0;
    pa_mainloop_run(loop, &result);
    /* Dropping the connection ends every stream at once. */
    pa_context_disconnect(c);
    pa_context_unref(c);
    pa_signal_done();
    pa_mainloop_free(loop);
    free(streams);
    return result;
}
