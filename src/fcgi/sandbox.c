/*
 * sandbox.c - see sandbox.h.
 *
 * The table slot is reserved before the container exists and freed only
 * after the container is gone, so at every moment a container of ours has a
 * slot: that is what lets reconciliation call any other labelled container
 * an orphan. Docker calls are never made while holding the table lock.
 */
#include "config.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "agent.h"
#include "json.h"
#include "log.h"
#include "ports.h"
#include "sandbox.h"

int64_t nb_now(void)
{
    return (int64_t)time(NULL);
}

void nb_apierr_set(struct nb_apierr *ae, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    ae->status = status;
    snprintf(ae->code, sizeof(ae->code), "%s", code);
    va_start(ap, fmt);
    vsnprintf(ae->msg, sizeof(ae->msg), fmt, ap);
    va_end(ap);
}

void nb_apierr_docker(struct nb_apierr *ae, const struct nb_derr *de, const char *what)
{
    switch (de->kind) {
    case NB_DERR_UNREACHABLE:
        nb_apierr_set(ae, 503, "docker_unavailable", "could not %s: %s", what, de->msg);
        break;
    case NB_DERR_TIMEOUT:
        nb_apierr_set(ae, 504, "timeout", "could not %s: Docker did not answer in time", what);
        break;
    case NB_DERR_HTTP:
        if (de->status == 404)
            nb_apierr_set(ae, 404, "not_found", "could not %s: %s", what, de->msg);
        else if (de->status == 409)
            nb_apierr_set(ae, 409, "conflict", "could not %s: %s", what, de->msg);
        else
            nb_apierr_set(ae, 502, "docker_error", "could not %s: Docker said (%ld) %s", what,
                          de->status, de->msg);
        break;
    default:
        nb_apierr_set(ae, 502, "docker_error", "could not %s: %s", what, de->msg);
        break;
    }
}

int nb_sandbox_id_valid(const char *id)
{
    size_t i;
    for (i = 0; id[i]; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (id[i] != '-')
                return 0;
        } else if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) {
            return 0;
        }
    }
    return i == NB_ID_LEN;
}

/* uid and gid of "uid:gid" (gid defaults to uid). */
static void user_ids(const char *user, unsigned long *uid, unsigned long *gid)
{
    char *end;
    *uid = strtoul(user, &end, 10);
    *gid = *end == ':' ? strtoul(end + 1, NULL, 10) : *uid;
}

void nb_helper_path(const char *configured, const char *name, const char *fallback, char *out,
                    size_t outlen)
{
    char self[PATH_MAX];
    ssize_t n;
    char *slash;
    if (configured[0]) {
        snprintf(out, outlen, "%s", configured);
        return;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash != NULL && (size_t)(slash - self) + 1 + strlen(name) < outlen) {
            snprintf(out, outlen, "%.*s/%s", (int)(slash - self), self, name);
            if (access(out, X_OK) == 0)
                return;
        }
    }
    snprintf(out, outlen, "%s", fallback);
}

/* Docker's default /dev/shm size, kept as the ceiling. */
#define NB_SHM_SIZE (64ULL * 1024 * 1024)

/* size, but at most memory/share: what a tmpfs may hold of a sandbox's memory. */
static uint64_t tmpfs_cap(uint64_t size, uint64_t memory, unsigned share)
{
    uint64_t cap = memory / share;
    return size < cap || cap == 0 ? size : cap;
}

