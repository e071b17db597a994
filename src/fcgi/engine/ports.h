/*
 * ports.h - ephemeral ports: one nanobox-fwd process per open port, recorded
 * in the sandbox's table slot (sandboxport, hostport, forwarder pid and start
 * time, expiry). Opening, closing, expiring and cleaning up all live here,
 * so the API, the sandbox's destruction and the reaper stop a forwarder the
 * same way.
 */
#ifndef NB_PORTS_H
#define NB_PORTS_H

#include <stdint.h>

#include "app.h"

struct nb_port_open {
    uint16_t sandboxport;
    uint16_t hostport; /* 0: allocate from port_range */
    unsigned duration; /* seconds asked for */
    /* the asking key's max_ports over all its sandboxes (keys.h); 0: none */
    unsigned key_max_ports;
    const char *key_name; /* its name, for the 429 */
};

struct nb_port_info {
    uint16_t sandboxport;
    uint16_t hostport;
    int64_t expires;
    unsigned duration; /* seconds from the request to expires */
};

/* Open a port; *out describes it (expires capped by the sandbox's life). */
int nb_port_open(struct nb_app *a, const char *id, const struct nb_port_open *req,
                 struct nb_port_info *out, struct nb_apierr *ae);

/*
 * Does a socket of the sandbox whose PID 1 is init_pid listen on TCP port
 * (any address, IPv4 or IPv6)? Read from /proc/<init_pid>/net/tcp{,6}, which
 * show the sandbox's own network namespace. 1 yes, 0 no, -1 unreadable.
 */
int nb_port_listening(pid_t init_pid, uint16_t port);

/*
 * Is sandboxport of sandbox id open (a half-open one waited for, bounded)?
 * If so its <id>-<port>.open file, nginx's sign that it need not ask, is
 * made again (gone to a sweep, or the port opened before there were such
 * files): 1; else 0.
 */
int nb_port_mark_if_open(struct nb_app *a, const char *id, uint16_t sandboxport);

/*
 * Open sandboxport of sandbox id on demand (ports_on_demand: a request to
 * <port>-<id>.<ports domain> with no forwarder yet): only a port that a
 * process in the sandbox listens on, for ports_on_demand_duration, counted
 * against max_ports and key_max_ports (the max_ports quota of the sandbox's
 * owner key, key_name; 0: none) like a port opened through the API. 0 when the port is open (by this call or
 * by a concurrent one); -1 with ae: 404 not_found, 502 not_listening, 429
 * too_many_ports or quota, 503 no_free_port, 502 fwd_failed.
 */
int nb_port_open_on_demand(struct nb_app *a, const char *id, uint16_t sandboxport,
                           unsigned key_max_ports, const char *key_name, struct nb_apierr *ae);

/* Stop the forwarder of an open port and free its entry. */
int nb_port_close(struct nb_app *a, const char *id, uint16_t sandboxport, struct nb_apierr *ae);

/* Stop every forwarder of a sandbox (it is being destroyed). */
void nb_ports_stop_all(struct nb_app *a, const char *id);

/*
 * While the file <ports_dir>/<id>.paused exists, the sandbox's forwarders
 * answer a new connection with a 409 "sandbox is paused" page (nginx's
 * unix socket) or close it at once (the host TCP port), instead of
 * relaying it to frozen processes. Set (paused 1) before a pause, cleared
 * after a resume and on destroy. 0, or -1 (logged).
 */
int nb_ports_mark_paused(const struct nb_conf *c, const char *id, int paused);

/*
 * Reaper pass: stop forwarders whose port expired, free entries whose
 * forwarder is gone, and entries left half-open by a dead worker.
 */
void nb_ports_reap(struct nb_app *a);

/* The "host" and "url" an answer shows for a port. */
const char *nb_port_public_host(struct nb_app *a);
void nb_port_url(const struct nb_conf *c, const char *id, uint16_t sandboxport, char *out,
                 size_t outlen);

/* Start time (clock ticks since boot) of pid; 0 if it is gone or a zombie. */
uint64_t nb_proc_starttime(pid_t pid);

#endif
