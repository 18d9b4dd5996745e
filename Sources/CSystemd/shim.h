#ifndef CSYSTEMD_SHIM_H
#define CSYSTEMD_SHIM_H

// libsystemd's sd-bus, from Debian's libsystemd-dev. Its variadic functions (sd_bus_call_method,
// sd_bus_message_append, ...) cannot be called from Swift: the DBus target builds messages with
// append_basic and containers instead.
#include <systemd/sd-bus.h>
#include <sys/eventfd.h>
#include <poll.h>

#endif