static char *container_config(const struct nb_app *a, const struct nb_sandbox_spec *s,
                              const char *id, int64_t expires)
{
    const struct nb_conf *c = &a->conf;
    yajl_gen g = nb_json_gen();
    char tmp[PATH_MAX + 64], bin[PATH_MAX];
    unsigned long uid, gid;

    user_ids(c->sandbox_user, &uid, &gid);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Image", s->image);
    /* PID 1 is the agent, whatever the image would have run */
    nb_json_cstr(g, "Entrypoint");
    yajl_gen_array_open(g);
    nb_json_cstr(g, NB_INIT_MOUNT);
    yajl_gen_array_close(g);
    nb_json_cstr(g, "Cmd");
    yajl_gen_array_open(g);
    nb_json_cstr(g, "--");
    yajl_gen_array_close(g);
    nb_json_kv_str(g, "User", c->sandbox_user);
    nb_json_kv_str(g, "WorkingDir", c->workspace);
    snprintf(tmp, sizeof(tmp), "%.8s", id);
    nb_json_kv_str(g, "Hostname", tmp);
    nb_json_cstr(g, "Env");
    yajl_gen_array_open(g);
    snprintf(tmp, sizeof(tmp), "HOME=%s", c->workspace);
    nb_json_cstr(g, tmp);
    for (unsigned i = 0; i < s->n_env; i++)
        nb_json_cstr(g, s->env[i]);
    yajl_gen_array_close(g);
    nb_json_cstr(g, "Labels");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "nanobox.sandbox", id);
    nb_json_kv_str(g, "nanobox.instance", c->instance);
    snprintf(tmp, sizeof(tmp), "%lld", (long long)expires);
    nb_json_kv_str(g, "nanobox.expires", tmp);
    yajl_gen_map_close(g);

    nb_json_cstr(g, "HostConfig");
    yajl_gen_map_open(g);
    nb_json_cstr(g, "Binds");
    yajl_gen_array_open(g);
    nb_helper_path(c->init_path, "nanobox-init", NB_LIBEXECDIR "/nanobox-init", bin, sizeof(bin));
    snprintf(tmp, sizeof(tmp), "%s:%s:ro", bin, NB_INIT_MOUNT);
    nb_json_cstr(g, tmp);
    yajl_gen_array_close(g);
    nb_json_kv_str(g, "NetworkMode", s->network_bridge ? "bridge" : "none");
    nb_json_kv_int(g, "Memory", (long long)s->memory);
    nb_json_kv_int(g, "MemorySwap", (long long)s->memory);
    nb_json_kv_int(g, "NanoCpus", (long long)s->nano_cpus);
    nb_json_kv_int(g, "PidsLimit", (long long)s->pids);
    nb_json_cstr(g, "CapDrop");
    yajl_gen_array_open(g);
    nb_json_cstr(g, "ALL");
    yajl_gen_array_close(g);
    nb_json_cstr(g, "SecurityOpt");
    yajl_gen_array_open(g);
    nb_json_cstr(g, "no-new-privileges");
    yajl_gen_array_close(g);
    nb_json_kv_bool(g, "ReadonlyRootfs", 1);
    /*
     * tmpfs pages are charged to the sandbox's memory cgroup and cannot be
     * swapped: mounts as large as the memory limit would let a full
     * workspace OOM-kill its writer (and then the agent) instead of giving
     * ENOSPC. So each is capped by a share of this sandbox's memory.
     */
    nb_json_kv_int(g, "ShmSize", (long long)tmpfs_cap(NB_SHM_SIZE, s->memory, 8));
    nb_json_cstr(g, "Tmpfs");
    yajl_gen_map_open(g);
    snprintf(tmp, sizeof(tmp), "rw,nosuid,nodev,size=%llu,mode=1777",
             (unsigned long long)tmpfs_cap(c->tmp_size, s->memory, 8));
    nb_json_kv_str(g, "/tmp", tmp);
    snprintf(tmp, sizeof(tmp), "rw,nosuid,nodev,exec,size=%llu,uid=%lu,gid=%lu,mode=0755",
             (unsigned long long)tmpfs_cap(c->workspace_size, s->memory, 2), uid, gid);
    nb_json_kv_str(g, c->workspace, tmp);
    yajl_gen_map_close(g);
    nb_json_cstr(g, "LogConfig");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Type", "none");
    yajl_gen_map_close(g);
    yajl_gen_map_close(g); /* HostConfig */
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

