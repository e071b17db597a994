/*
 * sandbox.c - see sandbox.h.
 *
 * The table slot is reserved before the container exists and freed only
 * after the container is gone, so at every moment a container of ours has a
 * slot: that is what lets reconciliation call any other labelled container
 * an orphan. Docker calls are never made while holding the table lock,
 * and every change of a slot's state is a transition of table.c's.
 *
 * The warm pool is reached only through a->warm (struct nb_sandbox_source):
 * warm.c builds on this file, never the other way round.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adopt.h"
#include "clock.h"
#include "isolation.h"
#include "json.h"
#include "log.h"
#include "history.h"
#include "metrics.h"
#include "ports.h"
#include "registry.h"
#include "rootdisk.h"
#include "sandbox.h"
#include "snapshot.h"
#include "templates.h"

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

/* Docker's default /dev/shm size, kept as the ceiling. */
#define NB_SHM_SIZE (64ULL * 1024 * 1024)

/* size, but at most memory/share: what a tmpfs may hold of a sandbox's memory. */
static uint64_t tmpfs_cap(uint64_t size, uint64_t memory, unsigned share)
{
    uint64_t cap = memory / share;
    return size < cap || cap == 0 ? size : cap;
}

/* "<host path of file>:<where>:ro", a read-only bind of isolation.c's file. */
static void bind_ro(yajl_gen g, const struct nb_conf *c, const char *file, uint32_t slot,
                    const char *where)
{
    char path[PATH_MAX], bind[PATH_MAX + 64];
    nb_isolation_path(c, file, slot, path, sizeof(path));
    snprintf(bind, sizeof(bind), "%s:%s:ro", path, where);
    nb_json_cstr(g, bind);
}

