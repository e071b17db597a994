/*
 * sandbox.h - a sandbox's life: create its container, look it up, extend
 * it, destroy it. The API handlers and the reaper both go through here so
 * a sandbox is created and destroyed one way only.
 */
#ifndef NB_SANDBOX_H
#define NB_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "keys.h"
#include "network.h"
#include "volume.h"

/* Where nanobox-init appears inside every sandbox (a read-only bind mount). */
#define NB_INIT_MOUNT "/.nanobox/init"
/* Where the code bridge's directory appears (read-only), see isolation.h. */
#define NB_KERNEL_MOUNT "/.nanobox/kernel"

/* A validated create request; limits already within the operator's. */
struct nb_sandbox_spec {
    char image[NB_IMAGE_LEN];
    uint64_t memory;
    uint64_t nano_cpus;
    int64_t pids;
    int network_bridge;
    struct nb_net_policy egress; /* bridge only: the request's allow and deny */
    unsigned ttl;
    char **env; /* "NAME=value" strings, n_env of them */
    unsigned n_env;
    char metadata[NB_META_LEN]; /* JSON object text */
    unsigned lifecycle;         /* NB_LIFE_* (table.h): auto_resume, on_timeout pause */
    /* the API key creating it: its owner, whose quotas it counts against; NULL: none (warm) */
    const struct nb_key *key;
    /*
     * NULL, or called once the container runs and before its slot is
     * committed (so before the pool can hand it out): the warm pool starts
     * a code sandbox's kernel here. slot is a copy with the container's id
     * and PID 1; a failure is the hook's to log, the sandbox is kept.
     */
    void (*prepare)(struct nb_app *a, const struct nb_slot *slot);
    /* what its key holds on the cluster's other nodes (registry.h); NULL: nothing */
    const struct nb_table_usage *elsewhere;
    /* idle seconds after which the reaper pauses it, releasing its memory; 0: never */
    int64_t idle_pause;
    /* the image its container runs, NULL: image (a resume's: its pause image) */
    const char *run_image;
    /* its owner's persistent volumes, checked and ready (nb_volume_prepare);
     * a create with any never takes a warm sandbox */
    const struct nb_volume_mount *volumes;
    unsigned n_volumes;
    /*
     * NULL, or where a create on a cluster node says 1 when it left its
     * registration to the caller, to be done after the answer with
     * nb_registry_late: only for a key that no quota counts rows against.
     */
    int *register_late;
};

/*
 * A source of ready-made sandboxes that a create asks first (a->warm: the
 * warm pool, warm.c). The lifecycle calls it only through this table, so
 * the pool can be built on the lifecycle without the two calling each
 * other by name.
 */
struct nb_sandbox_source {
    /* A ready sandbox for spec, now RUNNING, copied to *out; -1 if none. */
    int (*take)(struct nb_app *a, const struct nb_sandbox_spec *spec, struct nb_slot *out);
    /* Destroy one ready sandbox to free its slot; 0 if one was. */
    int (*evict)(struct nb_app *a);
};

/*
 * Create and start (or take a ready one from a->warm); on success *out is a
 * copy of the RUNNING slot. A full table gives up a ready sandbox's slot.
 */
int nb_sandbox_create(struct nb_app *a, const struct nb_sandbox_spec *spec, struct nb_slot *out,
                      struct nb_apierr *ae);

/*
 * Create and start a container for spec whatever the sources hold; its
 * slot ends in final_state (RUNNING, or POOLED for the warm pool). The
 * slot is reserved first and freed again, container removed, on failure.
 */
int nb_sandbox_make(struct nb_app *a, const struct nb_sandbox_spec *spec,
                    enum nb_slot_state final_state, struct nb_slot *out, struct nb_apierr *ae);

/*
 * With the table lock held: would spec->key stay within its quotas (keys.h)
 * with one more sandbox of spec's memory and CPUs, on this node and, on a
 * cluster node, the others (spec->elsewhere)? 0, or 429 "quota" naming
 * the quota and its value. 0 when spec->key is NULL.
 */
int nb_sandbox_quota_locked(struct nb_app *a, const struct nb_sandbox_spec *spec,
                            struct nb_apierr *ae);
/* The same with adding sandboxes more (0: judge what is held, the new one
 * already in the table); what spec->elsewhere holds counts too. */
int nb_sandbox_quota_judge(struct nb_app *a, const struct nb_sandbox_spec *spec, unsigned adding,
                           struct nb_apierr *ae);