/* Destroy one warm sandbox to free its slot; 0 if one was. */
static int pool_evict(struct nb_app *a)
{
    char id[NB_ID_LEN + 1] = "", cid[NB_CID_LEN + 1] = "";
    uint32_t gen = 0;
    struct nb_derr de = {0};
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        if (nb_table_mark_destroying(&a->table, s, NB_SLOT_POOLED, nb_now()) != 0)
            continue;
        snprintf(id, sizeof(id), "%s", s->id);
        snprintf(cid, sizeof(cid), "%s", s->container_id);
        gen = s->generation;
        break;
    }
    nb_table_unlock(&a->table);
    if (id[0] == '\0')
        return -1;
    return nb_sandbox_finish_destroy(a, id, cid, gen, &de);
}

/* Create and start a container for spec; its slot ends in final_state. */
static int sandbox_make(struct nb_app *a, const struct nb_sandbox_spec *spec, uint32_t final_state,
                        struct nb_slot *out, struct nb_apierr *ae)
{
    char id[NB_ID_LEN + 1], name[64], cid[65] = "";
    int64_t now = nb_now(), expires = now + spec->ttl;
    struct nb_slot *s;
    struct nb_derr de = {0};
    uint32_t gen;
    uuid_t u;
    char *json;
    int running = 0;
    pid_t pid = 0;

    uuid_generate_random(u);
    uuid_unparse_lower(u, id);

retry:
    nb_table_lock(&a->table);
    s = nb_table_reserve(&a->table, id, now, expires);
    if (s != NULL) {
        gen = s->generation;
        s->memory = spec->memory;
        s->nano_cpus = spec->nano_cpus;
        s->pids = spec->pids;
        s->network_bridge = (uint32_t)spec->network_bridge;
        snprintf(s->image, sizeof(s->image), "%s", spec->image);
        snprintf(s->metadata, sizeof(s->metadata), "%s", spec->metadata);
    }
    nb_table_unlock(&a->table);
    if (s == NULL && final_state == NB_SLOT_RUNNING && pool_evict(a) == 0)
        goto retry; /* a warm sandbox gave its slot to a request */
    if (s == NULL) {
        nb_apierr_set(ae, 503, "capacity", "all %u sandbox slots are in use: destroy one or raise max_sandboxes",
                      a->table.nslots);
        return -1;
    }

    snprintf(name, sizeof(name), "nanobox-%s", id);
    json = container_config(a, spec, id, expires);
    if (nb_docker_create(&a->docker, name, json, cid, &de) != 0) {
        if (de.kind == NB_DERR_HTTP && de.status == 404)
            nb_apierr_set(ae, 503, "image_missing",
                          "image %s is not on the Docker host (build it with src/setup/image.sh): %s",
                          spec->image, de.msg);
        else
            nb_apierr_docker(ae, &de, "create the sandbox container");
        goto fail;
    }
    if (nb_docker_start(&a->docker, cid, &de) != 0) {
        nb_apierr_docker(ae, &de, "start the sandbox container");
        if (ae->status == 404 || ae->status == 409)
            nb_apierr_set(ae, 502, "docker_error", "could not start the sandbox container: %s", de.msg);
        goto fail;
    }
    if (nb_docker_inspect(&a->docker, cid, &running, &pid, &de) != 0) {
        nb_apierr_docker(ae, &de, "inspect the sandbox container"); /* 503 if Docker went away */
        goto fail;
    }
    if (!running) {
        nb_apierr_set(ae, 502, "docker_error", "the sandbox container did not stay up");
        goto fail;
    }
    free(json);
    json = NULL;