static char *container_config(const struct nb_app *a, const struct nb_sandbox_spec *s,
                              const char *id, uint32_t slot, int64_t created, int64_t expires,
                              int pooled)
{
    const struct nb_conf *c = &a->conf;
    yajl_gen g = nb_json_gen();
    char tmp[PATH_MAX + 64];
    unsigned long uid, gid;
    /*
     * A template the operator gave a root (root_templates): the container
     * starts as uid 0 and the agent (--user) keeps only what it needs to
     * start commands as the slot's uid, or as a root without capabilities
     * when one asks (sudo, user "root"; docs/SECURITY.md). The image is
     * writable so that root can install what it owns.
     */
    int root = nb_template_root(c, s->image);
    /* E2B's layout (isolation.h): its workspace is e2b_home, its user e2b_home's name */
    int e2b = (s->lifecycle & NB_LIFE_E2B_HOME) != 0;
    const char *ws = nb_isolation_workspace(c, s->lifecycle);

    nb_isolation_ids(c, slot, &uid, &gid);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Image", s->run_image != NULL ? s->run_image : s->image);
    /* PID 1 is the agent, whatever the image would have run */
    nb_json_cstr(g, "Entrypoint");
    yajl_gen_array_open(g);
    nb_json_cstr(g, NB_INIT_MOUNT);
    yajl_gen_array_close(g);
    nb_json_cstr(g, "Cmd");
    yajl_gen_array_open(g);
    snprintf(tmp, sizeof(tmp), "%lu:%lu", uid, gid);
    if (root) {
        nb_json_cstr(g, "--user");
        nb_json_cstr(g, tmp);
    }
    nb_json_cstr(g, "--");
    yajl_gen_array_close(g);
    nb_json_kv_str(g, "User", root ? "0:0" : tmp);
    nb_json_kv_str(g, "WorkingDir", ws);
    snprintf(tmp, sizeof(tmp), "%.8s", id);
    nb_json_kv_str(g, "Hostname", tmp);
    nb_json_cstr(g, "Env");
    yajl_gen_array_open(g);
    snprintf(tmp, sizeof(tmp), "HOME=%s", ws);
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
    /* its owner key; "" for a warm one, which gets its owner at hand-out (in the table only) */
    nb_json_kv_str(g, "nanobox.owner", s->key != NULL ? s->key->name : "");
    /*
     * The rest of its slot, so that a table lost or of another layout (an
     * upgrade) can adopt it again (adopt.c). What changes later (a warm
     * one's owner and expiry, a TTL extended) goes to its lease file.
     */
    snprintf(tmp, sizeof(tmp), "%u", (unsigned)slot);
    nb_json_kv_str(g, "nanobox.slot", tmp);
    snprintf(tmp, sizeof(tmp), "%lld", (long long)created);
    nb_json_kv_str(g, "nanobox.created", tmp);
    nb_json_kv_str(g, "nanobox.image", s->image);
    snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)s->memory);
    nb_json_kv_str(g, "nanobox.memory", tmp);
    snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)s->nano_cpus);
    nb_json_kv_str(g, "nanobox.nano_cpus", tmp);
    snprintf(tmp, sizeof(tmp), "%lld", (long long)s->pids);
    nb_json_kv_str(g, "nanobox.pids", tmp);
    nb_json_kv_str(g, "nanobox.network", s->network_bridge ? "bridge" : "none");
    nb_json_kv_str(g, "nanobox.auto_resume", s->lifecycle & NB_LIFE_AUTO_RESUME ? "1" : "0");
    nb_json_kv_str(g, "nanobox.on_timeout",
                   s->lifecycle & NB_LIFE_PAUSE_ON_TIMEOUT ? "pause" : "destroy");
    nb_json_kv_str(g, "nanobox.pooled", pooled ? "1" : "0");
    nb_json_kv_str(g, "nanobox.root", root ? "1" : "0");
    if (e2b)
        nb_json_kv_str(g, "nanobox.home", "e2b");
    nb_json_kv_str(g, "nanobox.metadata", s->metadata[0] ? s->metadata : "{}");
    if (s->n_volumes > 0) {
        /* its mounts, for a fork of it and the resume of its pause without memory */
        char vols[NB_VOLUMES_PER_SANDBOX * (NB_VOLUME_NAME_MAX + NB_VOLUME_PATH_MAX + 2) + 1];
        nb_volume_label(s->volumes, s->n_volumes, vols, sizeof(vols));
        nb_json_kv_str(g, NB_VOLUME_LABEL, vols);
    }
    yajl_gen_map_close(g);

    nb_json_cstr(g, "HostConfig");
    yajl_gen_map_open(g);
    nb_json_cstr(g, "Binds");
    yajl_gen_array_open(g);
    bind_ro(g, c, "nanobox-init", slot, NB_INIT_MOUNT);
    bind_ro(g, c, "kernel", slot, NB_KERNEL_MOUNT);
    if (nb_isolation_per_slot(c)) {
        /* the image's passwd cannot name the slot's uid: id -un, whoami, ~ */
        bind_ro(g, c, e2b ? "passwd-e2b" : "passwd", slot, "/etc/passwd");
        bind_ro(g, c, e2b ? "group-e2b" : "group", slot, "/etc/group");
    }
    if (nb_isolation_home_link(c) && !e2b) {
        /* E2B's /home/user: the workspace under the name E2B's SDKs expect */
        bind_ro(g, c, "home", slot, "/home");
    }
    /* sudo: the agent's own binary, a client of it under that name */
    bind_ro(g, c, "nanobox-init", slot, "/usr/local/bin/sudo");
    if (!s->network_bridge) {
        /* instead of Docker's copies of the host's resolv.conf and hosts */
        bind_ro(g, c, "hostname", slot, "/etc/hostname");
        bind_ro(g, c, "hosts", slot, "/etc/hosts");
        bind_ro(g, c, "resolv.conf", slot, "/etc/resolv.conf");
    }
    yajl_gen_array_close(g);
    /*
     * A devpts of its own with a "max": ptys are counted host-wide
     * (kernel.pty.nr), and Docker's /dev/pts has no bound. Docker mounts
     * only bind, volume and tmpfs, so it is an anonymous volume of the
     * local driver, removed with the container (DELETE ?v=1).
     */
    nb_json_cstr(g, "Mounts");
    yajl_gen_array_open(g);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Type", "volume");
    nb_json_kv_str(g, "Target", "/dev/pts");
    nb_json_cstr(g, "VolumeOptions");
    yajl_gen_map_open(g);
    nb_json_cstr(g, "DriverConfig");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Name", "local");
    nb_json_cstr(g, "Options");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "type", "devpts");
    nb_json_kv_str(g, "device", "devpts");
    snprintf(tmp, sizeof(tmp), "newinstance,ptmxmode=0666,mode=0620,gid=5,max=%u", c->sandbox_ptys);
    nb_json_kv_str(g, "o", tmp);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    /* whose it is: reconciliation sweeps the instance's unused ones
     * (nb_docker_volume_prune), down.sh --purge too */
    nb_json_cstr(g, "Labels");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "nanobox.instance", c->instance);
    nb_json_kv_str(g, "nanobox.sandbox", id);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    /* its owner's persistent volumes (volume.h): NoCopy, the image's files stay out */
    for (unsigned i = 0; i < s->n_volumes; i++) {
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "Type", "volume");
        nb_json_kv_str(g, "Source", s->volumes[i].docker);
        nb_json_kv_str(g, "Target", s->volumes[i].path);
        nb_json_cstr(g, "VolumeOptions");
        yajl_gen_map_open(g);
        nb_json_kv_bool(g, "NoCopy", 1);
        yajl_gen_map_close(g);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    /* open files are per process: bound them, pids bounds the processes */
    nb_json_cstr(g, "Ulimits");
    yajl_gen_array_open(g);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Name", "nofile");
    nb_json_kv_int(g, "Soft", c->sandbox_nofile);
    nb_json_kv_int(g, "Hard", c->sandbox_nofile);
    yajl_gen_map_close(g);
    yajl_gen_array_close(g);
    /* bridge: nanobox's own network, where network.c's rules hold (see network.h) */
    nb_json_kv_str(g, "NetworkMode", s->network_bridge ? c->bridge_network : "none");
    nb_json_kv_int(g, "Memory", (long long)s->memory);
    nb_json_kv_int(g, "MemorySwap", (long long)s->memory);
    nb_json_kv_int(g, "NanoCpus", (long long)s->nano_cpus);
    nb_json_kv_int(g, "PidsLimit", (long long)s->pids);
    nb_json_cstr(g, "CapDrop");
    yajl_gen_array_open(g);
    nb_json_cstr(g, "ALL");
    yajl_gen_array_close(g);
    if (root) {
        /* the agent's, to start commands as the slot's uid or as a root it
         * strips of every capability; no command keeps any (nanobox-init) */
        nb_json_cstr(g, "CapAdd");
        yajl_gen_array_open(g);
        nb_json_cstr(g, "SETUID");
        nb_json_cstr(g, "SETGID");
        nb_json_cstr(g, "SETPCAP");
        nb_json_cstr(g, "KILL");
        /* at its start only: to map uid 0 into the user namespace of
         * root commands (nanobox-init's root.c); it then drops it */
        nb_json_cstr(g, "SETFCAP");
        yajl_gen_array_close(g);
    }
    nb_json_cstr(g, "SecurityOpt");
    yajl_gen_array_open(g);
    nb_json_cstr(g, "no-new-privileges");
    if (a->seccomp != NULL) {
        /* the Engine API takes the profile's JSON itself, not a path */
        const char *prof = root && a->seccomp_root != NULL ? a->seccomp_root : a->seccomp;
        size_t n = strlen(prof);
        char *opt = malloc(n + 9);
        if (opt == NULL)
            abort();
        memcpy(opt, "seccomp=", 8);
        memcpy(opt + 8, prof, n + 1);
        nb_json_cstr(g, opt);
        free(opt);
    }
    yajl_gen_array_close(g);
    nb_json_kv_bool(g, "ReadonlyRootfs", !root);
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
    nb_json_kv_str(g, ws, tmp);
    yajl_gen_map_close(g);
    nb_json_cstr(g, "LogConfig");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Type", "none");
    yajl_gen_map_close(g);
    yajl_gen_map_close(g); /* HostConfig */
    if (s->network_bridge) {
        /* the slot's own address, which its rules were written for */
        nb_network_addr(c, slot, tmp, sizeof(tmp));
        nb_json_cstr(g, "NetworkingConfig");
        yajl_gen_map_open(g);
        nb_json_cstr(g, "EndpointsConfig");
        yajl_gen_map_open(g);
        nb_json_cstr(g, c->bridge_network);
        yajl_gen_map_open(g);
        nb_json_cstr(g, "IPAMConfig");
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "IPv4Address", tmp);
        yajl_gen_map_close(g);
        yajl_gen_map_close(g);
        yajl_gen_map_close(g);
        yajl_gen_map_close(g);
    }
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

