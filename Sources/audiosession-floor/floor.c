/*
 * audiosession-floor: the fastest any external client can react, for the benchmark to compare with.
 *
 * It does one thing: when a playback stream with media.role=phone (or, with --duck, media.role=a11y)
 * appears, it mutes (or lowers to 58 %, -14 dB) every other playback stream with media.role=music,
 * in the same callback that told it about the new stream; when that stream goes, it undoes that. No
 * policy, no allocation on the hot path beyond libpulse's own, a plain pa_mainloop.
 *
 * With --bus ADDRESS it is the floor of a declared call instead: it takes the agent's name on that
 * session bus and answers the calls an app makes to declare a call (GetSession, SetCategory,
 * SetActive), muting the music at SetActive(true) in the callback that took the call, unmuting it at
 * SetActive(false). The bus's socket is watched by the same pa_mainloop.
 */
#include <pulse/pulseaudio.h>
#include <systemd/sd-bus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>

#define MAX_STREAMS 1024

struct stream { uint32_t index; int music; int trigger; int channels; };
static struct stream streams[MAX_STREAMS];
static int n_streams;
static int duck;
static uint32_t trigger_index = PA_INVALID_INDEX;

static struct stream *find(uint32_t index) {
    for (int i = 0; i < n_streams; i++) if (streams[i].index == index) return &streams[i];
    return NULL;
}

static void apply(pa_context *c, int on) {
    for (int i = 0; i < n_streams; i++) {
        if (!streams[i].music) continue;
        if (duck) {
            pa_cvolume v;
            pa_cvolume_set(&v, streams[i].channels, on ? (pa_volume_t)(PA_VOLUME_NORM * 0.585) : PA_VOLUME_NORM);
            pa_operation_unref(pa_context_set_sink_input_volume(c, streams[i].index, &v, NULL, NULL));
        } else {
            pa_operation_unref(pa_context_set_sink_input_mute(c, streams[i].index, on, NULL, NULL));
        }
    }
}

static void on_info(pa_context *c, const pa_sink_input_info *i, int eol, void *userdata) {
    (void) userdata;
    if (eol || !i) return;
    struct stream *s = find(i->index);
    if (!s) {
        if (n_streams == MAX_STREAMS) return;
        s = &streams[n_streams++];
        s->index = i->index;
    }
    const char *role = pa_proplist_gets(i->proplist, PA_PROP_MEDIA_ROLE);
    s->music = role && strcmp(role, "music") == 0;
    s->trigger = role && strcmp(role, duck ? "a11y" : "phone") == 0;
    s->channels = i->volume.channels ? i->volume.channels : 2;
    if (s->trigger && trigger_index != i->index) {
        trigger_index = i->index;
        apply(c, 1);
    }
}

static void on_event(pa_context *c, pa_subscription_event_type_t t, uint32_t index, void *userdata) {
    (void) userdata;
    if ((t & PA_SUBSCRIPTION_EVENT_FACILITY_MASK) != PA_SUBSCRIPTION_EVENT_SINK_INPUT) return;
    if ((t & PA_SUBSCRIPTION_EVENT_TYPE_MASK) == PA_SUBSCRIPTION_EVENT_REMOVE) {
        struct stream *s = find(index);
        if (s) *s = streams[--n_streams];
        if (index == trigger_index) {
            trigger_index = PA_INVALID_INDEX;
            apply(c, 0);
        }
        return;
    }
    if ((t & PA_SUBSCRIPTION_EVENT_TYPE_MASK) == PA_SUBSCRIPTION_EVENT_NEW)
        pa_operation_unref(pa_context_get_sink_input_info(c, index, on_info, NULL));
}

/* The declared call's floor (--bus). */
static sd_bus *bus;
static pa_io_event *bus_io;
static pa_context *context;

static int on_get_session(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void) userdata; (void) error;
    return sd_bus_reply_method_return(m, "o", "/org/audiosession/Floor1");
}

static int on_set_category(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void) userdata; (void) error;
    return sd_bus_reply_method_return(m, "");
}

/* The answer goes once the mute is written, as the agent's does: from a timer due at once, which the
 * loop runs after its deferred work, libpulse's writes among it (answered first, the bus daemon and the
 * caller woke on two cores before the server had the mute). */
static void answer_later(pa_mainloop_api *api, pa_time_event *e, const struct timeval *tv, void *userdata) {
    (void) tv;
    sd_bus_message *m = userdata;
    sd_bus_reply_method_return(m, "");
    sd_bus_message_unref(m);
    api->time_free(e);
}

static int on_set_active(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void) error;
    pa_mainloop_api *api = userdata;
    int active = 0;
    int r = sd_bus_message_read(m, "b", &active);
    if (r < 0) return r;
    apply(context, active);
    struct timeval now;
    pa_gettimeofday(&now);
    if (!api->time_new(api, &now, answer_later, sd_bus_message_ref(m))) {
        sd_bus_message_unref(m);
        return sd_bus_reply_method_return(m, "");
    }
    return 1;
}

