/*
 * listener.h - the forwarder's two doors: the host TCP port users connect
 * to, and the unix socket nginx proxies to.
 *
 * Binding happens before the forwarder reports readiness, so a taken port
 * is reported to the worker as EADDRINUSE (a clean 409) instead of being
 * discovered later by a check-then-bind race.
 */
#ifndef FWD_LISTENER_H
#define FWD_LISTENER_H

#include <stddef.h>
#include <sys/types.h>

#define LISTENER_BACKLOG 512

/* A bound unix socket, remembered so that only our own file is unlinked. */
struct listener_unix {
    char path[108];
    dev_t dev;
    ino_t ino;
};

/* Listen on "ADDR:PORT" (IPv4, or "[v6]:PORT"); PORT 0 lets the kernel
 * choose. Returns the non-blocking listening fd and the port really bound
 * in *port, or -1 with errno set and a message for the user in err. */
int listener_tcp_bind(const char *addr_port, int *port, char *err, size_t errlen);

/* Listen on a unix socket at path with the given mode and group (group
 * NULL or "": leave it). A stale socket file (nobody accepting) is
 * replaced; a live one is EADDRINUSE; a file that is not a socket is
 * EEXIST. Returns the fd or -1 with errno set and a message in err. */
int listener_unix_bind(const char *path, mode_t mode, const char *group, struct listener_unix *lu,
                       char *err, size_t errlen);

/* Remove the socket file if it is still the one we bound. */
void listener_unix_unlink(const struct listener_unix *lu);

#endif