/*
 * Create and start sandbox id's container for spec in table slot number
 * slot (its uid, address and bind files), its snapshot's files restored;
 * its id into cid (set as soon as Docker made it, for the caller to remove
 * on failure) and its PID 1 into *pid. 0, or -1 with ae (de: Docker's
 * error, de->unsent when the create never reached dockerd).
 */
static int boot(struct nb_app *a, const struct nb_sandbox_spec *spec, const char *id, uint32_t slot,
                int64_t created, int64_t expires, int pooled, char cid[65], pid_t *pid,
                struct nb_derr *de, struct nb_apierr *ae)
{
    char name[64];
    char *json;
    int running = 0, bounded = nb_rootdisk_wanted(&a->conf, spec->image), rc = -1;

    snprintf(name, sizeof(name), "nanobox-%s", id);
    json = container_config(a, spec, id, slot, created, expires, pooled);
    if (nb_docker_create(&a->docker, name, json, cid, de) != 0) {
        if (de->kind == NB_DERR_HTTP && de->status == 404)
            nb_apierr_set(
                ae, NB_E_UNAVAILABLE, "image_missing",
                "image %s is not on the Docker host (build it with src/setup/image.sh): %s",
                spec->image, de->msg);
        else
            nb_apierr_docker(ae, de, "create the sandbox container");
        goto out;
    }
    if (bounded) {
        /* before the start: the first write already meets the bound */
        char err[512];
        if (nb_rootdisk_attach(a, cid, err, sizeof(err)) != 0) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "could not bound the sandbox's disk: %s",
                          err);
            goto out;
        }
    }
    if (nb_docker_start(&a->docker, cid, de) != 0) {
        nb_apierr_docker(ae, de, "start the sandbox container");
        if (ae->err == NB_E_NOT_FOUND || ae->err == NB_E_CONFLICT)
            nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error",
                          "could not start the sandbox container: %s", de->msg);
        goto out;
    }
    if (nb_docker_inspect(&a->docker, cid, &running, pid, de) != 0) {
        nb_apierr_docker(ae, de, "inspect the sandbox container"); /* 503 if Docker went away */
        goto out;
    }
    if (!running) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "the sandbox container did not stay up");
        goto out;
    }
    if (bounded) {
        char err[512];
        if (nb_rootdisk_verify(&a->conf, *pid, err, sizeof(err)) != 0) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "could not bound the sandbox's disk: %s",
                          err);
            goto out;
        }
    }
    {
        /* a snapshot's image: its /workspace and /tmp back into the fresh tmpfs mounts */
        char err[256];
        if (nb_snapshot_restore(&a->conf, slot, *pid,
                                nb_isolation_workspace(&a->conf, spec->lifecycle), err,
                                sizeof(err)) != 0) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal",
                          "could not restore the snapshot's files: %s", err);
            goto out;
        }
    }
    rc = 0;
out:
    free(json);
    return rc;
}

int nb_sandbox_make(struct nb_app *a, const struct nb_sandbox_spec *spec,
                    enum nb_slot_state final_state, struct nb_slot *out, struct nb_apierr *ae)
{
    char id[NB_ID_LEN + 1], name[64], cid[65] = "";
    int64_t now = nb_clock_real_s(), expires = now + spec->ttl;
    struct nb_slot *s;
    struct nb_derr de = {0};
    uint32_t gen, slot = 0;
    int bounded = nb_rootdisk_wanted(&a->conf, spec->image);
    pid_t pid = 0;

    nb_cluster_new_id(a->node_tag, id);

retry:
    nb_table_lock(&a->table);
    /* checked and reserved under one lock: two creates cannot both pass the last unit */
    if (nb_sandbox_quota_locked(a, spec, ae) != 0) {
        nb_table_unlock(&a->table);
        return -1;
    }
    s = nb_table_reserve(&a->table, id, now, expires);
    if (s != NULL) {
        if (spec->key != NULL)
            snprintf(s->owner, sizeof(s->owner), "%s", spec->key->name);
        gen = s->generation;
        slot = (uint32_t)(s - a->table.slots); /* its uid's, for as long as it lives */
        s->memory = spec->memory;
        s->nano_cpus = spec->nano_cpus;
        s->pids = spec->pids;
        s->network_bridge = (uint32_t)spec->network_bridge;
        snprintf(s->image, sizeof(s->image), "%s", spec->image);
        snprintf(s->metadata, sizeof(s->metadata), "%s", spec->metadata);
        s->lifecycle = spec->lifecycle | (spec->n_volumes > 0 ? NB_LIFE_VOLUMES : 0);
        s->idle_pause = spec->idle_pause;
    }
    nb_table_unlock(&a->table);
    if (s == NULL && final_state == NB_SLOT_RUNNING && a->warm != NULL && a->warm->evict(a) == 0)
        goto retry; /* a warm sandbox gave its slot to a request */
    if (s == NULL) {
        nb_apierr_set(ae, NB_E_CAPACITY, "capacity",
                      "all %u sandbox slots are in use: destroy one or raise max_sandboxes",
                      a->table.nslots);
        return -1;
    }

