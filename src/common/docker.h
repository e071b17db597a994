/*
 * docker.h - a small Docker Engine API client: libcurl over the unix socket.
 *
 * One handle per process, reused so the connection to dockerd stays open
 * between calls. Each call reports failures in a struct nb_derr whose kind
 * tells the HTTP layer which status to answer (Docker unreachable → 503,
 * Docker refused → 502 or the matching 4xx, timeout → 504).
 */
#ifndef NB_DOCKER_H
#define NB_DOCKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "demux.h"

#define NB_DOCKER_API "/v1.41"

enum nb_derr_kind {
    NB_DERR_NONE = 0,
    NB_DERR_UNREACHABLE, /* could not talk to dockerd at all */
    NB_DERR_HTTP,        /* dockerd answered with an error status */
    NB_DERR_TIMEOUT,     /* our deadline passed */
    NB_DERR_PROTO,       /* an answer we could not understand, or too big */
};

struct nb_derr {
    enum nb_derr_kind kind;
    long status;   /* HTTP status when kind is NB_DERR_HTTP */
    int unsent;    /* 1: never connected, so dockerd did nothing */
    char msg[256]; /* Docker's own message when it gave one */
};

struct nb_docker;
struct nb_docker_ctr;

/* Called by nb_docker_list for each container. */
typedef void (*nb_docker_ctr_fn)(void *arg, const struct nb_docker_ctr *c);

/*
 * The container calls the sandbox engine makes (create, start, inspect,
 * remove, list, ping, pause, unpause), as a table of functions: nb_docker_init installs
 * the real client's, and the unit tests an in-memory Docker's
 * (tests/unit/test_engine.c), so the engine's rules (rollback,
 * reconciliation, the warm pool) are tested without dockerd. The
 * nb_docker_* functions of the same names call through it; a fake keeps
 * its state in ctx.
 */
struct nb_docker_ops {
    int (*ping)(struct nb_docker *d, struct nb_derr *e);
    int (*create)(struct nb_docker *d, const char *name, const char *config_json, char cid[65],
                  struct nb_derr *e);
    int (*start)(struct nb_docker *d, const char *id, struct nb_derr *e);
    int (*remove)(struct nb_docker *d, const char *id, struct nb_derr *e);
    int (*inspect)(struct nb_docker *d, const char *id, int *running, pid_t *pid,
                   struct nb_derr *e);
    int (*list)(struct nb_docker *d, const char *instance, nb_docker_ctr_fn cb, void *arg,
                struct nb_derr *e);
    int (*pause)(struct nb_docker *d, const char *id, struct nb_derr *e);
    int (*unpause)(struct nb_docker *d, const char *id, struct nb_derr *e);
};

/* The real client: libcurl to dockerd. */
extern const struct nb_docker_ops nb_docker_curl_ops;

struct nb_docker {
    const struct nb_docker_ops *ops; /* nb_docker_curl_ops after nb_docker_init */
    void *ctx;                       /* state of another ops table (a fake's); unused by curl's */
    void *curl;                      /* CURL *, kept opaque so users need no curl headers */
    char socket[256];
    size_t max_response; /* cap on any buffered answer */
};

int nb_docker_init(struct nb_docker *d, const char *socket_path, size_t max_response);
void nb_docker_cleanup(struct nb_docker *d);

/*
 * One request to dockerd itself (not through the ops table). body may be NULL. The answer (capped) goes to resp when not
 * NULL. Returns 0 when dockerd answered (any status, in *status), -1 on a
 * transport failure (e filled).
 */
int nb_docker_request(struct nb_docker *d, const char *method, const char *path, const char *body,
                      long timeout_ms, long *status, struct nb_buf *resp, struct nb_derr *e);

/* GET /_ping. 0 when dockerd answers OK. */
int nb_docker_ping(struct nb_docker *d, struct nb_derr *e);

/* Create a container named name from a JSON config; its id into cid. */
int nb_docker_create(struct nb_docker *d, const char *name, const char *config_json, char cid[65],
                     struct nb_derr *e);
int nb_docker_start(struct nb_docker *d, const char *id, struct nb_derr *e);
/* Force-remove with volumes. A container that is already gone counts as removed. */
int nb_docker_remove(struct nb_docker *d, const char *id, struct nb_derr *e);
/*
 * Freeze / thaw every process of a container (the cgroup freezer). One
 * already paused (for pause) or not paused (for unpause) counts as done.
 */
int nb_docker_pause(struct nb_docker *d, const char *id, struct nb_derr *e);
int nb_docker_unpause(struct nb_docker *d, const char *id, struct nb_derr *e);
/* State of a container: *running 0/1 (1 while paused too), *pid its PID 1
 * on the host (0 if not running). */
int nb_docker_inspect(struct nb_docker *d, const char *id, int *running, pid_t *pid,
                      struct nb_derr *e);

/* One container of ours as listed by Docker. */
struct nb_docker_ctr {
    char id[65];
    char sandbox[64]; /* label nanobox.sandbox */
    int64_t expires;  /* label nanobox.expires, 0 if absent */
    int running;      /* up: running or paused */
    int paused;       /* frozen by docker pause */
};
/*
 * Containers carrying nanobox.instance=instance, all states. Calls cb for
 * each; returns the count or -1.
 */
int nb_docker_list(struct nb_docker *d, const char *instance, nb_docker_ctr_fn cb, void *arg,
                   struct nb_derr *e);

/* Exec: create from a JSON config, start attached, inspect (dockerd itself). */
int nb_docker_exec_create(struct nb_docker *d, const char *cid, const char *config_json,
                          char exec_id[65], struct nb_derr *e);
/*
 * Stream the exec's output into dm until the command ends (0) or timeout_ms
 * passes (-1, kind NB_DERR_TIMEOUT); dm's callback may stop it early (-1,
 * kind NB_DERR_PROTO only if the stream was malformed).
 */
int nb_docker_exec_start(struct nb_docker *d, const char *exec_id, long timeout_ms,
                         struct nb_demux *dm, struct nb_derr *e);
int nb_docker_exec_inspect(struct nb_docker *d, const char *exec_id, int *running, int *exit_code,
                           pid_t *pid, struct nb_derr *e);

#endif