    nb_table_lock(&a->table);
    s = nb_table_commit(&a->table, id, gen, final_state, cid, pid, nb_now());
    if (s != NULL) {
        *out = *s;
        s = out; /* mark success */
    }
    nb_table_unlock(&a->table);
    if (s == NULL) {
        /* reconciliation judged us dead and took the slot: undo */
        nb_apierr_set(ae, 500, "internal", "the sandbox slot was reclaimed while creating");
        nb_docker_remove(&a->docker, name, &de);
        return -1;
    }
    nb_info("created %s %s (container %.12s)", final_state == NB_SLOT_POOLED ? "warm sandbox" : "sandbox",
            id, cid);
    return 0;

fail:
    free(json);
    json = NULL;
    /* a create that never reached dockerd left nothing behind to remove */
    if (!(cid[0] == '\0' && de.unsent) && nb_docker_remove(&a->docker, cid[0] ? cid : name, &de) != 0) {
        /* disown the slot: the next reconciliation removes container and slot */
        nb_warn("could not remove container %s after a failed create: %s", name, de.msg);
        nb_table_lock(&a->table);
        nb_table_disown(&a->table, id, gen);
        nb_table_unlock(&a->table);
        return -1;
    }
    nb_table_lock(&a->table);
    nb_table_free(&a->table, id, gen);
    nb_table_unlock(&a->table);
    return -1;
}

/* Can a request be served by a warm sandbox (made with the defaults)? */
static int pool_fits(const struct nb_conf *c, const struct nb_sandbox_spec *spec)
{
    return c->warm_pool > 0 && !strcmp(spec->image, c->images[0]) && spec->memory == c->memory &&
           spec->nano_cpus == c->nano_cpus && spec->pids == c->pids && !spec->network_bridge &&
           spec->n_env == 0;
}

/*
 * Hand out a warm sandbox: it becomes RUNNING with the request's TTL and
 * metadata (its id was never shown to anyone before). Its agent must
 * answer, else it is destroyed and the caller creates one cold.
 */
static int pool_take(struct nb_app *a, const struct nb_sandbox_spec *spec, struct nb_slot *out)
{
    struct nb_apierr ae;
    struct nb_slot *s;
    int64_t now = nb_now();
    int found = 0;

    nb_table_lock(&a->table);
    s = nb_table_hand_out(&a->table, spec->image, now, now + spec->ttl);
    if (s != NULL) {
        snprintf(s->metadata, sizeof(s->metadata), "%s", spec->metadata);
        *out = *s;
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found)
        return -1;
    if (nb_agent_ping(out, 1000, &ae) != 0) {
        nb_warn("warm sandbox %s does not answer (%s): destroying it", out->id, ae.msg);
        nb_sandbox_destroy(a, out->id, &ae);
        return -1;
    }
    nb_info("handed out warm sandbox %s", out->id);
    return 0;
}

int nb_sandbox_create(struct nb_app *a, const struct nb_sandbox_spec *spec, struct nb_slot *out,
                      struct nb_apierr *ae)
{
    if (pool_fits(&a->conf, spec) && pool_take(a, spec, out) == 0)
        return 0;
    return sandbox_make(a, spec, NB_SLOT_RUNNING, out, ae);
}

/* Most time one refill pass may take from the reaper's tick. */
#define POOL_REFILL_BUDGET_MS 2000

void nb_pool_refill(struct nb_app *a)
{
    const struct nb_conf *c = &a->conf;
    struct nb_sandbox_spec spec;
    char extra[NB_ID_LEN + 1] = "", extra_cid[NB_CID_LEN + 1] = "";
    uint32_t pooled = 0, free_slots = 0, extra_gen = 0;
    struct timespec t0, t1;

    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        if (s->state == NB_SLOT_FREE)
            free_slots++;
        if (s->state != NB_SLOT_POOLED)
            continue;
        if (pooled >= c->warm_pool || strcmp(s->image, c->images[0]) != 0) {
            /* more than configured now, or of an image no longer the default: one per pass */
            if (extra[0] == '\0' &&
                nb_table_mark_destroying(&a->table, s, NB_SLOT_POOLED, nb_now()) == 0) {
                snprintf(extra, sizeof(extra), "%s", s->id);
                snprintf(extra_cid, sizeof(extra_cid), "%s", s->container_id);
                extra_gen = s->generation;
            }
            continue;
        }
        pooled++;
    }
    nb_table_unlock(&a->table);
    if (extra[0] != '\0') {
        struct nb_derr de = {0};
        if (nb_sandbox_finish_destroy(a, extra, extra_cid, extra_gen, &de) == 0)
            nb_info("removed surplus warm sandbox %s", extra);
    }

    memset(&spec, 0, sizeof(spec));
    snprintf(spec.image, sizeof(spec.image), "%s", c->images[0]);
    spec.memory = c->memory;
    spec.nano_cpus = c->nano_cpus;
    spec.pids = c->pids;
    spec.ttl = c->max_ttl; /* the label's; a hand-out sets the real expiry in the table */
    snprintf(spec.metadata, sizeof(spec.metadata), "{}");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* never take the slots users need: keep as many free as the pool is big */
    while (pooled < c->warm_pool && free_slots > c->warm_pool) {
        struct nb_slot slot;
        struct nb_apierr ae;
        if (sandbox_make(a, &spec, NB_SLOT_POOLED, &slot, &ae) != 0) {
            nb_warn("could not refill the warm pool: %s", ae.msg);
            break;
        }
        pooled++;
        free_slots--;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 > POOL_REFILL_BUDGET_MS)
            break;
    }
}