    /* rules before the container: it never runs without them */
    if (spec->network_bridge && nb_network_apply(a, id, slot, &spec->egress, ae) != 0) {
        nb_network_remove(a, id);
        nb_table_lock(&a->table);
        nb_table_free(&a->table, id, gen);
        nb_table_unlock(&a->table);
        return -1;
    }

    snprintf(name, sizeof(name), "nanobox-%s", id);
    if (!spec->network_bridge) {
        char host[16], err[256];
        snprintf(host, sizeof(host), "%.8s", id); /* the container's Hostname */
        if (nb_isolation_set_hostname(&a->conf, slot, host, err, sizeof(err)) != 0) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "could not prepare the sandbox: %s", err);
            nb_table_lock(&a->table);
            nb_table_free(&a->table, id, gen);
            nb_table_unlock(&a->table);
            return -1;
        }
    }
    if (boot(a, spec, id, slot, now, expires, final_state == NB_SLOT_POOLED, cid, &pid, &de, ae) !=
        0)
        goto fail;

    if (spec->prepare != NULL) {
        struct nb_slot ready;
        int mine = 0;
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, id);
        if (s != NULL && s->generation == gen) {
            ready = *s;
            mine = 1;
        }
        nb_table_unlock(&a->table);
        if (mine) {
            snprintf(ready.container_id, sizeof(ready.container_id), "%s", cid);
            ready.init_pid = pid;
            spec->prepare(a, &ready);
        }
    }

    nb_table_lock(&a->table);
    s = nb_table_commit(&a->table, id, gen, final_state, cid, pid, nb_clock_real_s());
    if (s != NULL) {
        *out = *s;
        s = out; /* mark success */
    }
    nb_table_unlock(&a->table);
    if (s == NULL) {
        /* reconciliation judged us dead and took the slot: undo */
        nb_apierr_set(ae, NB_E_INTERNAL, "internal",
                      "the sandbox slot was reclaimed while creating");
        nb_rootdisk_remove(a, name, bounded, &de);
        return -1;
    }
    nb_info("created %s %s (container %.12s)",
            final_state == NB_SLOT_POOLED ? "warm sandbox" : "sandbox", id, cid);
    return 0;

fail:
    /* a create that never reached dockerd left nothing behind to remove */
    if (!(cid[0] == '\0' && de.unsent) &&
        nb_rootdisk_remove(a, cid[0] ? cid : name, bounded, &de) != 0) {
        /* disown the slot: the next reconciliation removes container and slot */
        nb_warn("could not remove container %s after a failed create: %s", name, de.msg);
        nb_table_lock(&a->table);
        nb_table_disown(&a->table, id, gen);
        nb_table_unlock(&a->table);
        return -1;
    }
    if (spec->network_bridge)
        nb_network_remove(a, id);
    nb_table_lock(&a->table);
    nb_table_free(&a->table, id, gen);
    nb_table_unlock(&a->table);
    return -1;
}

/*
 * On a cluster node the sandbox is registered before it is answered; its
 * key's quotas count what it holds on every node. A create that lost the
 * last unit of a quota to another node's, or that etcd would not register,
 * is undone.
 */
static int registered(struct nb_app *a, const struct nb_sandbox_spec *spec,
                      struct nb_registry_claim *c, const struct nb_slot *made, struct nb_apierr *ae)
{
    struct nb_apierr dae;
    int rc = -1;

    for (int tries = 0; tries < 8; tries++) {
        struct nb_sandbox_spec again = *spec;
        rc = nb_registry_after(a, spec->key, c, made, ae);
        if (rc <= 0)
            break;
        /* another create of the key came between: judge the quotas again,
         * with this one counted here and what came elsewhere */
        again.elsewhere = &c->elsewhere;
        again.memory = again.nano_cpus = 0;
        nb_table_lock(&a->table);
        rc = nb_sandbox_quota_judge(a, &again, 0, ae);
        nb_table_unlock(&a->table);
        if (rc != 0)
            break;
        rc = -1;
        nb_apierr_set(ae, NB_E_UNAVAILABLE, "cluster_unavailable",
                      "the cluster is too busy registering creates of key \"%s\": try again",
                      spec->key != NULL ? spec->key->name : "");
    }
    if (rc == 0)
        return 0;
    if (nb_sandbox_destroy(a, made->id, &dae) != 0)
        nb_warn("sandbox %s: not registered, and not destroyed either: %s", made->id, dae.msg);
    return -1;
}

int nb_sandbox_create(struct nb_app *a, const struct nb_sandbox_spec *spec, struct nb_slot *out,
                      struct nb_apierr *ae)
{
    struct nb_registry_claim claim;
    struct nb_sandbox_spec sp = *spec;
    enum nb_mcreate how = NB_MC_WARM;

    if (nb_registry_before(a, spec->key, &claim, ae) != 0)
        return -1;
    sp.elsewhere = &claim.elsewhere;
    if (a->warm == NULL || sp.n_volumes > 0 || a->warm->take(a, &sp, out) != 0) {
        if (nb_sandbox_make(a, &sp, NB_SLOT_RUNNING, out, ae) != 0)
            return -1;
        how = NB_MC_COLD;
    } else if (sp.idle_pause != 0) {
        struct nb_slot *s;
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, out->id);
        if (s != NULL && s->generation == out->generation)
            s->idle_pause = out->idle_pause = sp.idle_pause;
        nb_table_unlock(&a->table);
    }
    if (claim.on && claim.late_ok && spec->register_late != NULL)
        *spec->register_late = 1; /* the caller's, after the answer */
    else if (claim.on && registered(a, &sp, &claim, out, ae) != 0)
        return -1;
    nb_metrics_create(how);
    return 0;
}

