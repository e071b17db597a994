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
struct nb_docker_image;
struct nb_docker_build;

/* Called by nb_docker_image_list for each image. */
typedef void (*nb_docker_image_fn)(void *arg, const struct nb_docker_image *im);
/* Called by nb_docker_build for each line of the build's JSON stream. */
typedef void (*nb_docker_line_fn)(void *arg, const char *line, size_t len);

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
    /* images: the templates engine's (templates.c) */
    int (*image_inspect)(struct nb_docker *d, const char *ref, struct nb_docker_image *im,
                         struct nb_derr *e);
    int (*image_list)(struct nb_docker *d, const char *instance, nb_docker_image_fn cb, void *arg,
                      struct nb_derr *e);
    int (*image_remove)(struct nb_docker *d, const char *ref, int force, struct nb_derr *e);
    int (*image_import)(struct nb_docker *d, const char *ref, const char *const *labels,
                        const void *tar, size_t tar_len, char id[80], struct nb_derr *e);
    int (*build)(struct nb_docker *d, const struct nb_docker_build *b, nb_docker_line_fn cb,
                 void *arg, struct nb_derr *e);
    /* volumes: reconciliation's sweep (NULL in a fake: nothing to sweep) */
    int (*volume_sweep)(struct nb_docker *d, const char *instance, struct nb_derr *e);
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
 * Remove the volumes no container uses that carry both labels
 * nanobox.instance=instance and nanobox.sandbox: a sandbox's /dev/pts left
 * by a removal that lost its volume (a `docker rm` without -v, a wedged
 * dockerd). A volume meant to outlive its sandbox must not carry
 * nanobox.sandbox. Returns how many went, or -1.
 */
int nb_docker_volume_sweep(struct nb_docker *d, const char *instance, struct nb_derr *e);
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
    /* what a slot needs, for adopting it into a new table (adopt.c); the
     * labels sandbox.c's create sets */
    char owner[40];       /* label nanobox.owner ("" if absent) */
    char image[128];      /* label nanobox.image, else the listing's Image */
    char metadata[1024];  /* label nanobox.metadata ("" if absent) */
    int64_t created;      /* label nanobox.created, else the listing's Created */
    int64_t slot;         /* label nanobox.slot, -1 if absent or not a number */
    uint64_t memory;      /* label nanobox.memory (bytes), 0 if absent */
    uint64_t nano_cpus;   /* label nanobox.nano_cpus, 0 if absent */
    int64_t pids;         /* label nanobox.pids, 0 if absent */
    int network_bridge;   /* label nanobox.network is "bridge" */
    int auto_resume;      /* label nanobox.auto_resume is "1" */
    int pause_on_timeout; /* label nanobox.on_timeout is "pause" */
    int pooled;           /* label nanobox.pooled is "1": made for the warm pool */
    int e2b_home;         /* label nanobox.home is "e2b": E2B's layout (NB_LIFE_E2B_HOME) */
    int volumes;          /* label nanobox.volumes is not empty: it mounts volumes */
};

/*
 * Fill c's label fields from a container's Labels object (a yajl_val,
 * passed as void * so users need no yajl header): exposed for the unit
 * tests of the label reading.
 */
void nb_docker_ctr_labels(struct nb_docker_ctr *c, const void *labels);
/*
 * Containers carrying nanobox.instance=instance, all states. Calls cb for
 * each; returns the count or -1.
 */
int nb_docker_list(struct nb_docker *d, const char *instance, nb_docker_ctr_fn cb, void *arg,
                   struct nb_derr *e);

/*
 * Images, for templates. An image of ours carries labels nanobox.instance,
 * nanobox.template, nanobox.status, nanobox.kind, nanobox.created_at and,
 * as the case may be, nanobox.error, nanobox.parent, nanobox.parent_template.
 */
struct nb_docker_image {
    char id[80];         /* "sha256:..." */
    char ref[128];       /* the first of its repo:tag names ("" when untagged) */
    int64_t size;        /* bytes */
    char instance[64];   /* label nanobox.instance */
    char name[64];       /* label nanobox.template */
    char status[16];     /* label nanobox.status */
    char kind[16];       /* label nanobox.kind */
    int64_t created_at;  /* label nanobox.created_at */
    char error[512];     /* label nanobox.error */
    char parent[64];     /* label nanobox.parent (a snapshot's sandbox) */
    char parent_tpl[64]; /* label nanobox.parent_template */
    char owner[40];      /* label nanobox.owner: the key that built it ("" for none) */
};
/* An image by name or id: 0, or -1 (a missing one is NB_DERR_HTTP 404). */
int nb_docker_image_inspect(struct nb_docker *d, const char *ref, struct nb_docker_image *im,
                            struct nb_derr *e);
