/*
 * audiosession-floor: the fastest any external client can react, for the benchmark to compare with.
 *
 * It does one thing: when a playback stream with media.role=phone (or, with --duck, media.role=a11y)
 * appears, it mutes (or lowers to 58 %, -14 dB) every other playback stream with media.role=music,
 * in the same callback that told it about the new stream; when that stream goes, it undoes that. No
 * policy, no allocation on the hot path beyond libpulse's own, a plain pa_mainloop.
 */
#include <pulse/pulseaudio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--duck") == 0) duck = 1;
        else if (strcmp(argv[i], "--server") == 0 && i + 1 < argc) server = argv[++i];
        else { fprintf(stderr, "usage: audiosession-floor [--duck] [--server ADDRESS]\n"); return 2; }
    }
    pa_mainloop *loop = pa_mainloop_new();
    pa_mainloop_api *api = pa_mainloop_get_api(loop);
    pa_context *c = pa_context_new(api, "audiosession-floor");
    pa_context_set_state_callback(c, on_state, api);
    if (pa_context_connect(c, server, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0) {
        fprintf(stderr, "audiosession-floor: %s\n", pa_strerror(pa_context_errno(c)));
        return 1;
    }
    int result = 0;
    pa_mainloop_run(loop, &result);
    pa_context_unref(c);
    pa_mainloop_free(loop);
    return result;
}