static int not_found(struct nb_apierr *ae, const char *id)
{
    nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                  "no sandbox %s (it may have expired or been destroyed)", id);
    return -1;
}

int nb_sandbox_visible(struct nb_app *a, const char *id, const char *owner, struct nb_apierr *ae)
{
    struct nb_slot *s;
    int found;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    found = nb_slot_live(s, nb_clock_real_s()) && !strcmp(s->owner, owner);
    nb_table_unlock(&a->table);
    return found ? 0 : not_found(ae, id);
}

int nb_sandbox_quota_locked(struct nb_app *a, const struct nb_sandbox_spec *spec,
                            struct nb_apierr *ae)
{
    return nb_sandbox_quota_judge(a, spec, 1, ae);
}

int nb_sandbox_quota_judge(struct nb_app *a, const struct nb_sandbox_spec *spec, unsigned adding,
                           struct nb_apierr *ae)
{
    const struct nb_key *k = spec->key;
    struct nb_table_usage u;
    char q[64];

    if (k == NULL)
        return 0;
    nb_table_usage(&a->table, k->name, &u);
    if (spec->elsewhere != NULL) {
        u.sandboxes += spec->elsewhere->sandboxes;
        u.memory += spec->elsewhere->memory;
        u.nano_cpus += spec->elsewhere->nano_cpus;
    }
    if (k->max_sandboxes && u.sandboxes + adding > k->max_sandboxes) {
        nb_apierr_set(ae, NB_E_LIMIT, "quota",
                      "quota max_sandboxes=%u of key \"%s\" reached: it has %u live sandboxes",
                      k->max_sandboxes, k->name, u.sandboxes);
        return -1;
    }
    if (k->max_memory && u.memory + spec->memory > k->max_memory) {
        nb_apierr_set(ae, NB_E_LIMIT, "quota",
                      "quota max_memory=%llu bytes of key \"%s\" reached: its sandboxes hold "
                      "%llu bytes and this one asks %llu",
                      (unsigned long long)k->max_memory, k->name, (unsigned long long)u.memory,
                      (unsigned long long)spec->memory);
        return -1;
    }
    if (k->max_nano_cpus && u.nano_cpus + spec->nano_cpus > k->max_nano_cpus) {
        snprintf(q, sizeof(q), "%.3f", (double)k->max_nano_cpus / 1e9);
        nb_apierr_set(ae, NB_E_LIMIT, "quota",
                      "quota max_cpus=%s of key \"%s\" reached: its sandboxes hold %.3f CPUs "
                      "and this one asks %.3f",
                      q, k->name, (double)u.nano_cpus / 1e9, (double)spec->nano_cpus / 1e9);
        return -1;
    }
    return 0;
}

int nb_sandbox_get(struct nb_app *a, const char *id, struct nb_slot *out, struct nb_apierr *ae)
{
    struct nb_slot *s;
    int found = 0;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (nb_slot_live(s, nb_clock_real_s())) {
        *out = *s;
        found = 1;
    }
    nb_table_unlock(&a->table);
    return found ? 0 : not_found(ae, id);
}

/* Set the TTL to ttl from now; at_least: only if that is later than it is. */
static int extend(struct nb_app *a, const char *id, unsigned ttl, int at_least, int64_t *expires,
                  struct nb_apierr *ae)
{
    struct nb_slot *s;
    int64_t now = nb_clock_real_s();
    int found = 0;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (nb_slot_live(s, now)) {
        /* a paused sandbox's TTL is stopped: it gets ttl when it resumes */
        if (s->state == NB_SLOT_PAUSED) {
            if (!at_least || s->ttl_left < (int64_t)ttl)
                s->ttl_left = ttl;
            *expires = now + s->ttl_left;
        } else {
            if (!at_least || s->expires < now + (int64_t)ttl)
                s->expires = now + ttl;
            *expires = s->expires;
        }
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found)
        return not_found(ae, id);
    nb_adopt_lease_note(a, id); /* the labels' expiry is no longer its */
    return 0;
}

int nb_sandbox_extend(struct nb_app *a, const char *id, unsigned ttl, int64_t *expires,
                      struct nb_apierr *ae)
{
    return extend(a, id, ttl, 0, expires, ae);
}

int nb_sandbox_extend_min(struct nb_app *a, const char *id, unsigned ttl, int64_t *expires,
                          struct nb_apierr *ae)
{
    return extend(a, id, ttl, 1, expires, ae);
}

/*
 * With the table lock held: the slot of id once no pause or resume that
 * releases or brings back its memory is under way (NB_LIFE_BUSY; the lock
 * is dropped while waiting, at most BUSY_WAIT_MS), or NULL.
 */
#define BUSY_WAIT_MS 300000
static struct nb_slot *settled(struct nb_app *a, const char *id)
{
    struct nb_slot *s = nb_table_find(&a->table, id);
    for (int waited = 0; s != NULL && (s->lifecycle & NB_LIFE_BUSY) && waited < BUSY_WAIT_MS;
         waited += 50) {
        nb_table_unlock(&a->table);
        usleep(50 * 1000);
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, id);
    }
    return s;
}

/* The slot of id if it still has generation gen (lock held), else NULL. */
static struct nb_slot *same_slot(struct nb_app *a, const char *id, uint32_t gen)
{
    struct nb_slot *s = nb_table_find(&a->table, id);
    return s != NULL && s->generation == gen ? s : NULL;
}

void nb_sandbox_touch(struct nb_app *a, const char *id)
{
    struct nb_slot *s;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL)
        s->last_active = nb_clock_real_s();
    nb_table_unlock(&a->table);
}