/* Images labelled nanobox.instance=instance and nanobox.template: the count or -1. */
int nb_docker_image_list(struct nb_docker *d, const char *instance, nb_docker_image_fn cb,
                         void *arg, struct nb_derr *e);
/* Remove an image (by name: untag; force also when a container uses it). Gone counts as done. */
int nb_docker_image_remove(struct nb_docker *d, const char *ref, int force, struct nb_derr *e);
/*
 * Import tar (a root filesystem) as image ref (repo:tag) with labels
 * ("key=value" each, NULL-ended): a record image. Its id into id.
 */
int nb_docker_image_import(struct nb_docker *d, const char *ref, const char *const *labels,
                           const void *tar, size_t tar_len, char id[80], struct nb_derr *e);

/* POST /build of a context tar file, tagged tag, with labels_json (if any) on the image. */
struct nb_docker_build {
    const char *context;     /* path of the context tar (Dockerfile at its root) */
    const char *tag;         /* repo:tag */
    const char *labels_json; /* {"key":"value",...}, or NULL: a build step per label */
    const char *network;     /* networkmode of RUN steps: a network's name, or "none" */
    uint64_t memory;         /* bytes, 0: Docker's default */
    uint64_t nano_cpus;      /* 1e9 = one CPU, 0: no quota */
    uint64_t fsize;          /* RLIMIT_FSIZE (bytes) of RUN steps' processes, 0: none */
    long timeout_ms;
};
/*
 * Run a build, each line of its JSON stream to cb as it comes ({"stream"},
 * {"aux"}, {"error"}). 0 when dockerd ran it to its end (which may be an
 * {"error"} line: the caller reads them), -1 on a transport failure or
 * timeout.
 */
int nb_docker_build(struct nb_docker *d, const struct nb_docker_build *b, nb_docker_line_fn cb,
                    void *arg, struct nb_derr *e);

/*
 * Snapshots (dockerd itself): extract the tar file tarfile into directory
 * dir of a (created, not started) container, and commit that container as
 * image ref (repo:tag) with config_json ({"Labels": ...}) merged over its own.
 */
int nb_docker_put_archive(struct nb_docker *d, const char *id, const char *dir, const char *tarfile,
                          long timeout_ms, struct nb_derr *e);
int nb_docker_commit(struct nb_docker *d, const char *id, const char *ref, const char *config_json,
                     long timeout_ms, struct nb_derr *e);

/*
 * A container's writable layer (dockerd itself), for the disk cap of a
 * sandbox with a root (diskcap.h). with_size 0: a plain inspect (~10 ms);
 * the overlay2 upper directory into upper ("" when the driver has none) and
 * *size_rw = -1. with_size 1: ?size=1, Docker walks the layer itself (tens
 * of ms for thousands of files) and *size_rw is its SizeRw (apparent bytes),
 * -1 if absent.
 */
int nb_docker_rw_layer(struct nb_docker *d, const char *id, int with_size, char *upper,
                       size_t upperlen, int64_t *size_rw, struct nb_derr *e);

/*
 * Docker's event stream (dockerd itself): GET /events for this instance's
 * containers (label nanobox.instance=instance) and the actions die, oom
 * and destroy, from unix second since (0: from now). Each event to cb as
 * it comes; returns when the stream ends: 0 after max_ms (the caller
 * reconnects, since its last event's second), -1 when dockerd could not be
 * reached or the stream broke (a restart of dockerd).
 */
struct nb_docker_event {
    char action[16];  /* "die", "oom", "destroy" */
    char id[65];      /* the container's id */
    char sandbox[64]; /* its label nanobox.sandbox ("" if absent) */
    int64_t time;     /* unix seconds */
};
typedef void (*nb_docker_event_fn)(void *arg, const struct nb_docker_event *ev);
int nb_docker_events(struct nb_docker *d, const char *instance, int64_t since, long max_ms,
                     nb_docker_event_fn cb, void *arg, struct nb_derr *e);

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
