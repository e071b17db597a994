/*
 * fork.c - see fork.h.
 *
 * Scratch files under <sandbox_dir>/templates while a fork runs (removed
 * after it, whatever the outcome):
 *   fork-<id>-<pid>-<ns>.tar       the parent's /workspace and /tmp
 *   fork-<id>-<pid>-<ns>.root.tar  what its root wrote into its image
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fork.h"
#include "isolation.h"
#include "json.h"
#include "log.h"
#include "sandbox.h"
#include "snapshot.h"
#include "templates.h"
#include "volume.h"

#define ENV_MAX_BYTES (1024 * 1024)

/* The Config.Env array of Docker's inspect at path (a container's or an image's), or NULL. */
static yajl_val inspect_env(struct nb_app *a, const char *path, yajl_val *doc)
{
    const char *ep[] = {"Config", "Env", NULL};
    struct nb_derr de = {0};
    struct nb_buf b;
    long status = 0;
    char err[64];
    yajl_val env = NULL;

    *doc = NULL;
    nb_buf_init(&b, ENV_MAX_BYTES + 64 * 1024);
    if (nb_docker_request(&a->docker, "GET", path, NULL, 10000, &status, &b, &de) == 0 &&
        status == 200 && b.data != NULL &&
        nb_json_parse(b.data, b.len, 64, doc, err, sizeof(err)) == 0)
        env = yajl_tree_get(*doc, ep, yajl_t_array);
    nb_buf_free(&b);
    return env;
}

/*
 * The env the parent was created with: its container's, less its image's
 * own entries and the HOME sandbox.c sets (they come back by themselves).
 */
static int parent_env(struct nb_app *a, const struct nb_slot *src, char ***out, unsigned *n,
                      struct nb_apierr *ae)
{
    char path[512], home[300];
    yajl_val cdoc, idoc, cenv, ienv;
    char **list;

    *out = NULL;
    *n = 0;
    snprintf(path, sizeof(path), "/containers/%s/json", src->container_id);
    cenv = inspect_env(a, path, &cdoc);
    if (cenv == NULL) {
        yajl_tree_free(cdoc);
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "cannot read the sandbox's environment");
        return -1;
    }
    snprintf(path, sizeof(path), "/images/%s/json", src->image);
    ienv = inspect_env(a, path, &idoc);
    snprintf(home, sizeof(home), "HOME=%s", nb_isolation_workspace(&a->conf, src->lifecycle));
    list = nb_xcalloc(cenv->u.array.len + 1, sizeof(char *));
    for (size_t i = 0; i < cenv->u.array.len; i++) {
        const char *e = nb_json_string(cenv->u.array.values[i]);
        int image_own = 0;
        if (e == NULL || !strcmp(e, home))
            continue;
        for (size_t j = 0; ienv != NULL && j < ienv->u.array.len && !image_own; j++) {
            const char *ie = nb_json_string(ienv->u.array.values[j]);
            image_own = ie != NULL && !strcmp(ie, e);
        }
        if (!image_own)
            list[(*n)++] = nb_xstrdup(e);
    }
    yajl_tree_free(cdoc);
    yajl_tree_free(idoc);
    *out = list;
    return 0;
}

static void env_free(char **env, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        free(env[i]);
    free(env);
}

/* The key's quotas hold count more sandboxes like spec? 0, or 429 quota. */
static int quota_for(struct nb_app *a, const struct nb_sandbox_spec *spec, unsigned count,
                     struct nb_apierr *ae)
{
    struct nb_sandbox_spec all = *spec;
    int rc;
    all.memory = spec->memory * count;
    all.nano_cpus = spec->nano_cpus * count;
    nb_table_lock(&a->table);
    rc = nb_sandbox_quota_judge(a, &all, count, ae);
    nb_table_unlock(&a->table);
    return rc;
}

/* The files into the new sandbox made (its slot index found by id). */
static int fill(struct nb_app *a, const struct nb_slot *made, const char *files, const char *root,
                struct nb_apierr *ae)
{
    struct nb_slot *s;
    uint32_t idx = 0;
    int found = 0;
    char err[512];

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, made->id);
    if (s != NULL && s->generation == made->generation) {
        idx = (uint32_t)(s - a->table.slots);
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "the fork %s went away while it was filled",
                      made->id);
        return -1;
    }
    if (nb_snapshot_apply(&a->conf, idx, made->init_pid,
                          nb_isolation_workspace(&a->conf, made->lifecycle), files, root, err,
                          sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "could not copy the files into the fork: %s",
                      err);
        return -1;
    }
    return 0;
}