static const sd_bus_vtable agent_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("GetSession", "", "o", on_get_session, 0),
    SD_BUS_VTABLE_END
};

static const sd_bus_vtable session_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("SetCategory", "ssas", "", on_set_category, 0),
    SD_BUS_METHOD("SetActive", "bas", "", on_set_active, 0),
    SD_BUS_VTABLE_END
};

static pa_io_event_flags_t bus_flags(void) {
    int events = sd_bus_get_events(bus);
    pa_io_event_flags_t flags = PA_IO_EVENT_NULL;
    if (events < 0) return PA_IO_EVENT_INPUT;  /* (a connection gone: sd_bus_process says so at the next read) */
    if (events & POLLIN) flags |= PA_IO_EVENT_INPUT;
    if (events & POLLOUT) flags |= PA_IO_EVENT_OUTPUT;
    return flags;
}

static void on_bus(pa_mainloop_api *api, pa_io_event *e, int fd, pa_io_event_flags_t events, void *userdata) {
    (void) fd; (void) events; (void) userdata;
    int r;
    while ((r = sd_bus_process(bus, NULL)) > 0) {}
    if (r < 0) {
        fprintf(stderr, "audiosession-floor: the bus: %s\n", strerror(-r));
        api->quit(api, 1);
        return;
    }
    api->io_enable(e, bus_flags());
}

static int serve_bus(pa_mainloop_api *api, const char *address) {
    int r = sd_bus_new(&bus);
    if (r >= 0) r = sd_bus_set_address(bus, address);
    if (r >= 0) r = sd_bus_set_bus_client(bus, 1);
    if (r >= 0) r = sd_bus_start(bus);
    if (r >= 0) r = sd_bus_add_object_vtable(bus, NULL, "/org/audiosession/Agent1", "org.audiosession.Agent1", agent_vtable, NULL);
    /* (The floor makes no calls of its own once started: sd-bus's timeouts, for calls, are not watched.) */
    if (r >= 0) r = sd_bus_add_object_vtable(bus, NULL, "/org/audiosession/Floor1", "org.audiosession.Session1", session_vtable, api);
    if (r >= 0) r = sd_bus_request_name(bus, "org.audiosession.Agent1", 0);
    if (r < 0) {
        fprintf(stderr, "audiosession-floor: the bus at %s: %s\n", address, strerror(-r));
        return -1;
    }
    bus_io = api->io_new(api, sd_bus_get_fd(bus), bus_flags(), on_bus, NULL);
    /* (What came in while the name was asked for is read already: the socket will not say so.) */
    on_bus(api, bus_io, -1, PA_IO_EVENT_NULL, NULL);
    return 0;
}

static void on_state(pa_context *c, void *userdata) {
    pa_mainloop_api *api = userdata;
    switch (pa_context_get_state(c)) {
    case PA_CONTEXT_READY:
        pa_context_set_subscribe_callback(c, on_event, NULL);
        pa_operation_unref(pa_context_subscribe(c, PA_SUBSCRIPTION_MASK_SINK_INPUT, NULL, NULL));
        pa_operation_unref(pa_context_get_sink_input_info_list(c, on_info, NULL));
        printf("ready\n");
        fflush(stdout);
        break;
    case PA_CONTEXT_FAILED:
    case PA_CONTEXT_TERMINATED:
        fprintf(stderr, "audiosession-floor: %s\n", pa_strerror(pa_context_errno(c)));
        api->quit(api, 1);
        break;
    default:
        break;
    }
}

int main(int argc, char **argv) {
    const char *server = NULL;
    const char *bus_address = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--duck") == 0) duck = 1;
        else if (strcmp(argv[i], "--server") == 0 && i + 1 < argc) server = argv[++i];
        else if (strcmp(argv[i], "--bus") == 0 && i + 1 < argc) bus_address = argv[++i];
        else { fprintf(stderr, "usage: audiosession-floor [--duck] [--server ADDRESS] [--bus ADDRESS]\n"); return 2; }
    }
    pa_mainloop *loop = pa_mainloop_new();
    pa_mainloop_api *api = pa_mainloop_get_api(loop);
    if (bus_address && serve_bus(api, bus_address) < 0) return 1;
    pa_context *c = pa_context_new(api, "audiosession-floor");
    context = c;
    pa_context_set_state_callback(c, on_state, api);
    if (pa_context_connect(c, server, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0) {
        fprintf(stderr, "audiosession-floor: %s\n", pa_strerror(pa_context_errno(c)));
        return 1;
    }
    int result = 0;
    pa_mainloop_run(loop, &result);
    pa_context_unref(c);
    if (bus_io) api->io_free(bus_io);
    if (bus) sd_bus_flush_close_unref(bus);
    pa_mainloop_free(loop);
    return result;
}