int nb_sandbox_pause_how(struct nb_app *a, const char *id, int keep_memory, struct nb_slot *out,
                         struct nb_apierr *ae)
{
    struct nb_derr de = {0};
    struct nb_slot *s, copy;
    char prev[80] = "";
    int64_t now = nb_clock_real_s(), expires = 0;
    int found = 0, was_running = 0, rc;

    if (keep_memory)
        return nb_sandbox_pause(a, id, out, ae);
    nb_table_lock(&a->table);
    s = settled(a, id);
    if (nb_slot_live(s, now) && !(s->lifecycle & (NB_LIFE_RELEASED | NB_LIFE_BUSY))) {
        was_running = s->state == NB_SLOT_RUNNING;
        if (was_running) {
            expires = s->expires;
            nb_table_pause(&a->table, s, now, now + (int64_t)a->conf.max_pause);
            if (expires <= now)
                s->ttl_left = (int64_t)a->conf.default_ttl;
        }
        s->lifecycle |= NB_LIFE_BUSY;
        copy = *s;
        found = 1;
    } else if (nb_slot_live(s, now)) {
        found = 2; /* released already */
        copy = *s;
    }
    nb_table_unlock(&a->table);
    if (!found)
        return not_found(ae, id);
    if (found == 2) {
        if (out != NULL)
            *out = copy;
        return 0;
    }
    nb_ports_mark_paused(&a->conf, id, 1);
    /* frozen while its files are read, as a snapshot is */
    if (nb_docker_pause(&a->docker, copy.container_id, &de) != 0) {
        nb_apierr_docker(ae, &de, "pause the sandbox container");
        rc = -1;
    } else {
        /* the image a resumed one runs: replaced by the new one, removed after its container */
        if (copy.lifecycle & NB_LIFE_PAUSE_IMAGE) {
            struct nb_docker_image im;
            char ref[160];
            nb_snapshot_pause_ref(&a->conf, id, ref, sizeof(ref));
            memset(&im, 0, sizeof(im));
            if (nb_docker_image_inspect(&a->docker, ref, &im, &de) == 0)
                snprintf(prev, sizeof(prev), "%s", im.id);
        }
        rc = nb_snapshot_save(a, &copy, ae);
    }
    if (rc != 0) {
        /* as it was: running (thawed) with its TTL, or paused with its memory */
        int gone;
        nb_table_lock(&a->table);
        s = same_slot(a, id, copy.generation);
        gone = s == NULL || s->state == NB_SLOT_DESTROYING;
        if (s != NULL) {
            s->lifecycle &= ~NB_LIFE_BUSY;
            if (was_running && s->state == NB_SLOT_PAUSED &&
                nb_table_resume(&a->table, s, nb_clock_real_s()) == 0)
                s->expires = expires;
        }
        nb_table_unlock(&a->table);
        if (was_running && !gone) {
            if (nb_docker_unpause(&a->docker, copy.container_id, &de) != 0)
                nb_warn("sandbox %s: cannot thaw it after a failed pause: %s", id, de.msg);
            nb_ports_mark_paused(&a->conf, id, 0);
        }
        if (gone) {
            nb_snapshot_drop(a, id); /* destroyed meanwhile (what it saved, if anything) */
            return not_found(ae, id);
        }
        nb_warn("sandbox %s: a pause without memory failed, it keeps %s: %s", id,
                was_running ? "running" : "its memory", ae->msg);
        return -1;
    }
    /* the slot forgets the container before it goes: its removal's event is no sandbox's */
    nb_table_lock(&a->table);
    s = same_slot(a, id, copy.generation);
    if (s != NULL && s->state == NB_SLOT_PAUSED) {
        s->lifecycle |= NB_LIFE_RELEASED | NB_LIFE_PAUSE_IMAGE;
        s->container_id[0] = '\0';
        s->init_pid = 0;
    } else {
        s = NULL; /* destroyed meanwhile: its destroy removes the container */
    }
    nb_table_unlock(&a->table);
    if (s == NULL) {
        nb_snapshot_drop(a, id);
        return not_found(ae, id);
    }
    nb_ports_stop_all(a, id);
    nb_ports_mark_paused(&a->conf, id, 1);
    if (nb_rootdisk_remove(a, copy.container_id, nb_rootdisk_wanted(&a->conf, copy.image), &de) !=
        0)
        nb_warn("sandbox %s: container %.12s not removed after its pause (%s): reconciliation will",
                id, copy.container_id, de.msg);
    else if (prev[0] && nb_docker_image_remove(&a->docker, prev, 0, &de) != 0)
        nb_warn("sandbox %s: cannot remove its previous pause image %.19s: %s", id, prev, de.msg);
    nb_table_lock(&a->table);
    s = same_slot(a, id, copy.generation);
    if (s != NULL) {
        s->lifecycle &= ~NB_LIFE_BUSY;
        if (out != NULL)
            *out = *s;
    }
    nb_table_unlock(&a->table);
    if (s == NULL)
        return not_found(ae, id); /* destroyed meanwhile: its destroy removed the image */
    nb_adopt_lease_note(a, id);
    nb_info("paused sandbox %s, its memory released", id);
    return 0;
}

