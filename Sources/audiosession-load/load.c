/*
 * audiosession-load: the benchmark's load generator. One client opens N playback streams as fast as
 * libpulse allows, each looking like a different app (its own application.process.id and name, so
 * that each is a session of its own), plays quiet noise (heard: the agent counts a stream while it is
 * heard, SPEC.md section 1), and drops them all at once on SIGTERM.
 * One client, because the servers accept only about 64 clients.
 *
 * With --churn N --seconds S (issue 10 case 5): N clients, each starting a music stream, stopping it
 * 50-250 ms later, starting the next 50-250 ms after that, for S seconds; then all leave.
 */
#include <pulse/pulseaudio.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>

static int count = 200;
static const char *role = "music";
static pa_stream **streams;

static void on_write(pa_stream *s, size_t length, void *userdata) {
    (void) userdata;
    void *data;
    if (pa_stream_begin_write(s, &data, &length) < 0 || !data) return;
    /* Quiet noise (about -50 dBFS): above the agent's meters' threshold, cheap to make. */
    int16_t *samples = data;
    static uint32_t seed = 12345;
    for (size_t i = 0; i < length / sizeof(int16_t); i++) {
        seed = seed * 1103515245u + 12345u;
        samples[i] = (int16_t) ((int32_t) (seed >> 16) % 100);
    }
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

/* Churn: one client each. */
struct churner {
    int number;
    pa_context *context;
    pa_stream *stream;
    pa_time_event *timer;
    unsigned started;
};
static pa_mainloop_api *churn_api;
static struct timeval churn_end;
static unsigned churn_seed = 1;
static int churn_left;
static const char *churn_server;

static int churn_delay_ms(void) { return 50 + (int) (rand_r(&churn_seed) % 200); }

static void churn_at(struct churner *c, int ms);

static void churn_step(pa_mainloop_api *api, pa_time_event *e, const struct timeval *tv, void *userdata) {
    (void) e; (void) tv;
    struct churner *c = userdata;
    struct timeval now;
    gettimeofday(&now, NULL);
    if (c->stream) {
        pa_stream_disconnect(c->stream);
        pa_stream_unref(c->stream);
        c->stream = NULL;
    }
    if (pa_context_get_state(c->context) == PA_CONTEXT_UNCONNECTED) {
        /* Clients connect one after another: a burst of connections is refused. */
        if (pa_context_connect(c->context, churn_server, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0)
            fprintf(stderr, "audiosession-load: client %d: %s\n", c->number, pa_strerror(pa_context_errno(c->context)));
        churn_at(c, churn_delay_ms());
        return;
    }
    if (timercmp(&now, &churn_end, >)) {
        pa_context_disconnect(c->context);
        if (--churn_left == 0) api->quit(api, 0);
        return;
    }
    if (pa_context_get_state(c->context) == PA_CONTEXT_READY && c->started % 2 == 0) {
        pa_sample_spec spec = { .format = PA_SAMPLE_S16LE, .rate = 48000, .channels = 2 };
        char value[64];
        pa_proplist *p = pa_proplist_new();
        pa_proplist_sets(p, PA_PROP_MEDIA_ROLE, role);
        snprintf(value, sizeof value, "Churn %d", c->number);
        pa_proplist_sets(p, PA_PROP_APPLICATION_NAME, value);
        c->stream = pa_stream_new_with_proplist(c->context, value, &spec, NULL, p);
        pa_proplist_free(p);
        pa_stream_set_write_callback(c->stream, on_write, NULL);
        pa_stream_connect_playback(c->stream, NULL, NULL, 0, NULL, NULL);
    }
    c->started++;
    churn_at(c, churn_delay_ms());
}

static void churn_at(struct churner *c, int ms) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    pa_timeval_add(&tv, (pa_usec_t) ms * 1000);
    if (c->timer) churn_api->time_restart(c->timer, &tv);
    else c->timer = churn_api->time_new(churn_api, &tv, churn_step, c);
}

static int churn(const char *server, int clients, int seconds) {
    pa_mainloop *loop = pa_mainloop_new();
    churn_api = pa_mainloop_get_api(loop);
    gettimeofday(&churn_end, NULL);
    churn_end.tv_sec += seconds;
    churn_left = clients;
    churn_server = server;
    struct churner *all = calloc((size_t) clients, sizeof *all);
    for (int i = 0; i < clients; i++) {
        char name[64], pid[16];
        pa_proplist *p = pa_proplist_new();
        snprintf(pid, sizeof pid, "%d", 5000000 + i);
        pa_proplist_sets(p, PA_PROP_APPLICATION_PROCESS_ID, pid);
        snprintf(name, sizeof name, "Churn %d", i);
        all[i].number = i;
        all[i].context = pa_context_new_with_proplist(churn_api, name, p);
        pa_proplist_free(p);
        churn_at(&all[i], 20 * i);
    }
    printf("started %d clients for %d s\n", clients, seconds);
    fflush(stdout);
    int result = 0;
    pa_mainloop_run(loop, &result);
    for (int i = 0; i < clients; i++) pa_context_unref(all[i].context);
    free(all);
    pa_mainloop_free(loop);
    return result;
}

static void on_signal(pa_mainloop_api *api, pa_signal_event *e, int sig, void *userdata) {
    (void) e; (void) sig; (void) userdata;
    api->quit(api, 0);
}

int main(int argc, char **argv) {
    const char *server = NULL;
    int clients = 0, seconds = 60;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--streams") == 0 && i + 1 < argc) count = atoi(argv[++i]);
        else if (strcmp(argv[i], "--churn") == 0 && i + 1 < argc) clients = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--role") == 0 && i + 1 < argc) role = argv[++i];
        else if (strcmp(argv[i], "--server") == 0 && i + 1 < argc) server = argv[++i];
        else { fprintf(stderr, "usage: audiosession-load [--streams N | --churn CLIENTS [--seconds S]] [--role ROLE] [--server ADDRESS]\n"); return 2; }
    }
    if (clients > 0) return churn(server, clients, seconds);
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