int nb_sandbox_get(struct nb_app *a, const char *id, struct nb_slot *out, struct nb_apierr *ae)
{
    struct nb_slot *s;
    int found = 0;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && s->state == NB_SLOT_RUNNING && s->expires > nb_now()) {
        *out = *s;
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        nb_apierr_set(ae, 404, "not_found", "no sandbox %s (it may have expired or been destroyed)", id);
        return -1;
    }
    return 0;
}

int nb_sandbox_extend(struct nb_app *a, const char *id, unsigned ttl, int64_t *expires,
                      struct nb_apierr *ae)
{
    struct nb_slot *s;
    int found = 0;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && s->state == NB_SLOT_RUNNING && s->expires > nb_now()) {
        s->expires = nb_now() + ttl;
        *expires = s->expires;
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        nb_apierr_set(ae, 404, "not_found", "no sandbox %s (it may have expired or been destroyed)", id);
        return -1;
    }
    return 0;
}

int nb_sandbox_finish_destroy(struct nb_app *a, const char *id, const char *cid, uint32_t gen,
                              struct nb_derr *de)
{
    char name[64];
    snprintf(name, sizeof(name), "nanobox-%s", id);
    nb_ports_stop_all(a, id);
    if (nb_docker_remove(&a->docker, cid[0] ? cid : name, de) != 0)
        return -1;
    nb_table_lock(&a->table);
    nb_table_free(&a->table, id, gen);
    nb_table_unlock(&a->table);
    return 0;
}

int nb_sandbox_mark_destroy(struct nb_app *a, const char *id, char cid[NB_CID_LEN + 1],
                            uint32_t *gen, struct nb_apierr *ae)
{
    struct nb_slot *s;
    int found = 0;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && nb_table_mark_destroying(&a->table, s, NB_SLOT_RUNNING, nb_now()) == 0) {
        *gen = s->generation;
        snprintf(cid, NB_CID_LEN + 1, "%s", s->container_id);
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        nb_apierr_set(ae, 404, "not_found", "no sandbox %s (it may have expired or been destroyed)", id);
        return -1;
    }
    return 0;
}

int nb_sandbox_destroy(struct nb_app *a, const char *id, struct nb_apierr *ae)
{
    char cid[NB_CID_LEN + 1] = "";
    uint32_t gen = 0;
    struct nb_derr de = {0};

    if (nb_sandbox_mark_destroy(a, id, cid, &gen, ae) != 0)
        return -1;
    if (nb_sandbox_finish_destroy(a, id, cid, gen, &de) != 0) {
        /* put it back so the caller (or the reaper) can try again */
        nb_table_lock(&a->table);
        nb_table_unmark_destroying(&a->table, id, gen);
        nb_table_unlock(&a->table);
        nb_apierr_docker(ae, &de, "remove the sandbox container");
        return -1;
    }
    nb_info("destroyed sandbox %s", id);
    return 0;
}
