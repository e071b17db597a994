/*
 * app.h - what every nanobox-fcgi process holds (master, workers, reaper),
 * and the one error type that carries a failure to the HTTP answer.
 */
#ifndef NB_APP_H
#define NB_APP_H

#include "cluster.h"
#include "conf.h"
#include "docker.h"
#include "nberr.h"
#include "table.h"

struct nb_sandbox_source; /* sandbox.h */

struct nb_app {
    struct nb_conf conf;
    struct nb_table table;                /* mapped before fork: shared by all */
    struct nb_docker docker;              /* one curl handle per process, made after fork */
    const struct nb_sandbox_source *warm; /* ready sandboxes for creates (warm.c); NULL: none */
    char *seccomp; /* sandboxes' seccomp profile (JSON), read at start (isolation.c) */
    /* the same for sandboxes with a root: unshare and setns of a user namespace
     * allowed too, for the agent's (nanobox-init, root.c); NULL: none */
    char *seccomp_root;
    /* the node tag its sandbox ids end in (cluster.h); "": not a cluster node */
    char node_tag[NB_NODE_TAG_LEN + 1];
};

/* An error on its way to the client: its domain code (nberr.h), a slug the
 * answer names it by, and a readable message. */
struct nb_apierr {
    enum nb_err err;
    char code[32];
    char msg[320];
};

/* apierr.c: fill one; below every engine and handler. */
void nb_apierr_set(struct nb_apierr *ae, enum nb_err err, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Translate a Docker failure; what says what we were doing ("create the sandbox"). */
void nb_apierr_docker(struct nb_apierr *ae, const struct nb_derr *de, const char *what);

#endif