int nb_sandbox_fork(struct nb_app *a, const char *id, unsigned count, unsigned ttl,
                    const struct nb_key *key, struct nb_slot *out, struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_sandbox_spec spec;
    struct nb_slot src;
    struct timespec ts, t0, t1;
    char sub[160], files[4096], root[4096];
    struct nb_volume_mount vols[NB_VOLUMES_PER_SANDBOX];
    unsigned made = 0;
    int has_root = 0, failed = 0, rc = -1, vlock = -1;

    if (count < 1 || count > c->fork_max) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "count must be between 1 and %u (the operator's fork_max)", c->fork_max);
        return -1;
    }
    if (nb_sandbox_get(a, id, &src, ae) != 0)
        return -1;
    if (src.lifecycle & (NB_LIFE_RELEASED | NB_LIFE_BUSY)) {
        /* no container to read: its files are in its pause image until a resume */
        nb_apierr_set(ae, NB_E_CONFLICT, "paused",
                      "sandbox %s is paused without its memory: resume it first", id);
        return -1;
    }
    memset(&spec, 0, sizeof(spec));
    snprintf(spec.image, sizeof(spec.image), "%s", src.image);
    spec.memory = src.memory;
    spec.nano_cpus = src.nano_cpus;
    spec.pids = src.pids;
    /* the network's kind; the parent's own allow and deny rules are not copied (docs/API.md) */
    spec.network_bridge = (int)src.network_bridge;
    spec.ttl = ttl;
    snprintf(spec.metadata, sizeof(spec.metadata), "%s", src.metadata);
    spec.lifecycle =
        src.lifecycle & (NB_LIFE_AUTO_RESUME | NB_LIFE_PAUSE_ON_TIMEOUT | NB_LIFE_E2B_HOME);
    spec.key = key;
    /* nothing is made for a key that cannot hold them all */
    if (quota_for(a, &spec, count, ae) != 0)
        return -1;
    if (parent_env(a, &src, &spec.env, &spec.n_env, ae) != 0)
        return -1;
    if (src.lifecycle & NB_LIFE_VOLUMES) {
        /*
         * A volume is shared storage: each fork mounts the parent's at the
         * same paths (nothing of them is copied), if the key still has
         * them; held from removal until the forks are made.
         */
        char path[128];
        snprintf(path, sizeof(path), "/containers/%s/json", src.container_id);
        if (nb_volume_mounts_of(a, path, vols, &spec.n_volumes, ae) != 0 ||
            nb_volume_prepare(a, key != NULL ? key->name : src.owner,
                              nb_isolation_workspace(c, src.lifecycle), vols, spec.n_volumes,
                              &vlock, ae) != 0) {
            env_free(spec.env, spec.n_env);
            return -1;
        }
        spec.volumes = vols;
    }

    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(sub, sizeof(sub), "fork-%s-%d-%lld%09ld.tar", src.id, (int)getpid(),
             (long long)ts.tv_sec, ts.tv_nsec);
    nb_template_work_path(c, sub, files, sizeof(files));
    snprintf(sub, sizeof(sub), "fork-%s-%d-%lld%09ld.root.tar", src.id, (int)getpid(),
             (long long)ts.tv_sec, ts.tv_nsec);
    nb_template_work_path(c, sub, root, sizeof(root));

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (nb_snapshot_capture(a, &src, files, root, &has_root, ae) != 0)
        goto out;
    for (made = 0; made < count && !failed; made++) {
        if (nb_sandbox_create(a, &spec, &out[made], ae) != 0) {
            failed = 1;
            made--; /* not made */
        } else if (fill(a, &out[made], files, has_root ? root : NULL, ae) != 0) {
            failed = 1; /* made, and destroyed with the others */
        }
    }
    if (!failed)
        rc = 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc == 0)
        nb_info("sandbox %s forked into %u in %.0f ms", id, count,
                (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
out:
    if (rc != 0) {
        /* all or nothing: the forks made so far go */
        for (unsigned i = 0; i < made; i++) {
            struct nb_apierr ign = {0};
            if (nb_sandbox_destroy(a, out[i].id, &ign) != 0)
                nb_warn("fork of %s: cannot remove the fork %s: %s", id, out[i].id, ign.msg);
        }
    }
    unlink(files);
    unlink(root);
    env_free(spec.env, spec.n_env);
    nb_volume_release(vlock);
    return rc;
}