/*
 * The one ownership check (the route guard's, for every route with a
 * sandbox id): 0 if id is a live sandbox owned by owner, else the 404 an
 * unknown id answers, word for word, so a sandbox of another key cannot be
 * told from none.
 */
int nb_sandbox_visible(struct nb_app *a, const char *id, const char *owner, struct nb_apierr *ae);

/* Copy of a live (RUNNING or PAUSED, unexpired) sandbox's slot; 404 otherwise. */
int nb_sandbox_get(struct nb_app *a, const char *id, struct nb_slot *out, struct nb_apierr *ae);

/* Set expiry to now + ttl (for a paused one: the TTL it resumes with). */
int nb_sandbox_extend(struct nb_app *a, const char *id, unsigned ttl, int64_t *expires,
                      struct nb_apierr *ae);

/*
 * The same, but never shorter: expiry becomes now + ttl only if that is
 * later than it is (E2B's connect). *expires gets the expiry as it is after.
 */
int nb_sandbox_extend_min(struct nb_app *a, const char *id, unsigned ttl, int64_t *expires,
                          struct nb_apierr *ae);

/* Remove the container and free the slot. 404 when no live sandbox has id;
 * 503 docker_unavailable, with the sandbox left as it was (ports too),
 * when Docker does not answer. */
int nb_sandbox_destroy(struct nb_app *a, const char *id, struct nb_apierr *ae);

/*
 * The first half of a destroy: the live sandbox id becomes DESTROYING (gone
 * for the API at once), its container id and slot generation are returned
 * for nb_sandbox_finish_destroy. 404 when no live sandbox has id. If the
 * caller dies before finishing, reconciliation finishes the job.
 */
int nb_sandbox_mark_destroy(struct nb_app *a, const char *id, char cid[NB_CID_LEN + 1],
                            uint32_t *gen, struct nb_apierr *ae);

/*
 * Remove the container of a slot already marked DESTROYING by the caller
 * (generation gen), then free the slot if it still has that generation.
 */
int nb_sandbox_finish_destroy(struct nb_app *a, const char *id, const char *cid, uint32_t gen,
                              struct nb_derr *de);

/*
 * Pause: freeze every process of the sandbox (docker pause). Its TTL stops
 * and its pause TTL (max_pause) starts; at its end the reaper destroys it.
 * Pausing a paused sandbox changes nothing (Docker is asked again, so a
 * container left thawed by a crash is frozen). *out (if not NULL) gets the
 * slot as it is after. 404 when no live sandbox has id.
 */
int nb_sandbox_pause(struct nb_app *a, const char *id, struct nb_slot *out, struct nb_apierr *ae);

/*
 * The same, keep_memory 0: a pause that releases the memory. The sandbox
 * is frozen, its files (workspace, /tmp, what its root wrote into its
 * image) saved by the snapshot engine as its pause image (snapshot.h), its
 * container (and its open ports) removed; the slot stays PAUSED with
 * NB_LIFE_RELEASED: id, owner, metadata, env (in the image), TTL and pause
 * TTL, limits, network and egress rules. Its processes do not survive (no
 * CRIU): a resume boots a new container from the files. A save that fails
 * (413 too_large over snapshot_max, a Docker error) leaves it running as
 * it was. A pause of a paused sandbox with memory releases it; of a
 * released one changes nothing.
 */
int nb_sandbox_pause_how(struct nb_app *a, const char *id, int keep_memory, struct nb_slot *out,
                         struct nb_apierr *ae);

/* Note an API call naming id (the idle pause's clock). */
void nb_sandbox_touch(struct nb_app *a, const char *id);

/*
 * Resume: thaw it (docker unpause); its TTL goes on with what was left.
 * Resuming a running sandbox changes nothing. As nb_sandbox_pause. One
 * paused without its memory gets a new container of its pause image under
 * the same id and slot (so the same uid and address), its files restored
 * before this returns; the pause image is removed then.
 */
int nb_sandbox_resume(struct nb_app *a, const char *id, struct nb_slot *out, struct nb_apierr *ae);

/*
 * For the routes that need the sandbox's processes (exec, files,
 * processes, code, ports; the route guard calls it before their handler):
 * 0 if id is not paused (or not there: the handler answers that), 409
 * paused if it is, unless it was created with auto_resume: then it is
 * resumed first (0, or the resume's error).
 */
int nb_sandbox_awake(struct nb_app *a, const char *id, struct nb_apierr *ae);

/* Is id a textual lowercase UUID? */
int nb_sandbox_id_valid(const char *id);

#endif