/* The resume of a sandbox paused without its memory (nb_sandbox_resume). */
static int resume_cold(struct nb_app *a, const char *id, struct nb_slot *out, struct nb_apierr *ae)
{
    struct nb_sandbox_spec spec;
    struct nb_key owner;
    struct nb_derr de = {0};
    struct nb_slot *s, copy;
    char ref[160], cid[65] = "", name[64];
    int64_t now = nb_clock_real_s();
    uint32_t slot = 0;
    pid_t pid = 0;
    int found = 0, vlock = -1, rc;
    struct nb_volume_mount vols[NB_VOLUMES_PER_SANDBOX];
    struct timespec t0, t1;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    nb_table_lock(&a->table);
    s = settled(a, id);
    if (nb_slot_live(s, now) && (s->lifecycle & NB_LIFE_RELEASED)) {
        s->lifecycle |= NB_LIFE_BUSY;
        copy = *s;
        slot = (uint32_t)(s - a->table.slots);
        found = 1;
    } else if (nb_slot_live(s, now)) {
        found = 2; /* resumed meanwhile */
    }
    nb_table_unlock(&a->table);
    if (found != 1)
        return found == 2 ? nb_sandbox_resume(a, id, out, ae) : not_found(ae, id);

    memset(&spec, 0, sizeof(spec));
    memset(&owner, 0, sizeof(owner));
    snprintf(owner.name, sizeof(owner.name), "%.*s", (int)sizeof(owner.name) - 1, copy.owner);
    snprintf(spec.image, sizeof(spec.image), "%s", copy.image);
    spec.memory = copy.memory;
    spec.nano_cpus = copy.nano_cpus;
    spec.pids = copy.pids;
    spec.network_bridge = (int)copy.network_bridge; /* its chain stayed */
    snprintf(spec.metadata, sizeof(spec.metadata), "%s", copy.metadata);
    spec.lifecycle = copy.lifecycle & ~(NB_LIFE_RELEASED | NB_LIFE_BUSY);
    spec.key = &owner; /* its owner label, for adoption */
    nb_snapshot_pause_ref(&a->conf, id, ref, sizeof(ref));
    spec.run_image = ref; /* its files and env */
    if (copy.lifecycle & NB_LIFE_VOLUMES) {
        /* the same volumes at the same paths: its pause image's label names them */
        char path[256];
        snprintf(path, sizeof(path), "/images/%s/json", ref);
        if (nb_volume_mounts_of(a, path, vols, &spec.n_volumes, ae) != 0 ||
            nb_volume_prepare(a, copy.owner, nb_isolation_workspace(&a->conf, copy.lifecycle), vols,
                              spec.n_volumes, &vlock, ae) != 0)
            goto failed;
        spec.volumes = vols;
    }
    rc = boot(a, &spec, id, slot, copy.created, now + copy.ttl_left, 0, cid, &pid, &de, ae);
    nb_volume_release(vlock); /* the container holds them now (or failed) */
    if (rc != 0) {
        snprintf(name, sizeof(name), "nanobox-%s", id);
        if (!(cid[0] == '\0' && de.unsent) &&
            nb_rootdisk_remove(a, cid[0] ? cid : name, nb_rootdisk_wanted(&a->conf, spec.image),
                               &de) != 0)
            nb_warn("sandbox %s: container not removed after a failed resume: %s", id, de.msg);
failed:
        nb_table_lock(&a->table);
        s = same_slot(a, id, copy.generation);
        if (s != NULL)
            s->lifecycle &= ~NB_LIFE_BUSY;
        nb_table_unlock(&a->table);
        nb_warn("sandbox %s: resume failed, it stays paused: %s", id, ae->msg);
        return -1;
    }
    nb_table_lock(&a->table);
    s = same_slot(a, id, copy.generation);
    found = s != NULL && s->state == NB_SLOT_PAUSED;
    if (found) {
        snprintf(s->container_id, sizeof(s->container_id), "%s", cid);
        s->init_pid = pid;
        s->lifecycle &= ~(NB_LIFE_RELEASED | NB_LIFE_BUSY);
        nb_table_resume(&a->table, s, nb_clock_real_s());
        if (out != NULL)
            *out = *s;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        /* destroyed meanwhile */
        nb_rootdisk_remove(a, cid, nb_rootdisk_wanted(&a->conf, spec.image), &de);
        nb_snapshot_drop(a, id);
        return not_found(ae, id);
    }
    nb_ports_mark_paused(&a->conf, id, 0);
    nb_adopt_lease_note(a, id);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    nb_info("resumed sandbox %s from its files in %.0f ms (container %.12s)", id,
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6, cid);
    return 0;
}

int nb_sandbox_pause(struct nb_app *a, const char *id, struct nb_slot *out, struct nb_apierr *ae)
{
    char cid[NB_CID_LEN + 1];
    struct nb_derr de = {0};
    struct nb_slot *s;
    int64_t now = nb_clock_real_s(), expires = 0;
    uint32_t gen = 0;
    int found = 0, was_running = 0;

    /* the slot first: from here on no call reaches the frozen processes */
    nb_table_lock(&a->table);
    s = settled(a, id);
    if (nb_slot_live(s, now) && (s->lifecycle & NB_LIFE_RELEASED)) {
        /* paused without its memory: no container to freeze */
        if (out != NULL)
            *out = *s;
        nb_table_unlock(&a->table);
        return 0;
    }
    if (nb_slot_live(s, now)) {
        was_running = s->state == NB_SLOT_RUNNING;
        if (was_running) {
            expires = s->expires;
            nb_table_pause(&a->table, s, now, now + (int64_t)a->conf.max_pause);
            /* its TTL spent (on_timeout "pause", at or past its end): a
             * resume gives it default_ttl */
            if (expires <= now)
                s->ttl_left = (int64_t)a->conf.default_ttl;
        }
        gen = s->generation;
        snprintf(cid, sizeof(cid), "%s", s->container_id);
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found)
        return not_found(ae, id);
    nb_ports_mark_paused(&a->conf, id, 1);
    if (nb_docker_pause(&a->docker, cid, &de) != 0) {
        if (was_running) {
            /* as it was: running, with its TTL */
            nb_table_lock(&a->table);
            s = nb_table_find(&a->table, id);
            if (s != NULL && s->generation == gen &&
                nb_table_resume(&a->table, s, nb_clock_real_s()) == 0)
                s->expires = expires;
            nb_table_unlock(&a->table);
            nb_ports_mark_paused(&a->conf, id, 0);
        }
        nb_apierr_docker(ae, &de, "pause the sandbox container");
        return -1;
    }
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    found = s != NULL && s->generation == gen && s->state == NB_SLOT_PAUSED;
    if (found && out != NULL)
        *out = *s;
    nb_table_unlock(&a->table);
    if (!found)
        return not_found(ae, id); /* destroyed meanwhile */
    if (was_running) {
        nb_adopt_lease_note(a, id); /* its TTL stopped */
        nb_info("paused sandbox %s", id);
    }
    return 0;
}

