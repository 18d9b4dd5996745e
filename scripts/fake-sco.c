/* Bluetooth SCO sockets for a sound server on a machine without Bluetooth (preloaded with
 * LD_PRELOAD by scripts/private-server, next to scripts/fake-bluez).
 *
 * A hands-free profile carries its audio over an SCO socket that the sound server opens itself
 * (PulseAudio, when a card switches to handsfree_head_unit; PipeWire, when the node starts). Without
 * the kernel's Bluetooth support socket(AF_BLUETOOTH, ..., BTPROTO_SCO) fails and the switch fails
 * with it. Here such a socket is one end of a local socket pair instead: bind, connect, listen and the
 * SCO socket options succeed on it, and what the server writes waits in the pair's buffer (the other
 * end stays open and unread, as a silent headset would leave it, until the server closes its end).
 * Every other socket is untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define AF_BLUETOOTH_ 31
#define BTPROTO_SCO_ 2
#define SOL_SCO_ 17
#define SOL_BLUETOOTH_ 274
#define SCO_OPTIONS_ 1
#define MAX_FD 4096

/* For each imitation SCO socket, its pair's other end plus one (0: not an imitation). Set and
 * cleared from any thread: atomics. */
static atomic_int peer[MAX_FD];

static int is_imitation(int fd) { return fd >= 0 && fd < MAX_FD && atomic_load(&peer[fd]) != 0; }

int socket(int domain, int type, int protocol) {
    static int (*real)(int, int, int);
    if (!real) real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
    if (domain != AF_BLUETOOTH_ || protocol != BTPROTO_SCO_) return real(domain, type, protocol);
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | (type & (SOCK_NONBLOCK | SOCK_CLOEXEC)), 0, pair) < 0) return -1;
    if (pair[0] >= MAX_FD) { close(pair[0]); close(pair[1]); errno = EMFILE; return -1; }
    atomic_store(&peer[pair[0]], pair[1] + 1);
    return pair[0];
}

int bind(int fd, const struct sockaddr *address, socklen_t length) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    return is_imitation(fd) ? 0 : real(fd, address, length);
}

int connect(int fd, const struct sockaddr *address, socklen_t length) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    return is_imitation(fd) ? 0 : real(fd, address, length);
}

int listen(int fd, int backlog) {
    static int (*real)(int, int);
    if (!real) real = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
    return is_imitation(fd) ? 0 : real(fd, backlog);
}

int accept(int fd, struct sockaddr *address, socklen_t *length) {
    static int (*real)(int, struct sockaddr *, socklen_t *);
    if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
    if (is_imitation(fd)) { errno = EAGAIN; return -1; }  /* no headset ever calls in */
    return real(fd, address, length);
}

int setsockopt(int fd, int level, int name, const void *value, socklen_t length) {
    static int (*real)(int, int, int, const void *, socklen_t);
    if (!real) real = (int (*)(int, int, int, const void *, socklen_t))dlsym(RTLD_NEXT, "setsockopt");
    if (is_imitation(fd) && (level == SOL_SCO_ || level == SOL_BLUETOOTH_)) return 0;
    return real(fd, level, name, value, length);
}

int getsockopt(int fd, int level, int name, void *value, socklen_t *length) {
    static int (*real)(int, int, int, void *, socklen_t *);
    if (!real) real = (int (*)(int, int, int, void *, socklen_t *))dlsym(RTLD_NEXT, "getsockopt");
    if (is_imitation(fd) && (level == SOL_SCO_ || level == SOL_BLUETOOTH_)) {
        if (level == SOL_SCO_ && name == SCO_OPTIONS_ && value && length && *length >= 2) {
            unsigned short mtu = 48;  /* struct sco_options { uint16_t mtu; } */
            memcpy(value, &mtu, sizeof mtu);
            *length = sizeof mtu;
        } else if (value && length) {
            memset(value, 0, *length);
        }
        return 0;
    }
    return real(fd, level, name, value, length);
}

int close(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "close");
    int other = fd >= 0 && fd < MAX_FD ? atomic_exchange(&peer[fd], 0) : 0;
    if (other) real(other - 1);
    return real(fd);
}
