#ifndef CLIBPULSE_SHIM_H
#define CLIBPULSE_SHIM_H

#include <pulse/pulseaudio.h>
#include <pulse/ext-stream-restore.h>
#include <sys/eventfd.h>

// These are macros with casts, which Swift does not import.
static const uint32_t CLibPulse_INVALID_INDEX = PA_INVALID_INDEX;
static const pa_volume_t CLibPulse_VOLUME_NORM = PA_VOLUME_NORM;
static const pa_volume_t CLibPulse_VOLUME_MUTED = PA_VOLUME_MUTED;
static const pa_volume_t CLibPulse_VOLUME_MAX = PA_VOLUME_MAX;

#endif