int nb_sandbox_resume(struct nb_app *a, const char *id, struct nb_slot *out, struct nb_apierr *ae)
{
    char cid[NB_CID_LEN + 1];
    struct nb_derr de = {0};
    struct nb_slot *s;
    uint32_t gen = 0;
    int found = 0, was_paused = 0;

    nb_table_lock(&a->table);
    s = settled(a, id);
    if (nb_slot_live(s, nb_clock_real_s()) && (s->lifecycle & NB_LIFE_RELEASED)) {
        nb_table_unlock(&a->table);
        return resume_cold(a, id, out, ae);
    }
    if (nb_slot_live(s, nb_clock_real_s())) {
        was_paused = s->state == NB_SLOT_PAUSED;
        gen = s->generation;
        snprintf(cid, sizeof(cid), "%s", s->container_id);
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found)
        return not_found(ae, id);
    /* the container first: the slot says RUNNING only once it runs */
    if (nb_docker_unpause(&a->docker, cid, &de) != 0) {
        nb_apierr_docker(ae, &de, "resume the sandbox container");
        return -1;
    }
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    found = s != NULL && s->generation == gen;
    if (found && s->state == NB_SLOT_PAUSED)
        nb_table_resume(&a->table, s, nb_clock_real_s());
    found = found && s->state == NB_SLOT_RUNNING;
    if (found && out != NULL)
        *out = *s;
    nb_table_unlock(&a->table);
    if (!found)
        return not_found(ae, id); /* destroyed meanwhile */
    nb_ports_mark_paused(&a->conf, id, 0);
    if (was_paused) {
        nb_adopt_lease_note(a, id); /* its TTL runs again */
        nb_info("resumed sandbox %s", id);
    }
    return 0;
}

int nb_sandbox_awake(struct nb_app *a, const char *id, struct nb_apierr *ae)
{
    struct nb_slot *s;
    int paused = 0, auto_resume = 0;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (nb_slot_live(s, nb_clock_real_s()) && s->state == NB_SLOT_PAUSED) {
        paused = 1;
        auto_resume = (s->lifecycle & NB_LIFE_AUTO_RESUME) != 0;
    }
    nb_table_unlock(&a->table);
    if (!paused)
        return 0;
    if (auto_resume)
        return nb_sandbox_resume(a, id, NULL, ae);
    nb_apierr_set(ae, NB_E_CONFLICT, "paused",
                  "sandbox %s is paused: resume it first (POST /sandbox/%s/resume), or create "
                  "it with \"auto_resume\": true",
                  id, id);
    return -1;
}

int nb_sandbox_finish_destroy(struct nb_app *a, const char *id, const char *cid, uint32_t gen,
                              struct nb_derr *de)
{
    char name[64], owner[NB_OWNER_LEN + 8] = "";
    struct nb_slot *s;
    int bridge, root, pause_image = 0;
    snprintf(name, sizeof(name), "nanobox-%s", id);
    nb_ports_stop_all(a, id);
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    root = s != NULL && s->generation == gen && nb_rootdisk_wanted(&a->conf, s->image);
    if (s != NULL && s->generation == gen) {
        snprintf(owner, sizeof(owner), "%s", s->owner); /* its registry row's */
        pause_image = (s->lifecycle & NB_LIFE_PAUSE_IMAGE) != 0;
    }
    nb_table_unlock(&a->table);
    if (nb_rootdisk_remove(a, cid[0] ? cid : name, root, de) != 0)
        return -1;
    /* after its container, which may run from it */
    if (pause_image)
        nb_snapshot_drop(a, id);
    nb_ports_mark_paused(&a->conf, id, 0);
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    bridge = s != NULL && s->generation == gen && s->network_bridge;
    nb_table_unlock(&a->table);
    /* after the container: until here its address kept its rules (a failure leaves them to reconciliation) */
    if (bridge && nb_network_remove(a, id) != 0)
        nb_warn("sandbox %s: egress rules not removed; the next reconciliation will", id);
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && s->generation == gen) /* its usage history ends with it */
        nb_history_clear(nb_history, (uint32_t)(s - a->table.slots));
    nb_table_free(&a->table, id, gen);
    nb_table_unlock(&a->table);
    /* a cluster's row, at once, whoever destroys it (a warm one, of no
     * owner, never had one) */
    if (owner[0] != '\0')
        nb_registry_forget(a, id, owner);
    return 0;
}

int nb_sandbox_mark_destroy(struct nb_app *a, const char *id, char cid[NB_CID_LEN + 1],
                            uint32_t *gen, struct nb_apierr *ae)
{
    struct nb_slot *s;
    int found = 0;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && (s->state == NB_SLOT_RUNNING || s->state == NB_SLOT_PAUSED) &&
        nb_table_mark_destroying(&a->table, s, (enum nb_slot_state)s->state, nb_clock_real_s()) ==
            0) {
        *gen = s->generation;
        snprintf(cid, NB_CID_LEN + 1, "%s", s->container_id);
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "no sandbox %s (it may have expired or been destroyed)", id);
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
    /*
     * Docker away (dockerd restarting): say so before anything is undone.
     * The removal could not happen, and the sandbox, which keeps running
     * (live-restore), would come back without its ports.
     */
    if (nb_docker_ping(&a->docker, &de) != 0 && de.kind == NB_DERR_UNREACHABLE) {
        nb_table_lock(&a->table);
        nb_table_unmark_destroying(&a->table, id, gen);
        nb_table_unlock(&a->table);
        nb_apierr_docker(ae, &de, "remove the sandbox container");
        return -1;
    }
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
