/*
 * test_engine.c - the sandbox engine (sandbox.c, warm.c, reaper.c) against
 * an in-memory Docker put in the place of the real client through its ops
 * table (docker.h): create and its rollback on every failure, destroy,
 * the reaper's expiry and reconciliation rules (docs/ARCHITECTURE.md,
 * "Reaper"), and the warm pool's sizing, refill, hand-out and eviction.
 *
 * The table is a real one in a temporary file; only Docker, the agent's
 * ping (nb_agent_ping) and the code bridge's warm-up (nb_code_warm),
 * defined here, are fakes. Every test ends by
 * checking the invariant the engine exists to keep: each container of ours
 * has a slot, and each live slot its container.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "adopt.h"
#include "agent.h"
#include "app.h"
#include "clock.h"
#include "code.h"
#include "diskcap.h"
#include "isolation.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "reaper.h"
#include "sandbox.h"
#include "templates.h"
#include "volume.h"
#include "warm.h"

#define FAKE_MAX 32

/* ---- the in-memory Docker ---- */

struct fake_ctr {
    char id[65];
    char name[80];    /* nanobox-<sandbox id> */
    char sandbox[64]; /* label nanobox.sandbox */
    char user[32];    /* Config.User as created */
    int running;
    int paused; /* frozen (docker pause); still running */
    int used;
};

struct fake_docker {
    struct fake_ctr ctr[FAKE_MAX];
    unsigned next_id;
    int unreachable;    /* every call: NB_DERR_UNREACHABLE, never sent */
    long create_status; /* nonzero: create answers this HTTP error */
    int start_fails;    /* start answers 500 */
    int exits_at_once;  /* started containers are found stopped */
    int remove_fails;   /* remove answers 500 */
    int pause_fails;    /* pause and unpause answer 500 */
    unsigned creates, removes, pauses, unpauses;
    /* called from inspect: lets a test act while a create waits on Docker */
    void (*on_inspect)(void);
    /* images (the templates engine's) */
    struct nb_docker_image img[FAKE_MAX];
    int img_used[FAKE_MAX];
    const char *build_error;  /* a build streams {"error": this} */
    char build_context[4096]; /* the first bytes of the last build's context tar */
    unsigned imports, builds;
};

static struct fake_docker fake;

static void fake_err(struct nb_derr *e, enum nb_derr_kind kind, long status, const char *msg)
{
    e->kind = kind;
    e->status = status;
    e->unsent = kind == NB_DERR_UNREACHABLE;
    snprintf(e->msg, sizeof(e->msg), "%s", msg);
}

/* Container by id or by name, or NULL. */
static struct fake_ctr *fake_find(const char *ref)
{
    for (size_t i = 0; i < FAKE_MAX; i++)
        if (fake.ctr[i].used && (!strcmp(fake.ctr[i].id, ref) || !strcmp(fake.ctr[i].name, ref)))
            return &fake.ctr[i];
    return NULL;
}

static size_t fake_count(void)
{
    size_t n = 0;

    for (size_t i = 0; i < FAKE_MAX; i++)
        n += fake.ctr[i].used;
    return n;
}

/* A container of ours that the engine did not make (a leftover, an orphan). */
static struct fake_ctr *fake_add(const char *sandbox, int running)
{
    for (size_t i = 0; i < FAKE_MAX; i++) {
        struct fake_ctr *c = &fake.ctr[i];
        if (c->used)
            continue;
        memset(c, 0, sizeof(*c));
        c->used = 1;
        c->running = running;
        snprintf(c->id, sizeof(c->id), "%064x", ++fake.next_id);
        snprintf(c->name, sizeof(c->name), "nanobox-%s", sandbox);
        snprintf(c->sandbox, sizeof(c->sandbox), "%s", sandbox);
        return c;
    }
    fail_msg("the fake Docker is full");
    return NULL;
}

static int fake_ping(struct nb_docker *d, struct nb_derr *e)
{
    (void)d;
    if (fake.unreachable) {
        fake_err(e, NB_DERR_UNREACHABLE, 0, "connection refused");
        return -1;
    }
    return 0;
}

static int fake_create(struct nb_docker *d, const char *name, const char *config_json, char cid[65],
                       struct nb_derr *e)
{
    struct fake_ctr *c;

    (void)d;
    assert_non_null(strstr(config_json, "\"nanobox.sandbox\""));
    if (fake.unreachable) {
        fake_err(e, NB_DERR_UNREACHABLE, 0, "connection refused");
        return -1;
    }
    if (fake.create_status) {
        fake_err(e, NB_DERR_HTTP, fake.create_status, "no such image");
        return -1;
    }
    assert_null(fake_find(name)); /* Docker refuses a second container of one name */
    assert_int_equal(strncmp(name, "nanobox-", 8), 0);
    c = fake_add(name + 8, 0);
    {
        const char *u = strstr(config_json, "\"User\":\"");
        if (u != NULL)
            snprintf(c->user, sizeof(c->user), "%.*s", (int)strcspn(u + 8, "\""), u + 8);
    }
    snprintf(cid, 65, "%s", c->id);
    fake.creates++;
    return 0;
}

static int fake_start(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    struct fake_ctr *c = fake_find(id);

    (void)d;
    if (fake.unreachable) {
        fake_err(e, NB_DERR_UNREACHABLE, 0, "connection refused");
        return -1;
    }
    if (c == NULL) {
        fake_err(e, NB_DERR_HTTP, 404, "no such container");
        return -1;
    }
    if (fake.start_fails) {
        fake_err(e, NB_DERR_HTTP, 500, "cannot start");
        return -1;
    }
    c->running = !fake.exits_at_once;
    return 0;
}

static int fake_remove(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    struct fake_ctr *c = fake_find(id);

    (void)d;
    fake.removes++;
    if (fake.unreachable) {
        fake_err(e, NB_DERR_UNREACHABLE, 0, "connection refused");
        return -1;
    }
    if (fake.remove_fails) {
        fake_err(e, NB_DERR_HTTP, 500, "device busy");
        return -1;
    }
    if (c != NULL)
        c->used = 0; /* and one already gone counts as removed, as with dockerd */
    return 0;
}

static int fake_inspect(struct nb_docker *d, const char *id, int *running, pid_t *pid,
                        struct nb_derr *e)
{
    struct fake_ctr *c = fake_find(id);

    (void)d;
    if (fake.on_inspect != NULL)
        fake.on_inspect();
    if (c == NULL) {
        fake_err(e, NB_DERR_HTTP, 404, "no such container");
        return -1;
    }
    *running = c->running;
    *pid = c->running ? 4242 : 0;
    return 0;
}

/* pause (to 1) or unpause (to 0); already so counts as done, as with dockerd */
static int fake_freeze(const char *id, int to, struct nb_derr *e)
{
    struct fake_ctr *c = fake_find(id);

    if (to)
        fake.pauses++;
    else
        fake.unpauses++;
    if (fake.unreachable) {
        fake_err(e, NB_DERR_UNREACHABLE, 0, "connection refused");
        return -1;
    }
    if (c == NULL) {
        fake_err(e, NB_DERR_HTTP, 404, "no such container");
        return -1;
    }
    if (fake.pause_fails || !c->running) {
        fake_err(e, NB_DERR_HTTP, fake.pause_fails ? 500 : 409, "cannot pause");
        return -1;
    }
    c->paused = to;
    return 0;
}

static int fake_pause(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    (void)d;
    return fake_freeze(id, 1, e);
}

static int fake_unpause(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    (void)d;
    return fake_freeze(id, 0, e);
}

static int fake_list(struct nb_docker *d, const char *instance, nb_docker_ctr_fn cb, void *arg,
                     struct nb_derr *e)
{
    int n = 0;

    (void)d;
    (void)instance;
    if (fake.unreachable) {
        fake_err(e, NB_DERR_UNREACHABLE, 0, "connection refused");
        return -1;
    }
    for (size_t i = 0; i < FAKE_MAX; i++) {
        struct nb_docker_ctr c;
        if (!fake.ctr[i].used)
            continue;
        memset(&c, 0, sizeof(c));
        snprintf(c.id, sizeof(c.id), "%s", fake.ctr[i].id);
        snprintf(c.sandbox, sizeof(c.sandbox), "%s", fake.ctr[i].sandbox);
        c.running = fake.ctr[i].running;
        c.paused = fake.ctr[i].paused;
        cb(arg, &c);
        n++;
    }
    return n;
}

/* Image by repo:tag or id, or -1. */
static int fake_img(const char *ref)
{
    for (int i = 0; i < FAKE_MAX; i++)
        if (fake.img_used[i] && (!strcmp(fake.img[i].ref, ref) || !strcmp(fake.img[i].id, ref)))
            return i;
    return -1;
}

/* A new image named ref (the name moves to it from any other). */
static struct nb_docker_image *fake_img_add(const char *ref)
{
    int old = fake_img(ref);
    if (old >= 0)
        fake.img[old].ref[0] = '\0';
    for (int i = 0; i < FAKE_MAX; i++) {
        if (fake.img_used[i])
            continue;
        fake.img_used[i] = 1;
        memset(&fake.img[i], 0, sizeof(fake.img[i]));
        snprintf(fake.img[i].id, sizeof(fake.img[i].id), "sha256:%064x", ++fake.next_id);
        snprintf(fake.img[i].ref, sizeof(fake.img[i].ref), "%s", ref);
        return &fake.img[i];
    }
    fail_msg("the fake Docker's images are full");
    return NULL;
}

static void fake_label(struct nb_docker_image *im, const char *k, const char *v)
{
    if (!strcmp(k, "nanobox.instance"))
        snprintf(im->instance, sizeof(im->instance), "%s", v);
    else if (!strcmp(k, "nanobox.template"))
        snprintf(im->name, sizeof(im->name), "%s", v);
    else if (!strcmp(k, "nanobox.status"))
        snprintf(im->status, sizeof(im->status), "%s", v);
    else if (!strcmp(k, "nanobox.kind"))
        snprintf(im->kind, sizeof(im->kind), "%s", v);
    else if (!strcmp(k, "nanobox.error"))
        snprintf(im->error, sizeof(im->error), "%s", v);
    else if (!strcmp(k, "nanobox.created_at"))
        im->created_at = strtoll(v, NULL, 10);
}

static int fake_image_inspect(struct nb_docker *d, const char *ref, struct nb_docker_image *im,
                              struct nb_derr *e)
{
    int i = fake_img(ref);
    (void)d;
    if (fake.unreachable) {
        fake_err(e, NB_DERR_UNREACHABLE, 0, "unreachable");
        return -1;
    }
    if (i < 0) {
        fake_err(e, NB_DERR_HTTP, 404, "No such image");
        return -1;
    }
    *im = fake.img[i];
    return 0;
}

static int fake_image_list(struct nb_docker *d, const char *instance, nb_docker_image_fn cb,
                           void *arg, struct nb_derr *e)
{
    int n = 0;
    (void)d;
    if (fake.unreachable) {
        fake_err(e, NB_DERR_UNREACHABLE, 0, "unreachable");
        return -1;
    }
    for (int i = 0; i < FAKE_MAX; i++)
        if (fake.img_used[i] && !strcmp(fake.img[i].instance, instance) && fake.img[i].name[0]) {
            cb(arg, &fake.img[i]);
            n++;
        }
    return n;
}

static int fake_image_remove(struct nb_docker *d, const char *ref, int force, struct nb_derr *e)
{
    int i = fake_img(ref);
    (void)d;
    (void)force;
    (void)e;
    if (i >= 0)
        fake.img_used[i] = 0;
    return 0;
}

static int fake_image_import(struct nb_docker *d, const char *ref, const char *const *labels,
                             const void *tar, size_t tar_len, char id[80], struct nb_derr *e)
{
    struct nb_docker_image *im;
    (void)d;
    (void)e;
    assert_true(tar_len >= 1024 && tar_len % 512 == 0); /* a tar's end: two zero blocks */
    assert_int_equal(((const char *)tar)[0], 0);
    fake.imports++;
    im = fake_img_add(ref);
    for (size_t i = 0; labels[i]; i++) {
        char k[64];
        const char *eq = strchr(labels[i], '=');
        snprintf(k, sizeof(k), "%.*s", (int)(eq - labels[i]), labels[i]);
        fake_label(im, k, eq + 1);
    }
    if (id)
        snprintf(id, 80, "%s", im->id);
    return 0;
}

/* The labels of the context's last LABEL line (key="value" ..., backslash escapes), as Docker. */
static void fake_dockerfile_labels(struct nb_docker_image *im)
{
    char *p = NULL, *q = fake.build_context, *end, k[64], val[256];
    size_t left = sizeof(fake.build_context);
    while ((q = memmem(q, left, "\nLABEL ", 7)) != NULL) {
        p = q + 7;
        q++;
        left = sizeof(fake.build_context) - (size_t)(q - fake.build_context);
    }
    assert_non_null(p);
    end = strchr(p, '\n');
    assert_non_null(end);
    while (p < end) {
        size_t kn = 0, vn = 0;
        while (p < end && *p == ' ')
            p++;
        if (p >= end)
            break;
        while (p < end && *p != '=' && kn < sizeof(k) - 1)
            k[kn++] = *p++;
        k[kn] = '\0';
        assert_true(p[0] == '=' && p[1] == '"');
        for (p += 2; p < end && *p != '"' && vn < sizeof(val) - 1; p++) {
            if (*p == '\\')
                p++;
            val[vn++] = *p;
        }
        val[vn] = '\0';
        p++;
        fake_label(im, k, val);
    }
}

static int fake_build(struct nb_docker *d, const struct nb_docker_build *b, nb_docker_line_fn cb,
                      void *arg, struct nb_derr *e)
{
    char line[512], err[64];
    FILE *f = fopen(b->context, "rb");
    size_t n;
    yajl_val v = NULL;
    struct nb_docker_image *im;
    (void)d;
    (void)e;
    fake.builds++;
    assert_non_null(f);
    memset(fake.build_context, 0, sizeof(fake.build_context));
    n = fread(fake.build_context, 1, sizeof(fake.build_context) - 1, f);
    fake.build_context[n] = '\0';
    fclose(f);
    snprintf(line, sizeof(line), "{\"stream\":\"Step 1/2 : FROM nanobox:latest\\n\"}");
    cb(arg, line, strlen(line));
    if (fake.build_error) {
        snprintf(line, sizeof(line), "{\"errorDetail\":{},\"error\":\"%s\"}", fake.build_error);
        cb(arg, line, strlen(line));
        return 0;
    }
    im = fake_img_add(b->tag);
    im->size = 1234;
    if (b->labels_json == NULL) {
        fake_dockerfile_labels(im);
        return 0;
    }
    assert_int_equal(nb_json_parse(b->labels_json, strlen(b->labels_json), 4, &v, err, sizeof(err)),
                     0);
    for (size_t i = 0; i < v->u.object.len; i++)
        fake_label(im, v->u.object.keys[i], nb_json_string(v->u.object.values[i]));
    yajl_tree_free(v);
    return 0;
}

static const struct nb_docker_ops fake_ops = {
    .ping = fake_ping,
    .create = fake_create,
    .start = fake_start,
    .remove = fake_remove,
    .inspect = fake_inspect,
    .list = fake_list,
    .pause = fake_pause,
    .unpause = fake_unpause,
    .image_inspect = fake_image_inspect,
    .image_list = fake_image_list,
    .image_remove = fake_image_remove,
    .image_import = fake_image_import,
    .build = fake_build,
};

/* The agent of a handed-out warm sandbox: answers unless told not to. */
static int agent_silent;

int nb_agent_ping(const struct nb_slot *slot, int timeout_ms, struct nb_apierr *ae)
{
    (void)slot;
    (void)timeout_ms;
    if (agent_silent) {
        nb_apierr_set(ae, NB_E_AGENT_DOWN, "agent_unavailable", "no answer");
        return -1;
    }
    return 0;
}

/* The code bridge of a code sandbox the pool warms: records what it saw. */
static struct nb_table *warm_table;   /* to look at the slot being warmed */
static unsigned kernels_warmed;       /* calls */
static int warmed_while_creating = 1; /* every call saw its slot still CREATING */
static int kernel_fails;

int nb_code_warm(const struct nb_slot *slot, int timeout_ms, struct nb_apierr *ae)
{
    struct nb_slot *s;
    (void)timeout_ms;
    kernels_warmed++;
    nb_table_lock(warm_table);
    s = nb_table_find(warm_table, slot->id);
    if (s == NULL || s->state != NB_SLOT_CREATING || slot->init_pid <= 0 ||
        slot->container_id[0] == '\0')
        warmed_while_creating = 0;
    nb_table_unlock(warm_table);
    if (kernel_fails) {
        nb_apierr_set(ae, NB_E_CONFLICT, "no_kernel", "no kernel");
        return -1;
    }
    return 0;
}

/* ---- fixture ---- */

struct fixture {
    char dir[64];
    char path[128];
    struct nb_app app;
};

static int setup_n(void **state, uint32_t nslots, unsigned warm_pool)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char err[256];

    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/nb-test-engine-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/state", f->dir);
    nb_conf_defaults(&f->app.conf);
    /* builds without the builds' network: that one is iptables' (integration tests) */
    snprintf(f->app.conf.template_network, sizeof(f->app.conf.template_network), "none");
    snprintf(f->app.conf.ports_dir, sizeof(f->app.conf.ports_dir), "%s", f->dir);
    f->app.conf.warm_pool = warm_pool;
    f->app.conf.warm_pool_code = 0;     /* the code pool's tests turn it on */
    f->app.conf.warm_pool_parallel = 1; /* in turn: the fake Docker is this process's memory */
    if (nb_table_open(&f->app.table, f->path, nslots, err, sizeof(err)) != 0) {
        fprintf(stderr, "table: %s\n", err);
        return -1;
    }
    memset(&fake, 0, sizeof(fake));
    agent_silent = 0;
    warm_table = &f->app.table;
    kernels_warmed = 0;
    warmed_while_creating = 1;
    kernel_fails = 0;
    f->app.docker.ops = &fake_ops;
    f->app.docker.ctx = &fake;
    f->app.warm = &nb_warm_source;
    *state = f;
    alarm(60);
    return 0;
}

static int setup(void **state)
{
    return setup_n(state, 4, 0);
}

static int setup_warm(void **state)
{
    return setup_n(state, 6, 2);
}

/* nftw callback: remove what the engine wrote under the fixture's dir. */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    alarm(0);
    nb_table_close(&f->app.table);
    /* the state file, and the sandbox directory (isolation.c's files) */
    nftw(f->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* A create request for the operator's defaults (what the warm pool holds). */
static void default_spec(const struct nb_app *a, struct nb_sandbox_spec *spec)
{
    memset(spec, 0, sizeof(*spec));
    snprintf(spec->image, sizeof(spec->image), "%s", a->conf.images[0]);
    spec->memory = a->conf.memory;
    spec->nano_cpus = a->conf.nano_cpus;
    spec->pids = a->conf.pids;
    spec->ttl = 300;
    snprintf(spec->metadata, sizeof(spec->metadata), "{\"who\":\"test\"}");
}

static uint32_t count_state(struct nb_app *a, enum nb_slot_state st)
{
    uint32_t n;

    nb_table_lock(&a->table);
    n = nb_table_count_state(&a->table, st);
    nb_table_unlock(&a->table);
    return n;
}

/* Copy of the slot of id (any non-free state); state FREE when none. */
static struct nb_slot slot_of(struct nb_app *a, const char *id)
{
    struct nb_slot copy, *s;

    memset(&copy, 0, sizeof(copy));
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL)
        copy = *s;
    nb_table_unlock(&a->table);
    return copy;
}

/*
 * The invariant: every container has a slot that names it (or, CREATING,
 * its sandbox id), and every RUNNING/POOLED slot's container exists.
 */
static void assert_consistent(struct nb_app *a)
{
    nb_table_lock(&a->table);
    for (size_t i = 0; i < FAKE_MAX; i++) {
        struct nb_slot *s;
        if (!fake.ctr[i].used)
            continue;
        s = nb_table_find(&a->table, fake.ctr[i].sandbox);
        if (s == NULL)
            fail_msg("container %.12s has no slot", fake.ctr[i].id);
        if (s->container_id[0] && strcmp(s->container_id, fake.ctr[i].id) != 0)
            fail_msg("container %.12s has another's slot", fake.ctr[i].id);
    }
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        if ((s->state == NB_SLOT_RUNNING || s->state == NB_SLOT_POOLED) &&
            fake_find(s->container_id) == NULL)
            fail_msg("slot of %s has no container", s->id);
    }
    nb_table_unlock(&a->table);
}

/* A pid that is certainly not running: a child that has been waited for. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    int status;

    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return pid;
}

/* A running sandbox, created through the engine. */
static struct nb_slot make_running(struct nb_app *a)
{
    struct nb_sandbox_spec spec;
    struct nb_slot out;
    struct nb_apierr ae;

    default_spec(a, &spec);
    spec.pids = a->conf.pids - 1; /* not the defaults: never served warm */
    if (nb_sandbox_create(a, &spec, &out, &ae) != 0)
        fail_msg("create: %d %s %s", (int)ae.err, ae.code, ae.msg);
    return out;
}

/* ---- create ---- */

static void test_create_starts_a_container_and_commits_a_running_slot(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app), s;
    struct fake_ctr *c;

    assert_int_equal(out.state, NB_SLOT_RUNNING);
    assert_true(nb_sandbox_id_valid(out.id));
    c = fake_find(out.container_id);
    assert_non_null(c);
    assert_true(c->running);
    assert_string_equal(c->sandbox, out.id);
    s = slot_of(&f->app, out.id);
    assert_int_equal(s.state, NB_SLOT_RUNNING);
    assert_int_equal(s.owner_pid, 0);
    assert_int_equal(s.init_pid, 4242);
    assert_int_equal(s.expires - s.created, 300);
    assert_string_equal(s.metadata, "{\"who\":\"test\"}");
    assert_consistent(&f->app);
}

static void create_fails(struct fixture *f, enum nb_err err, const char *code)
{
    struct nb_sandbox_spec spec;
    struct nb_slot out;
    struct nb_apierr ae;

    default_spec(&f->app, &spec);
    assert_int_equal(nb_sandbox_create(&f->app, &spec, &out, &ae), -1);
    assert_int_equal(ae.err, err);
    assert_string_equal(ae.code, code);
}

static void test_create_refused_by_docker_frees_the_slot(void **state)
{
    struct fixture *f = *state;

    fake.create_status = 500;
    create_fails(f, NB_E_UPSTREAM, "docker_error");
    assert_int_equal(nb_table_count(&f->app.table), 0);
    assert_int_equal(fake_count(), 0);
}

static void test_create_with_a_missing_image_answers_503_image_missing(void **state)
{
    struct fixture *f = *state;

    fake.create_status = 404;
    create_fails(f, NB_E_UNAVAILABLE, "image_missing");
    assert_int_equal(nb_table_count(&f->app.table), 0);
}

static void test_create_when_docker_is_unreachable_removes_nothing(void **state)
{
    struct fixture *f = *state;

    fake.unreachable = 1;
    create_fails(f, NB_E_DOCKER_DOWN, "docker_unavailable");
    assert_int_equal(fake.removes, 0); /* the request never reached dockerd */
    assert_int_equal(nb_table_count(&f->app.table), 0);
}

static void test_start_failure_removes_the_container_and_frees_the_slot(void **state)
{
    struct fixture *f = *state;

    fake.start_fails = 1;
    create_fails(f, NB_E_UPSTREAM, "docker_error");
    assert_int_equal(fake.creates, 1);
    assert_int_equal(fake_count(), 0);
    assert_int_equal(nb_table_count(&f->app.table), 0);
}

static void test_container_that_does_not_stay_up_is_removed(void **state)
{
    struct fixture *f = *state;

    fake.exits_at_once = 1;
    create_fails(f, NB_E_UPSTREAM, "docker_error");
    assert_int_equal(fake_count(), 0);
    assert_int_equal(nb_table_count(&f->app.table), 0);
}

static void test_failed_rollback_leaves_the_slot_to_reconciliation(void **state)
{
    struct fixture *f = *state;
    struct nb_slot s;

    fake.start_fails = 1;
    fake.remove_fails = 1;
    create_fails(f, NB_E_UPSTREAM, "docker_error");
    /* the container stays, and so does its slot: disowned, so not an orphan */
    assert_int_equal(fake_count(), 1);
    s = slot_of(&f->app, fake.ctr[0].sandbox);
    assert_int_equal(s.state, NB_SLOT_CREATING);
    assert_int_equal(s.owner_pid, 0);
    assert_consistent(&f->app);

    fake.remove_fails = 0;
    assert_int_equal(nb_reaper_reconcile(&f->app), 1);
    assert_int_equal(fake_count(), 0);
    assert_int_equal(nb_table_count(&f->app.table), 0);
}

/* Reconciliation judging the creator dead: it takes the slot over. */
static struct nb_app *reclaim_app;

static void reclaim_during_inspect(void)
{
    struct nb_table *t = &reclaim_app->table;

    nb_table_lock(t);
    for (uint32_t i = 0; i < t->nslots; i++)
        if (t->slots[i].state == NB_SLOT_CREATING)
            assert_int_equal(nb_table_take_over(t, &t->slots[i], t->slots[i].state_since), 0);
    nb_table_unlock(t);
}

static void test_create_whose_slot_was_taken_over_undoes_itself(void **state)
{
    struct fixture *f = *state;

    reclaim_app = &f->app;
    fake.on_inspect = reclaim_during_inspect;
    create_fails(f, NB_E_INTERNAL, "internal");
    /* its container is gone; the slot is the taker's to free */
    assert_int_equal(fake_count(), 0);
    assert_int_equal(count_state(&f->app, NB_SLOT_DESTROYING), 1);
    assert_int_equal(count_state(&f->app, NB_SLOT_RUNNING), 0);
}

static void test_full_table_answers_503_capacity_and_creates_nothing(void **state)
{
    struct fixture *f = *state;

    for (uint32_t i = 0; i < f->app.table.nslots; i++)
        make_running(&f->app);
    create_fails(f, NB_E_CAPACITY, "capacity");
    assert_int_equal(fake.creates, f->app.table.nslots);
    assert_consistent(&f->app);
}

/* ---- destroy ---- */

static void test_destroy_removes_the_container_and_frees_the_slot(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app);
    struct nb_apierr ae;

    assert_int_equal(nb_sandbox_destroy(&f->app, out.id, &ae), 0);
    assert_null(fake_find(out.container_id));
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_FREE);
    assert_int_equal(nb_sandbox_destroy(&f->app, out.id, &ae), -1);
    assert_int_equal(ae.err, NB_E_NOT_FOUND);
}

static void test_destroy_that_docker_refuses_gives_the_sandbox_back(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app), s;
    struct nb_apierr ae;

    fake.remove_fails = 1;
    assert_int_equal(nb_sandbox_destroy(&f->app, out.id, &ae), -1);
    assert_int_equal(ae.err, NB_E_UPSTREAM);
    s = slot_of(&f->app, out.id);
    assert_int_equal(s.state, NB_SLOT_RUNNING);
    assert_int_equal(s.owner_pid, 0);
    assert_non_null(fake_find(out.container_id));
    /* and a second try, once Docker works, succeeds */
    fake.remove_fails = 0;
    assert_int_equal(nb_sandbox_destroy(&f->app, out.id, &ae), 0);
    assert_int_equal(fake_count(), 0);
}

/* ---- the reaper: expiry ---- */

static void set_expires(struct nb_app *a, const char *id, int64_t expires)
{
    struct nb_slot *s;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    assert_non_null(s);
    s->expires = expires;
    nb_table_unlock(&a->table);
}

static void test_expired_rule(void **state)
{
    struct nb_slot s;

    (void)state;
    memset(&s, 0, sizeof(s));
    s.expires = 100;
    s.state = NB_SLOT_RUNNING;
    assert_true(nb_reaper_expired(&s, 100));
    assert_true(nb_reaper_expired(&s, 101));
    assert_false(nb_reaper_expired(&s, 99));
    for (uint32_t st = NB_SLOT_FREE; st <= NB_SLOT_POOLED; st++) {
        s.state = st;
        if (st != NB_SLOT_RUNNING)
            assert_false(nb_reaper_expired(&s, 1000));
    }
}

static void test_expiry_destroys_expired_sandboxes_only(void **state)
{
    struct fixture *f = *state;
    struct nb_slot old = make_running(&f->app), young = make_running(&f->app);

    set_expires(&f->app, old.id, nb_clock_real_s() - 1);
    nb_reaper_expire(&f->app);
    assert_int_equal(slot_of(&f->app, old.id).state, NB_SLOT_FREE);
    assert_null(fake_find(old.container_id));
    assert_int_equal(slot_of(&f->app, young.id).state, NB_SLOT_RUNNING);
    assert_consistent(&f->app);
}

static void test_expiry_that_cannot_remove_leaves_the_slot_destroying(void **state)
{
    struct fixture *f = *state;
    struct nb_slot old = make_running(&f->app), s;

    set_expires(&f->app, old.id, nb_clock_real_s() - 1);
    fake.remove_fails = 1;
    nb_reaper_expire(&f->app);
    s = slot_of(&f->app, old.id);
    assert_int_equal(s.state, NB_SLOT_DESTROYING);
    assert_int_equal(s.owner_pid, getpid());
    /* once stuck, reconciliation finishes it */
    fake.remove_fails = 0;
    nb_table_lock(&f->app.table);
    nb_table_find(&f->app.table, old.id)->state_since -= NB_REAPER_STUCK_SECONDS + 1;
    nb_table_unlock(&f->app.table);
    assert_int_equal(nb_reaper_reconcile(&f->app), 1);
    assert_int_equal(slot_of(&f->app, old.id).state, NB_SLOT_FREE);
    assert_int_equal(fake_count(), 0);
}

/* ---- the reaper: its table of jobs ---- */

static unsigned job_runs[3];

static void count_job0(struct nb_reaper *r)
{
    (void)r;
    job_runs[0]++;
}

static void count_job1(struct nb_reaper *r)
{
    (void)r;
    job_runs[1]++;
}

static void count_job2(struct nb_reaper *r)
{
    (void)r;
    job_runs[2]++;
}

static void test_reaper_runs_jobs_at_their_subticks(void **state)
{
    const struct nb_reaper_job jobs[] = {
        {"every", 1, 0, count_job0, -1},
        {"pass", 10, 0, count_job1, -1},
        {"docker", 1, 1, count_job2, -1},
    };
    struct nb_reaper r = {NULL, 0, 0, jobs, 3};

    (void)state;
    memset(job_runs, 0, sizeof(job_runs));
    for (unsigned i = 0; i < 25; i++)
        nb_reaper_subtick(&r);
    assert_int_equal(r.tick, 25);
    assert_int_equal(job_runs[0], 25);
    assert_int_equal(job_runs[1], 3); /* subticks 0, 10 and 20 */
    assert_int_equal(job_runs[2], 25);
    r.docker_away = 1; /* a job that needs Docker waits for it */
    nb_reaper_subtick(&r);
    assert_int_equal(job_runs[0], 26);
    assert_int_equal(job_runs[2], 25);
}

static void test_reaper_wait_runs_a_woken_job_at_once(void **state)
{
    int p[2];
    struct nb_reaper_job jobs[] = {
        {"plain", 1, 0, count_job0, -1},
        {"woken", 1, 0, count_job1, -1},
    };
    struct nb_reaper r = {NULL, 0, 0, jobs, 2};
    int64_t t0;

    (void)state;
    assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    jobs[1].wake_fd = p[0];
    memset(job_runs, 0, sizeof(job_runs));
    t0 = nb_clock_mono_ms();
    nb_reaper_wait(&r, 100000); /* nothing fires: the whole wait, no job */
    assert_true(nb_clock_mono_ms() - t0 >= 99);
    assert_int_equal(job_runs[0] + job_runs[1], 0);
    assert_int_equal(write(p[1], "xyz", 3), 3);
    t0 = nb_clock_mono_ms();
    nb_reaper_wait(&r, 100000);
    /* the woken job ran once (its descriptor read empty), the wait went on to its end */
    assert_int_equal(job_runs[1], 1);
    assert_int_equal(job_runs[0], 0);
    assert_true(nb_clock_mono_ms() - t0 >= 99);
    assert_int_equal(read(p[0], &t0, 1), -1);
    r.docker_away = 1;
    jobs[1].needs_docker = 1; /* read empty, not run while Docker is away */
    assert_int_equal(write(p[1], "x", 1), 1);
    nb_reaper_wait(&r, 20000);
    assert_int_equal(job_runs[1], 1);
    assert_int_equal(read(p[0], &t0, 1), -1);
    close(p[0]);
    close(p[1]);
}

/* ---- the reaper: reconciliation ---- */

static void test_judge_rules(void **state)
{
    struct nb_docker_ctr up, down;
    struct nb_slot s;
    const int64_t t = 1000;

    (void)state;
    memset(&up, 0, sizeof(up));
    up.running = 1;
    memset(&down, 0, sizeof(down));
    memset(&s, 0, sizeof(s));
    s.state_since = t - 10;
    for (uint32_t st = NB_SLOT_RUNNING; st <= NB_SLOT_POOLED;
         st += NB_SLOT_POOLED - NB_SLOT_RUNNING) {
        s.state = st;
        assert_int_equal(nb_reaper_judge(&s, &up, 0, t), NB_RECONCILE_KEEP);
        assert_int_equal(nb_reaper_judge(&s, NULL, 0, t), NB_RECONCILE_FREE);
        assert_int_equal(nb_reaper_judge(&s, &down, 0, t), NB_RECONCILE_DESTROY);
        s.state_since = t; /* not judged on a listing older than the state */
        assert_int_equal(nb_reaper_judge(&s, NULL, 0, t), NB_RECONCILE_KEEP);
        s.state_since = t - 10;
    }
    for (uint32_t st = NB_SLOT_CREATING; st <= NB_SLOT_DESTROYING; st += 2) {
        s.state = st;
        s.state_since = t - 10;
        assert_int_equal(nb_reaper_judge(&s, NULL, 1, t), NB_RECONCILE_KEEP);
        assert_int_equal(nb_reaper_judge(&s, &up, 1, t), NB_RECONCILE_KEEP);
        assert_int_equal(nb_reaper_judge(&s, NULL, 0, t), NB_RECONCILE_FINISH);
        s.state_since = t - NB_REAPER_STUCK_SECONDS;
        assert_int_equal(nb_reaper_judge(&s, NULL, 1, t), NB_RECONCILE_KEEP);
        s.state_since = t - NB_REAPER_STUCK_SECONDS - 1;
        assert_int_equal(nb_reaper_judge(&s, NULL, 1, t), NB_RECONCILE_FINISH);
    }
    s.state = NB_SLOT_FREE;
    assert_int_equal(nb_reaper_judge(&s, NULL, 0, t), NB_RECONCILE_KEEP);
}

/* A sandbox paused without its memory has no container: kept, and a container of it is an orphan */
static void test_released_pause_rules(void **state)
{
    struct nb_docker_ctr c;
    struct nb_slot s;
    const int64_t t = 1000;

    (void)state;
    memset(&c, 0, sizeof(c));
    snprintf(c.id, sizeof(c.id), "%s", "aaaa");
    memset(&s, 0, sizeof(s));
    s.state = NB_SLOT_PAUSED;
    s.state_since = t - 10;
    s.lifecycle = NB_LIFE_RELEASED | NB_LIFE_PAUSE_IMAGE;
    assert_int_equal(nb_reaper_judge(&s, NULL, 0, t), NB_RECONCILE_KEEP);
    assert_true(nb_reaper_orphan(&c, &s)); /* a container left by its pause */
    s.lifecycle |= NB_LIFE_BUSY;           /* its resume: the new container is protected */
    assert_int_equal(nb_reaper_judge(&s, NULL, 0, t), NB_RECONCILE_KEEP);
    assert_false(nb_reaper_orphan(&c, &s));
    s.lifecycle = NB_LIFE_BUSY; /* its save: the frozen container is its own */
    snprintf(s.container_id, sizeof(s.container_id), "%s", "aaaa");
    assert_int_equal(nb_reaper_judge(&s, NULL, 0, t), NB_RECONCILE_KEEP);
    assert_false(nb_reaper_orphan(&c, &s));
    s.lifecycle = 0; /* paused with its memory: judged on its container as before */
    assert_int_equal(nb_reaper_judge(&s, NULL, 0, t), NB_RECONCILE_FREE);
}

/* Idle: running, an idle_pause, and no call since it began to run or was last named */
static void test_idle_rule(void **state)
{
    struct nb_slot s;
    (void)state;
    memset(&s, 0, sizeof(s));
    s.state = NB_SLOT_RUNNING;
    s.state_since = 1000;
    assert_false(nb_reaper_idle(&s, 5000)); /* no idle_pause: never */
    s.idle_pause = 60;
    assert_false(nb_reaper_idle(&s, 1059));
    assert_true(nb_reaper_idle(&s, 1060));
    s.last_active = 1050; /* a call */
    assert_false(nb_reaper_idle(&s, 1100));
    assert_true(nb_reaper_idle(&s, 1110));
    s.state_since = 1200; /* resumed since */
    assert_false(nb_reaper_idle(&s, 1210));
    s.state = NB_SLOT_PAUSED;
    assert_false(nb_reaper_idle(&s, 99999));
}

static void test_orphan_rule(void **state)
{
    struct nb_docker_ctr c;
    struct nb_slot s;

    (void)state;
    memset(&c, 0, sizeof(c));
    snprintf(c.id, sizeof(c.id), "%s", "aaaa");
    memset(&s, 0, sizeof(s));
    assert_true(nb_reaper_orphan(&c, NULL));
    assert_false(nb_reaper_orphan(&c, &s)); /* CREATING, no container id yet: protected */
    snprintf(s.container_id, sizeof(s.container_id), "%s", "aaaa");
    assert_false(nb_reaper_orphan(&c, &s));
    snprintf(s.container_id, sizeof(s.container_id), "%s", "bbbb");
    assert_true(nb_reaper_orphan(&c, &s));
}

static void test_reconcile_removes_orphan_containers(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app);
    struct fake_ctr *stray, *twin;

    stray = fake_add("0f8fad5b-d9cb-469f-a165-70867728950e", 1);
    twin = fake_add(out.id, 1); /* names a slot that holds another container */
    assert_non_null(stray);
    assert_non_null(twin);
    assert_int_equal(nb_reaper_reconcile(&f->app), 2);
    assert_int_equal(fake_count(), 1);
    assert_non_null(fake_find(out.container_id));
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_RUNNING);
    assert_consistent(&f->app);
}

static void test_reconcile_spares_the_container_of_a_live_create(void **state)
{
    struct fixture *f = *state;
    const char *id = "0f8fad5b-d9cb-469f-a165-70867728950e";

    /* a create in progress in a live process: its slot has no container id yet */
    nb_table_lock(&f->app.table);
    assert_non_null(nb_table_reserve(&f->app.table, id, nb_clock_real_s(), nb_clock_real_s() + 60));
    nb_table_unlock(&f->app.table);
    fake_add(id, 0);
    assert_int_equal(nb_reaper_reconcile(&f->app), 0);
    assert_int_equal(fake_count(), 1);
    assert_int_equal(slot_of(&f->app, id).state, NB_SLOT_CREATING);
}

/* Make the listing see sandboxes that were RUNNING before it. */
static void age(struct nb_app *a, const char *id)
{
    nb_table_lock(&a->table);
    nb_table_find(&a->table, id)->state_since -= 10;
    nb_table_unlock(&a->table);
}

/* ---- pause and resume ---- */

/* Does the ports' paused mark of id exist (nb_ports_mark_paused)? */
static int paused_mark(struct fixture *f, const char *id)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s.paused", f->dir, id);
    return access(path, F_OK) == 0;
}

static void test_pause_freezes_the_container_and_stops_the_ttl(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app), s;
    struct nb_apierr ae;
    int64_t left = out.expires - nb_clock_real_s();

    assert_int_equal(nb_sandbox_pause(&f->app, out.id, &s, &ae), 0);
    assert_int_equal(s.state, NB_SLOT_PAUSED);
    assert_true(s.ttl_left >= left - 1 && s.ttl_left <= left);
    assert_true(s.pause_expires >= nb_clock_real_s() + (int64_t)f->app.conf.max_pause - 1);
    assert_int_equal(fake_find(out.container_id)->paused, 1);
    assert_true(paused_mark(f, out.id));
    /* a second pause: 200 again, nothing moves */
    assert_int_equal(nb_sandbox_pause(&f->app, out.id, &s, &ae), 0);
    assert_int_equal(s.state, NB_SLOT_PAUSED);
    /* what needs the processes is refused */
    assert_int_equal(nb_sandbox_awake(&f->app, out.id, &ae), -1);
    assert_int_equal(ae.err, NB_E_CONFLICT);
    assert_string_equal(ae.code, "paused");
    /* still a sandbox for GET */
    assert_int_equal(nb_sandbox_get(&f->app, out.id, &s, &ae), 0);

    assert_int_equal(nb_sandbox_resume(&f->app, out.id, &s, &ae), 0);
    assert_int_equal(s.state, NB_SLOT_RUNNING);
    assert_true(s.expires - nb_clock_real_s() >= left - 1);
    assert_int_equal(fake_find(out.container_id)->paused, 0);
    assert_false(paused_mark(f, out.id));
    assert_int_equal(nb_sandbox_awake(&f->app, out.id, &ae), 0);
    /* a second resume: 200 again */
    assert_int_equal(nb_sandbox_resume(&f->app, out.id, &s, &ae), 0);
    assert_int_equal(s.state, NB_SLOT_RUNNING);
    assert_consistent(&f->app);
}

static void test_pause_that_docker_refuses_leaves_it_running(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app), s;
    struct nb_apierr ae;

    fake.pause_fails = 1;
    assert_int_equal(nb_sandbox_pause(&f->app, out.id, &s, &ae), -1);
    assert_int_equal(ae.err, NB_E_UPSTREAM);
    s = slot_of(&f->app, out.id);
    assert_int_equal(s.state, NB_SLOT_RUNNING);
    assert_true(s.expires >= out.expires - 1 && s.expires <= out.expires + 1);
    assert_false(paused_mark(f, out.id));
    assert_int_equal(fake_find(out.container_id)->paused, 0);
}

static void test_pause_and_resume_of_no_sandbox_are_404(void **state)
{
    struct fixture *f = *state;
    struct nb_apierr ae;
    const char *ghost = "0f8fad5b-d9cb-469f-a165-70867728950e";

    assert_int_equal(nb_sandbox_pause(&f->app, ghost, NULL, &ae), -1);
    assert_int_equal(ae.err, NB_E_NOT_FOUND);
    assert_int_equal(nb_sandbox_resume(&f->app, ghost, NULL, &ae), -1);
    assert_int_equal(ae.err, NB_E_NOT_FOUND);
    assert_int_equal(nb_sandbox_awake(&f->app, ghost, &ae), 0); /* the handler's 404 */
    assert_int_equal(fake.pauses + fake.unpauses, 0);
}

static void test_auto_resume_resumes_on_awake(void **state)
{
    struct fixture *f = *state;
    struct nb_sandbox_spec spec;
    struct nb_slot out, s;
    struct nb_apierr ae;

    default_spec(&f->app, &spec);
    spec.lifecycle = NB_LIFE_AUTO_RESUME;
    assert_int_equal(nb_sandbox_create(&f->app, &spec, &out, &ae), 0);
    assert_int_equal(out.lifecycle, NB_LIFE_AUTO_RESUME);
    assert_int_equal(nb_sandbox_pause(&f->app, out.id, &s, &ae), 0);
    assert_int_equal(nb_sandbox_awake(&f->app, out.id, &ae), 0);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_RUNNING);
    assert_int_equal(fake_find(out.container_id)->paused, 0);
}

static void test_on_timeout_pause_pauses_at_the_ttl_and_resumes_with_default_ttl(void **state)
{
    struct fixture *f = *state;
    struct nb_sandbox_spec spec;
    struct nb_slot out, s;
    struct nb_apierr ae;
    int64_t now;

    default_spec(&f->app, &spec);
    spec.lifecycle = NB_LIFE_PAUSE_ON_TIMEOUT;
    assert_int_equal(nb_sandbox_create(&f->app, &spec, &out, &ae), 0);
    set_expires(&f->app, out.id, nb_clock_real_s() - 1);
    nb_reaper_expire(&f->app);
    /* paused, not destroyed: the container frozen, its pause TTL running */
    now = nb_clock_real_s();
    s = slot_of(&f->app, out.id);
    assert_int_equal(s.state, NB_SLOT_PAUSED);
    assert_int_equal(fake_find(out.container_id)->paused, 1);
    assert_true(s.pause_expires >= now + (int64_t)f->app.conf.max_pause - 2);
    assert_int_equal(s.ttl_left, (int64_t)f->app.conf.default_ttl);
    /* a resume gives it default_ttl, as its own was spent */
    assert_int_equal(nb_sandbox_resume(&f->app, out.id, &s, &ae), 0);
    assert_int_equal(s.state, NB_SLOT_RUNNING);
    assert_true(s.expires >= now + (int64_t)f->app.conf.default_ttl - 2);
    /* a sandbox without it is destroyed at its TTL, as ever */
    out = make_running(&f->app);
    set_expires(&f->app, out.id, nb_clock_real_s() - 1);
    nb_reaper_expire(&f->app);
    assert_null(fake_find(out.container_id));
    assert_consistent(&f->app);
}

static void test_expiry_of_a_paused_sandbox_is_its_pause_ttl(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app), s;
    struct nb_apierr ae;

    assert_int_equal(nb_sandbox_pause(&f->app, out.id, &s, &ae), 0);
    /* its TTL is past: paused, it does not count */
    set_expires(&f->app, out.id, nb_clock_real_s() - 1);
    nb_reaper_expire(&f->app);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_PAUSED);
    /* its pause TTL is past: destroyed, paused container and mark gone */
    nb_table_lock(&f->app.table);
    nb_table_find(&f->app.table, out.id)->pause_expires = nb_clock_real_s() - 1;
    nb_table_unlock(&f->app.table);
    nb_reaper_expire(&f->app);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_FREE);
    assert_null(fake_find(out.container_id));
    assert_false(paused_mark(f, out.id));
    assert_consistent(&f->app);
}

static void test_reconcile_keeps_a_paused_sandbox_paused(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app), s;
    struct nb_apierr ae;

    assert_int_equal(nb_sandbox_pause(&f->app, out.id, &s, &ae), 0);
    age(&f->app, out.id);
    assert_int_equal(nb_reaper_reconcile(&f->app), 0);
    s = slot_of(&f->app, out.id);
    assert_int_equal(s.state, NB_SLOT_PAUSED);
    assert_int_equal(fake_find(out.container_id)->paused, 1);
    /* and one whose container vanished is freed like any other */
    fake_find(out.container_id)->used = 0;
    assert_int_equal(nb_reaper_reconcile(&f->app), 0);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_FREE);
}

static void test_a_paused_sandbox_is_destroyed(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app), s;
    struct nb_apierr ae;

    assert_int_equal(nb_sandbox_pause(&f->app, out.id, &s, &ae), 0);
    assert_int_equal(nb_sandbox_destroy(&f->app, out.id, &ae), 0);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_FREE);
    assert_null(fake_find(out.container_id));
    assert_false(paused_mark(f, out.id));
}

static void test_reconcile_frees_a_slot_whose_container_vanished(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app);

    age(&f->app, out.id);
    fake_find(out.container_id)->used = 0; /* removed behind our back */
    assert_int_equal(nb_reaper_reconcile(&f->app), 0);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_FREE);
}

static void test_reconcile_destroys_a_sandbox_whose_container_stopped(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app);

    age(&f->app, out.id);
    fake_find(out.container_id)->running = 0;
    assert_int_equal(nb_reaper_reconcile(&f->app), 1);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_FREE);
    assert_int_equal(fake_count(), 0);
}

/* Docker's die/oom/destroy events (events.c): the reaper's path, at once. */
static void test_container_event_destroys_a_dead_sandbox_at_once(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app);
    struct nb_slot other = make_running(&f->app);

    /* an oom of one process: the container still runs, the sandbox stays */
    assert_int_equal(nb_reaper_container_event(&f->app, out.id, out.container_id, 0), 0);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_RUNNING);
    /* an event of another container of that name (not the slot's): nothing */
    fake_find(out.container_id)->running = 0;
    assert_int_equal(nb_reaper_container_event(&f->app, out.id, other.container_id, 0), 0);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_RUNNING);
    /* died: destroyed, container removed, slot free; no listing needed */
    assert_int_equal(nb_reaper_container_event(&f->app, out.id, out.container_id, 0), 1);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_FREE);
    assert_null(fake_find(out.container_id));
    /* removed behind our back: the slot is freed all the same */
    fake_find(other.container_id)->used = 0;
    assert_int_equal(nb_reaper_container_event(&f->app, other.id, other.container_id, 1), 1);
    assert_int_equal(slot_of(&f->app, other.id).state, NB_SLOT_FREE);
    /* a second event of the same death finds nothing to do */
    assert_int_equal(nb_reaper_container_event(&f->app, other.id, other.container_id, 1), 0);
}

static void test_reconcile_does_not_judge_sandboxes_newer_than_the_listing(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app);

    nb_table_lock(&f->app.table);
    nb_table_find(&f->app.table, out.id)->state_since = nb_clock_real_s() + 5;
    nb_table_unlock(&f->app.table);
    fake_find(out.container_id)->used = 0;
    assert_int_equal(nb_reaper_reconcile(&f->app), 0);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_RUNNING);
}

static void test_reconcile_finishes_abandoned_creates_and_destroys(void **state)
{
    struct fixture *f = *state;
    const char *creating = "0f8fad5b-d9cb-469f-a165-70867728950e";
    struct nb_slot destroying = make_running(&f->app);
    pid_t dead = dead_pid();
    struct nb_slot *s;

    nb_table_lock(&f->app.table);
    s = nb_table_reserve(&f->app.table, creating, nb_clock_real_s(), nb_clock_real_s() + 60);
    assert_non_null(s);
    s->owner_pid = dead; /* its worker was killed mid-create */
    s = nb_table_find(&f->app.table, destroying.id);
    assert_int_equal(nb_table_mark_destroying(&f->app.table, s, NB_SLOT_RUNNING, nb_clock_real_s()),
                     0);
    s->owner_pid = dead; /* and this one's mid-destroy */
    nb_table_unlock(&f->app.table);
    fake_add(creating, 0); /* created, never recorded: found by its name */

    assert_int_equal(nb_reaper_reconcile(&f->app), 2);
    assert_int_equal(fake_count(), 0);
    assert_int_equal(nb_table_count(&f->app.table), 0);
}

static void test_reconcile_waits_for_a_live_owner_until_it_is_stuck(void **state)
{
    struct fixture *f = *state;
    const char *id = "0f8fad5b-d9cb-469f-a165-70867728950e";
    struct nb_slot *s;

    nb_table_lock(&f->app.table);
    s = nb_table_reserve(&f->app.table, id, nb_clock_real_s(), nb_clock_real_s() + 60);
    assert_non_null(s);
    nb_table_unlock(&f->app.table);
    assert_int_equal(nb_reaper_reconcile(&f->app), 0);
    assert_int_equal(slot_of(&f->app, id).state, NB_SLOT_CREATING);

    nb_table_lock(&f->app.table);
    nb_table_find(&f->app.table, id)->state_since -= NB_REAPER_STUCK_SECONDS + 5;
    nb_table_unlock(&f->app.table);
    assert_int_equal(nb_reaper_reconcile(&f->app), 1);
    assert_int_equal(slot_of(&f->app, id).state, NB_SLOT_FREE);
}

static void test_reconcile_skipped_when_docker_is_unreachable(void **state)
{
    struct fixture *f = *state;
    struct nb_slot out = make_running(&f->app);

    age(&f->app, out.id);
    fake.unreachable = 1;
    assert_int_equal(nb_reaper_reconcile(&f->app), -1);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_RUNNING);
}

/*
 * A restart of dockerd with live-restore: the containers keep running while
 * Docker does not answer. Nothing may be undone because of that: creates
 * and deletes answer 503 docker_unavailable (the delete leaving the
 * sandbox and its ports as they were), expiry and reconciliation change
 * nothing, and once Docker answers again reconciliation keeps them all.
 */
static void test_sandboxes_ride_through_a_restart_of_dockerd(void **state)
{
    struct fixture *f = *state;
    struct nb_slot a = make_running(&f->app), b = make_running(&f->app), s;
    struct nb_apierr ae;

    age(&f->app, a.id);
    age(&f->app, b.id);
    nb_table_lock(&f->app.table);
    /* a port being opened: a destroy would clear it */
    nb_table_find(&f->app.table, a.id)->ports[0].sandboxport = 8000;
    nb_table_find(&f->app.table, a.id)->ports[0].fwd_pid = dead_pid();
    nb_table_unlock(&f->app.table);

    fake.unreachable = 1;
    create_fails(f, NB_E_DOCKER_DOWN, "docker_unavailable");
    assert_int_equal(nb_sandbox_destroy(&f->app, a.id, &ae), -1);
    assert_int_equal(ae.err, NB_E_DOCKER_DOWN);
    assert_string_equal(ae.code, "docker_unavailable");
    s = slot_of(&f->app, a.id);
    assert_int_equal(s.state, NB_SLOT_RUNNING);
    assert_int_equal(s.owner_pid, 0);
    assert_int_equal(s.ports[0].sandboxport, 8000);
    assert_int_equal(fake.removes, 0);
    nb_reaper_expire(&f->app);
    assert_int_equal(nb_reaper_reconcile(&f->app), -1);
    assert_int_equal(nb_reaper_reconcile(&f->app), -1);
    assert_int_equal(nb_sandbox_get(&f->app, a.id, &s, &ae), 0);
    assert_int_equal(nb_sandbox_get(&f->app, b.id, &s, &ae), 0);
    assert_int_equal(nb_table_count(&f->app.table), 2);

    fake.unreachable = 0; /* back, the containers still running */
    assert_int_equal(nb_reaper_reconcile(&f->app), 0);
    assert_int_equal(slot_of(&f->app, a.id).state, NB_SLOT_RUNNING);
    assert_int_equal(slot_of(&f->app, b.id).state, NB_SLOT_RUNNING);
    assert_int_equal(fake_count(), 2);
    assert_consistent(&f->app);
    assert_int_equal(nb_sandbox_destroy(&f->app, a.id, &ae), 0);
    assert_null(fake_find(a.container_id));
}

/* ---- the warm pool ---- */

static void test_warm_wanted_sizing(void **state)
{
    (void)state;
    /* warm_pool, pooled, free -> to start */
    assert_int_equal(nb_warm_wanted(0, 0, 10), 0); /* no pool */
    assert_int_equal(nb_warm_wanted(2, 0, 10), 2); /* fill up */
    assert_int_equal(nb_warm_wanted(2, 1, 10), 1);
    assert_int_equal(nb_warm_wanted(2, 2, 10), 0); /* full */
    assert_int_equal(nb_warm_wanted(2, 3, 10), 0); /* more than asked: none */
    assert_int_equal(nb_warm_wanted(2, 0, 3), 1);  /* only beyond the last 2 free */
    assert_int_equal(nb_warm_wanted(2, 0, 2), 0);  /* those are for users */
    assert_int_equal(nb_warm_wanted(2, 0, 0), 0);
    assert_int_equal(nb_warm_wanted(5, 1, 7), 2);
}

static void test_warm_refill_starts_pooled_sandboxes_up_to_warm_pool(void **state)
{
    struct fixture *f = *state;

    nb_warm_refill(&f->app);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 2);
    assert_int_equal(fake_count(), 2);
    nb_warm_refill(&f->app);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 2);
    assert_int_equal(fake.creates, 2);
    assert_consistent(&f->app);
}

static void test_warm_refill_waits_while_docker_is_unreachable(void **state)
{
    struct fixture *f = *state;
    struct nb_sandbox_spec spec;
    struct nb_slot out;
    struct nb_apierr ae;

    fake.unreachable = 1;
    assert_int_equal(nb_warm_refill(&f->app), -1); /* the reaper waits for Docker */
    assert_int_equal(nb_table_count(&f->app.table), 0);
    fake.unreachable = 0;
    assert_int_equal(nb_warm_refill(&f->app), 0);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 2);
    /* and a warm sandbox is handed out without Docker */
    fake.unreachable = 1;
    default_spec(&f->app, &spec);
    assert_int_equal(nb_sandbox_create(&f->app, &spec, &out, &ae), 0);
    assert_int_equal(slot_of(&f->app, out.id).state, NB_SLOT_RUNNING);
    fake.unreachable = 0;
    assert_consistent(&f->app);
}

static void test_warm_refill_keeps_the_last_free_slots_for_users(void **state)
{
    struct fixture *f = *state;

    /* 6 slots, warm_pool 2: 3 users leave 3 free, so 1 warm one fits */
    for (int i = 0; i < 3; i++)
        make_running(&f->app);
    nb_warm_refill(&f->app);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 1);
    assert_int_equal(count_state(&f->app, NB_SLOT_FREE), 2);
}

static void test_warm_refill_removes_one_surplus_per_pass(void **state)
{
    struct fixture *f = *state;

    nb_warm_refill(&f->app);
    f->app.conf.warm_pool = 0; /* the operator lowered it */
    nb_warm_refill(&f->app);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 1);
    nb_warm_refill(&f->app);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 0);
    assert_int_equal(fake_count(), 0);
    assert_int_equal(nb_table_count(&f->app.table), 0);
}

static void test_warm_refill_replaces_sandboxes_of_an_old_default_image(void **state)
{
    struct fixture *f = *state;
    struct nb_slot *s;

    nb_warm_refill(&f->app);
    nb_table_lock(&f->app.table);
    for (uint32_t i = 0; i < f->app.table.nslots; i++) {
        s = &f->app.table.slots[i];
        if (s->state == NB_SLOT_POOLED)
            snprintf(s->image, sizeof(s->image), "%s", "old:image");
    }
    nb_table_unlock(&f->app.table);
    nb_warm_refill(&f->app); /* one old one out; two of the new image in */
    nb_warm_refill(&f->app); /* the other old one out */
    assert_int_equal(fake_count(), 2);
    nb_table_lock(&f->app.table);
    for (uint32_t i = 0; i < f->app.table.nslots; i++) {
        s = &f->app.table.slots[i];
        if (s->state == NB_SLOT_POOLED)
            assert_string_equal(s->image, f->app.conf.images[0]);
    }
    assert_int_equal(nb_table_count_state(&f->app.table, NB_SLOT_POOLED), 2);
    nb_table_unlock(&f->app.table);
}

/* The uid a slot's container runs as, "uid:gid", from the fake's record. */
static const char *user_of(struct nb_app *a, const char *id)
{
    struct nb_slot s = slot_of(a, id);
    struct fake_ctr *c = fake_find(s.container_id);
    assert_non_null(c);
    return c->user;
}

static void test_each_slot_runs_as_its_own_uid_warm_or_cold(void **state)
{
    struct fixture *f = *state;
    struct nb_slot a, b;
    char want[32];
    uint32_t ia, ib;

    nb_warm_refill(&f->app); /* warm ones take slots 0 and 1 */
    a = make_running(&f->app);
    b = make_running(&f->app);
    nb_table_lock(&f->app.table);
    ia = (uint32_t)(nb_table_find(&f->app.table, a.id) - f->app.table.slots);
    ib = (uint32_t)(nb_table_find(&f->app.table, b.id) - f->app.table.slots);
    nb_table_unlock(&f->app.table);
    assert_true(ia != ib);
    snprintf(want, sizeof(want), "%u:%u", 200000 + ia, 200000 + ia);
    assert_string_equal(user_of(&f->app, a.id), want);
    snprintf(want, sizeof(want), "%u:%u", 200000 + ib, 200000 + ib);
    assert_string_equal(user_of(&f->app, b.id), want);
    nb_table_lock(&f->app.table);
    for (uint32_t i = 0; i < f->app.table.nslots; i++) {
        struct nb_slot *s = &f->app.table.slots[i];
        if (s->state != NB_SLOT_POOLED)
            continue;
        nb_table_unlock(&f->app.table);
        snprintf(want, sizeof(want), "%u:%u", 200000 + i, 200000 + i);
        assert_string_equal(user_of(&f->app, s->id), want);
        nb_table_lock(&f->app.table);
    }
    nb_table_unlock(&f->app.table);
}

static void test_create_with_the_defaults_takes_a_warm_sandbox(void **state)
{
    struct fixture *f = *state;
    struct nb_sandbox_spec spec;
    struct nb_slot out, s;
    struct nb_apierr ae;

    nb_warm_refill(&f->app);
    default_spec(&f->app, &spec);
    assert_int_equal(nb_sandbox_create(&f->app, &spec, &out, &ae), 0);
    assert_int_equal(fake.creates, 2); /* none made for the request */
    s = slot_of(&f->app, out.id);
    assert_int_equal(s.state, NB_SLOT_RUNNING);
    assert_int_equal(s.expires - s.created, 300);
    assert_string_equal(s.metadata, "{\"who\":\"test\"}");
    assert_int_equal(s.lifecycle, 0);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 1);
    /* auto_resume and on_timeout are the request's, like its TTL and metadata */
    spec.lifecycle = NB_LIFE_AUTO_RESUME | NB_LIFE_PAUSE_ON_TIMEOUT;
    assert_int_equal(nb_sandbox_create(&f->app, &spec, &out, &ae), 0);
    assert_int_equal(fake.creates, 2);
    assert_int_equal(slot_of(&f->app, out.id).lifecycle,
                     NB_LIFE_AUTO_RESUME | NB_LIFE_PAUSE_ON_TIMEOUT);
    assert_consistent(&f->app);
}

static void test_create_asking_for_more_than_the_defaults_is_served_cold(void **state)
{
    struct fixture *f = *state;
    struct nb_sandbox_spec spec;
    struct nb_slot out;
    struct nb_apierr ae;

    nb_warm_refill(&f->app);
    default_spec(&f->app, &spec);
    spec.memory *= 2;
    assert_false(nb_warm_fits(&f->app.conf, &spec));
    assert_int_equal(nb_sandbox_create(&f->app, &spec, &out, &ae), 0);
    assert_int_equal(fake.creates, 3);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 2);
}

static void test_warm_sandbox_that_does_not_answer_is_destroyed_and_served_cold(void **state)
{
    struct fixture *f = *state;
    struct nb_sandbox_spec spec;
    struct nb_slot out;
    struct nb_apierr ae;

    nb_warm_refill(&f->app);
    agent_silent = 1;
    default_spec(&f->app, &spec);
    assert_int_equal(nb_sandbox_create(&f->app, &spec, &out, &ae), 0);
    assert_int_equal(fake.creates, 3);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 1);
    assert_int_equal(count_state(&f->app, NB_SLOT_RUNNING), 1);
    assert_int_equal(fake_count(), 2);
    assert_consistent(&f->app);
}

static void test_cold_create_on_a_full_table_evicts_a_warm_sandbox(void **state)
{
    struct fixture *f = *state;

    nb_warm_refill(&f->app);
    while (count_state(&f->app, NB_SLOT_FREE) > 0)
        make_running(&f->app);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 2);
    make_running(&f->app);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 1);
    make_running(&f->app);
    assert_int_equal(count_state(&f->app, NB_SLOT_POOLED), 0);
    create_fails(f, NB_E_CAPACITY, "capacity");
    assert_consistent(&f->app);
}

/* How many POOLED slots hold image. */
static uint32_t pooled_of(struct nb_app *a, const char *image)
{
    uint32_t n = 0;
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++)
        n += a->table.slots[i].state == NB_SLOT_POOLED && !strcmp(a->table.slots[i].image, image);
    nb_table_unlock(&a->table);
    return n;
}

static void test_code_pool_is_kept_beside_the_default_one_with_kernels_started(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;
    struct nb_sandbox_spec spec;
    struct nb_slot out;
    struct nb_apierr ae;

    a->conf.warm_pool = 1;
    a->conf.warm_pool_code = 1;
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.images[0]), 1);
    assert_int_equal(pooled_of(a, a->conf.code_image), 1);
    /* only the code sandbox's kernel, started before it could be handed out */
    assert_int_equal(kernels_warmed, 1);
    assert_true(warmed_while_creating);
    nb_warm_refill(a);
    assert_int_equal(fake.creates, 2);

    /* a create of the code image with the defaults takes the warm one */
    default_spec(a, &spec);
    snprintf(spec.image, sizeof(spec.image), "%s", a->conf.code_image);
    assert_true(nb_warm_fits(&a->conf, &spec));
    assert_int_equal(nb_sandbox_create(a, &spec, &out, &ae), 0);
    assert_int_equal(fake.creates, 2);
    assert_string_equal(slot_of(a, out.id).image, a->conf.code_image);
    assert_int_equal(pooled_of(a, a->conf.code_image), 0);
    assert_int_equal(pooled_of(a, a->conf.images[0]), 1);
    nb_warm_refill(a); /* refilled, kernel and all */
    assert_int_equal(pooled_of(a, a->conf.code_image), 1);
    assert_int_equal(kernels_warmed, 2);
    assert_consistent(a);
}

static void test_code_pool_keeps_a_sandbox_whose_kernel_did_not_start(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;

    a->conf.warm_pool = 0;
    a->conf.warm_pool_code = 1;
    kernel_fails = 1;
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.code_image), 1);
    nb_warm_refill(a); /* no create-and-destroy loop */
    assert_int_equal(fake.creates, 1);
    assert_int_equal(kernels_warmed, 1);
    assert_consistent(a);
}

static void test_code_pool_off_or_not_allowed_keeps_none(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;
    struct nb_sandbox_spec spec;

    a->conf.warm_pool = 1;
    a->conf.warm_pool_code = 1;
    a->conf.n_images = 1; /* the operator allows only the default image */
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.code_image), 0);
    assert_int_equal(kernels_warmed, 0);
    default_spec(a, &spec);
    snprintf(spec.image, sizeof(spec.image), "%s", a->conf.code_image);
    assert_false(nb_warm_fits(&a->conf, &spec));

    /* allowed again but turned off: the code sandboxes a pass finds are surplus */
    a->conf.n_images = 2;
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.code_image), 1);
    a->conf.warm_pool_code = 0;
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.code_image), 0);
    assert_int_equal(pooled_of(a, a->conf.images[0]), 1);
    assert_consistent(a);
}

static void test_code_pool_of_the_default_image_starts_every_kernel(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;

    a->conf.warm_pool = 1;
    a->conf.warm_pool_code = 1;
    snprintf(a->conf.code_image, sizeof(a->conf.code_image), "%s", a->conf.images[0]);
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.images[0]), 2);
    assert_int_equal(kernels_warmed, 2);
}

static int setup_big(void **state)
{
    char err[128];
    return nb_metrics_map(err, sizeof(err)) != 0 ? -1 : setup_n(state, 32, 1);
}

static int teardown_big(void **state)
{
    nb_metrics_unmap();
    return teardown(state);
}

static void test_a_burst_that_misses_grows_the_pool_and_e2b_gets_its_own(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;
    struct nb_sandbox_spec spec;
    struct nb_slot out;
    struct nb_apierr ae;
    struct nb_warm_pool p[8];
    unsigned creates;

    a->conf.warm_pool_max = 4;
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.images[0]), 1);
    /* a burst of 3: one hit, two misses */
    default_spec(a, &spec);
    for (int i = 0; i < 3; i++)
        assert_int_equal(nb_sandbox_create(a, &spec, &out, &ae), 0);
    assert_int_equal(nb_warm_pools(a, p, 8), 2); /* the default image's, and E2B's of it */
    assert_string_equal(p[0].layout, "nanobox");
    assert_int_equal(p[0].hits, 1);
    assert_int_equal(p[0].misses, 2);
    nb_warm_refill(a); /* what it missed, on top of the floor */
    assert_int_equal(pooled_of(a, a->conf.images[0]), 3);
    assert_int_equal(nb_warm_target(&a->conf, a->conf.images[0]), 3);
    nb_warm_pools(a, p, 8);
    assert_int_equal(p[0].target, 3);
    assert_int_equal(p[0].ready, 3);
    /* a bigger one: up to warm_pool_max */
    for (int i = 0; i < 6; i++)
        assert_int_equal(nb_sandbox_create(a, &spec, &out, &ae), 0);
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.images[0]), 4);

    /* E2B's layout: not served by a plain warm one; its pool starts empty and learns */
    spec.lifecycle = NB_LIFE_E2B_HOME;
    assert_true(nb_warm_fits(&a->conf, &spec));
    creates = fake.creates;
    assert_int_equal(nb_sandbox_create(a, &spec, &out, &ae), 0);
    assert_int_equal(fake.creates, creates + 1); /* cold */
    assert_int_equal(pooled_of(a, a->conf.images[0]), 4);
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.images[0]), 5);
    nb_warm_pools(a, p, 8);
    assert_string_equal(p[1].layout, "e2b");
    assert_int_equal(p[1].ready, 1);
    creates = fake.creates;
    assert_int_equal(nb_sandbox_create(a, &spec, &out, &ae), 0);
    assert_int_equal(fake.creates, creates); /* warm */
    assert_int_equal(slot_of(a, out.id).lifecycle, NB_LIFE_E2B_HOME);
    /* and a plain create still takes a plain one */
    spec.lifecycle = 0;
    assert_int_equal(nb_sandbox_create(a, &spec, &out, &ae), 0);
    assert_int_equal(slot_of(a, out.id).lifecycle, 0);
    assert_int_equal(fake.creates, creates);
    assert_consistent(a);
}

static void test_the_memory_budget_caps_the_pools(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;

    a->conf.warm_pool = 3;
    a->conf.warm_pool_memory = a->conf.memory * 2;
    nb_warm_refill(a);
    nb_warm_refill(a);
    assert_int_equal(pooled_of(a, a->conf.images[0]), 2);
    assert_int_equal(nb_warm_target(&a->conf, a->conf.images[0]), 2);
    a->conf.warm_pool_memory = a->conf.memory;
    nb_warm_refill(a); /* over it now: one out */
    assert_int_equal(pooled_of(a, a->conf.images[0]), 1);
    assert_consistent(a);
}

/* ---- templates ---- */

static void test_template_names_paths_and_refs(void **state)
{
    struct fixture *f = *state;
    char out[128];
    (void)f;
    assert_true(nb_template_name_ok("a"));
    assert_true(nb_template_name_ok("0.x_y-z"));
    assert_true(
        nb_template_name_ok("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0"));
    assert_false(nb_template_name_ok(""));
    assert_false(nb_template_name_ok("-a"));
    assert_false(nb_template_name_ok(".a"));
    assert_false(nb_template_name_ok("Ab"));
    assert_false(nb_template_name_ok("a/b"));
    assert_false(nb_template_name_ok("a:b"));
    assert_false(
        nb_template_name_ok("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01"));
    assert_int_equal(nb_template_path_ok("a/b.txt"), 0);
    assert_int_equal(nb_template_path_ok("x..y"), 0);
    assert_int_equal(nb_template_path_ok("../a"), -1);
    assert_int_equal(nb_template_path_ok("a/../b"), -1);
    assert_int_equal(nb_template_path_ok("./a"), -1);
    assert_int_equal(nb_template_path_ok("/etc/x"), -1);
    assert_int_equal(nb_template_path_ok("a//b"), -1);
    assert_int_equal(nb_template_path_ok("Dockerfile"), -1);
    assert_int_equal(nb_template_path_ok(""), -1);
    /* the instance becomes a Docker repository: lower case, and a hash when changed */
    /* the tag is a keyed hash of (instance, owner, name): the owner's own, not guessable */
    nb_template_ref(&f->app.conf, NULL, "t1", out, sizeof(out));
    assert_true(!strncmp(out, "nanobox-tpl-default:", 20) && strlen(out) == 20 + NB_TPL_KEY_LEN);
    {
        char other[128];
        nb_template_ref(&f->app.conf, "alice", "t1", other, sizeof(other));
        assert_string_not_equal(out, other);
        nb_template_ref(&f->app.conf, "default", "t1", other, sizeof(other));
        assert_string_equal(out, other);
    }
    snprintf(f->app.conf.instance, sizeof(f->app.conf.instance), "Prod_1");
    nb_template_ref(&f->app.conf, NULL, "t1", out, sizeof(out));
    assert_true(!strncmp(out, "nanobox-tpl-prod-1-", 19) &&
                strlen(out) == 19 + 8 + 1 + NB_TPL_KEY_LEN);
    nb_template_conf_name("nanobox:latest", out, sizeof(out));
    assert_string_equal(out, "nanobox");
    nb_template_conf_name("nanobox-python:3.11", out, sizeof(out));
    assert_string_equal(out, "nanobox-python-3.11");
}

static enum nb_err from_err(const struct nb_conf *c, const char *df)
{
    struct nb_apierr ae = {0};
    return nb_template_check_from(c, df, strlen(df), &ae) == 0 ? NB_E_OK : ae.err;
}

static void test_template_from_lines(void **state)
{
    struct fixture *f = *state;
    const struct nb_conf *c = &f->app.conf;
    assert_int_equal(from_err(c, "FROM nanobox:latest\nRUN true\n"), NB_E_OK);
    assert_int_equal(from_err(c, "FROM nanobox\n"), NB_E_OK);
    assert_int_equal(from_err(c, "from docker.io/library/nanobox-python\n"), NB_E_OK);
    assert_int_equal(from_err(c, "# a comment\n\n  FROM --platform=linux/amd64 nanobox AS b\n"
                                 "FROM b\nCOPY --from=b /x /y\n"),
                     0);
    assert_int_equal(from_err(c, "FROM nanobox AS Base\nFROM base\n"), NB_E_OK);
    assert_int_equal(from_err(c, "FROM debian\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox AS a\nFROM alpine\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "ARG X=nanobox\nFROM $X\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM ${X:-nanobox}\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM \\\n  debian\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "RUN echo \\\nFROM debian\n"),
                     NB_E_INVALID); /* an argument, no FROM */
    assert_int_equal(from_err(c, "RUN a \\\n# FROM debian\n b\nFROM nanobox\n"), NB_E_OK);
    assert_int_equal(from_err(c, "# escape=`\nFROM `\n debian\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "# escape=`\nFROM nanobox\nRUN a \\\nFROM debian\n"),
                     NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "RUN true\n"), NB_E_INVALID);
    assert_int_equal(from_err(c, "FROM\n"), NB_E_INVALID);
    /* every image a build names: COPY --from (by image, variable, quotes, a split line) */
    assert_int_equal(from_err(c, "FROM nanobox\nCOPY --from=nanobox-tpl-default:b /x /y\n"),
                     NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nCOPY --from=nanobox /x /y\n"), NB_E_OK);
    assert_int_equal(from_err(c, "FROM nanobox AS a\nFROM nanobox\nCOPY --from=0 /x /y\n"),
                     NB_E_OK);
    assert_int_equal(from_err(c, "FROM nanobox AS a\nFROM nanobox\nCOPY --from=A /x /y\n"),
                     NB_E_OK);
    assert_int_equal(from_err(c, "FROM nanobox\nCOPY --from=${X} /x /y\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nCOPY --\"from\"=debian /x /y\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nCOPY --fr\\\nom=debian /x /y\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nCOPY --from='debian' /x /y\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nCOPY -- --from=debian /y\n"), NB_E_OK); /* a file */
    assert_int_equal(from_err(c, "FROM nanobox\nADD --from=debian /x /y\n"), NB_E_FORBIDDEN);
    /* ONBUILD, directives other than escape, RUN's BuildKit flags */
    assert_int_equal(from_err(c, "FROM nanobox\nONBUILD COPY --from=debian /x /y\n"),
                     NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "# syntax=docker/dockerfile:1\nFROM nanobox\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "# check=skip=all\n# escape=`\nFROM `\n debian\n"),
                     NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "# note=x\nFROM nanobox\n"), NB_E_OK);
    /* found by fuzz_dockerfile: a written line that Docker would continue into the next one */
    assert_int_equal(from_err(c, "FROM nanobox\nCOPY a b\f\\\r\t\nFROM debian\n"), NB_E_INVALID);
    assert_int_equal(from_err(c, "FROM nanobox\nRUN --mount=from=debian,target=/d true\n"),
                     NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nRUN --network=host true\n"), NB_E_FORBIDDEN);
    /* ADD of a URL: fetched by dockerd in the host's namespace */
    assert_int_equal(from_err(c, "FROM nanobox\nADD http://127.0.0.1:1/s /s\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nADD [\"http\\u003a//h/s\", \"/s\"]\n"),
                     NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nARG U\nADD $U /s\n"), NB_E_FORBIDDEN);
    assert_int_equal(from_err(c, "FROM nanobox\nADD a.tar /s\n"), NB_E_OK);
    assert_int_equal(from_err(c, "FROM nanobox\nBOGUS x\n"), NB_E_INVALID);
    assert_int_equal(from_err(c, ""), NB_E_INVALID);
    /* the operator's own list replaces the default */
    snprintf(f->app.conf.template_from, sizeof(f->app.conf.template_from), "debian:12, alpine");
    assert_int_equal(from_err(c, "FROM debian:12\nFROM alpine:latest\n"), NB_E_OK);
    assert_int_equal(from_err(c, "FROM nanobox\n"), NB_E_FORBIDDEN);
}

static void tpl_request(struct nb_template_req *rq, const char *name)
{
    static const struct nb_template_file file = {"dir/hello.txt", "hello\n", 6};
    static const char df[] = "FROM nanobox:latest\nCOPY dir/hello.txt /x\n";
    memset(rq, 0, sizeof(*rq));
    rq->name = name;
    rq->dockerfile = df;
    rq->dockerfile_len = strlen(df);
    rq->files = &file;
    rq->n_files = 1;
}

/* The job key of the admin's template name. */
static const char *tpl_key(const struct nb_app *a, const char *name)
{
    static char key[NB_TPL_KEY_LEN + 1];
    nb_template_key(&a->conf, NULL, name, key);
    return key;
}

/* What the reaper does before it forks a builder: the job leaves the queue for run/. */
static void tpl_start_job(const struct nb_app *a, const char *name)
{
    char from[PATH_MAX], to[PATH_MAX], dir[PATH_MAX - 128];
    nb_isolation_path(&a->conf, "templates", 0, dir, sizeof(dir));
    snprintf(from, sizeof(from), "%s/queue/%.60s.json", dir, tpl_key(a, name));
    snprintf(to, sizeof(to), "%s/run/%.60s.json", dir, tpl_key(a, name));
    assert_int_equal(rename(from, to), 0);
}

/* The image of the admin's template name. */
static const char *tpl_ref(const struct nb_app *a, const char *name)
{
    static char ref[128];
    nb_template_ref(&a->conf, NULL, name, ref, sizeof(ref));
    return ref;
}

static void test_template_submit_build_ready_and_delete(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;
    struct nb_template_req rq;
    struct nb_template t;
    struct nb_apierr ae = {0};
    char image[128];

    tpl_request(&rq, "tools");
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), 0);
    assert_string_equal(t.status, "building");
    assert_string_equal(t.image, tpl_ref(a, "tools"));
    assert_int_equal(nb_template_get(a, "tools", NULL, &t, &ae), 0);
    assert_string_equal(t.status, "building");
    /* not ready: no sandbox from it, and the name is taken */
    assert_int_equal(nb_template_image(a, "tools", NULL, image, sizeof(image), &ae), -1);
    assert_int_equal(ae.err, NB_E_CONFLICT);
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), -1);
    assert_int_equal(ae.err, NB_E_CONFLICT);
    assert_int_equal(nb_template_delete(a, "tools", NULL, 0, &ae), -1);
    assert_int_equal(ae.err, NB_E_CONFLICT);
    assert_false(nb_template_image_allowed(a, tpl_ref(a, "tools"), NULL));

    /* the builder, once the reaper handed it the job */
    tpl_start_job(a, "tools");
    assert_int_equal(nb_template_build_job(a, &a->docker, tpl_key(a, "tools")), 0);
    /* the context was a tar holding the Dockerfile and the file */
    assert_memory_equal(fake.build_context, "Dockerfile", 10);
    assert_non_null(memmem(fake.build_context, sizeof(fake.build_context), "dir/hello.txt", 13));
    /* the labels as one instruction after the user's (one build step, not one per label) */
    {
        static const char want[] = "COPY dir/hello.txt /x\n\nLABEL nanobox.instance=\"default\" "
                                   "nanobox.template=\"tools\" nanobox.kind=\"build\" "
                                   "nanobox.status=\"ready\" nanobox.created_at=\"";
        assert_non_null(memmem(fake.build_context, sizeof(fake.build_context), want, strlen(want)));
    }
    assert_int_equal(nb_template_get(a, "tools", NULL, &t, &ae), 0);
    assert_string_equal(t.status, "ready");
    assert_int_equal(t.size, 1234);
    assert_true(!strncmp(t.digest, "sha256:", 7));
    assert_int_equal(fake_img(""), -1); /* the build record went */
    assert_int_equal(nb_template_image(a, "tools", NULL, image, sizeof(image), &ae), 0);
    assert_string_equal(image, tpl_ref(a, "tools"));
    /* another key's view: not its template, by name or by image */
    assert_false(nb_template_image_allowed(a, image, "alice"));
    assert_int_equal(nb_template_get(a, "tools", "alice", &t, &ae), -1);
    assert_int_equal(ae.err, NB_E_NOT_FOUND);
    assert_true(nb_template_image_allowed(a, image, NULL));
    assert_true(nb_template_image_allowed(a, "nanobox:latest", NULL));
    assert_false(nb_template_image_allowed(a, tpl_ref(a, "other"), NULL));

    /* a sandbox of it holds it unless forced */
    nb_table_lock(&a->table);
    snprintf(a->table.slots[0].image, sizeof(a->table.slots[0].image), "%s", image);
    a->table.slots[0].state = NB_SLOT_RUNNING;
    nb_table_unlock(&a->table);
    assert_int_equal(nb_template_delete(a, "tools", NULL, 0, &ae), -1);
    assert_int_equal(ae.err, NB_E_CONFLICT);
    assert_string_equal(ae.code, "in_use");
    assert_int_equal(nb_template_delete(a, "tools", NULL, 1, &ae), 0);
    assert_int_equal(nb_template_get(a, "tools", NULL, &t, &ae), -1);
    assert_int_equal(ae.err, NB_E_NOT_FOUND);
    assert_int_equal(nb_template_delete(a, "nanobox", NULL, 1, &ae), -1);
    assert_int_equal(ae.err, NB_E_FORBIDDEN);
}

static void test_template_failed_build_keeps_the_error(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;
    struct nb_template_req rq;
    struct nb_template t;
    struct nb_apierr ae = {0};

    tpl_request(&rq, "broken");
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), 0);
    tpl_start_job(a, "broken");
    fake.build_error = "The command '/bin/sh -c exit 3' returned a non-zero code: 3";
    assert_int_equal(nb_template_build_job(a, &a->docker, tpl_key(a, "broken")), -1);
    assert_int_equal(nb_template_get(a, "broken", NULL, &t, &ae), 0);
    assert_string_equal(t.status, "failed");
    assert_string_equal(t.error, fake.build_error);
    assert_string_equal(t.digest, "");
    assert_int_equal(fake.imports, 2); /* building, then failed: the first one removed */
    {
        int n = 0;
        for (int i = 0; i < FAKE_MAX; i++)
            n += fake.img_used[i];
        assert_int_equal(n, 1);
    }
    assert_int_equal(nb_template_delete(a, "broken", NULL, 0, &ae), 0);
}

static void collect_names(void *arg, const struct nb_template *t)
{
    char *out = arg;
    strcat(out, t->name);
    strcat(out, ",");
}

static void test_template_list_and_bad_submits(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;
    struct nb_template_req rq;
    struct nb_template t;
    struct nb_apierr ae = {0};
    char names[512] = "";
    static const struct nb_template_file bad = {"../x", "x", 1};

    tpl_request(&rq, "zeta");
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), 0);
    tpl_request(&rq, "alpha");
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), 0);
    assert_int_equal(nb_template_list(a, NULL, collect_names, names, &ae), 0);
    assert_string_equal(names, "nanobox,nanobox-python,alpha,zeta,");

    tpl_request(&rq, "Bad");
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), -1);
    assert_int_equal(ae.err, NB_E_INVALID);
    tpl_request(&rq, "nanobox-python");
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), -1);
    assert_int_equal(ae.err, NB_E_CONFLICT);
    tpl_request(&rq, "x");
    rq.files = &bad;
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), -1);
    assert_int_equal(ae.err, NB_E_INVALID);
    tpl_request(&rq, "x");
    a->conf.template_context_max = 4096;
    rq.dockerfile_len = 5000; /* the cap counts the Dockerfile too */
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), -1);
    assert_int_equal(ae.err, NB_E_TOO_LARGE);
    /* ends inside a continued line (blank lines do not end it): the labels' LABEL would join it */
    tpl_request(&rq, "x");
    rq.dockerfile = "FROM nanobox\nRUN true \\\n\n";
    rq.dockerfile_len = strlen(rq.dockerfile);
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), -1);
    assert_int_equal(ae.err, NB_E_INVALID);
    assert_string_equal(ae.code, "bad_dockerfile");
    assert_int_equal(fake.imports, 2);
}

/* The record labels' values are quoted for Docker's parser: '"', '$' and the escape escaped. */
static void test_template_labels_quote_the_instance(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;
    struct nb_template_req rq;
    struct nb_template t;
    struct nb_apierr ae = {0};
    static const char want[] = "nanobox.instance=\"a \\\"b\\\" \\$HOME \\\\ c\"";
    static const char want_bt[] = "nanobox.instance=\"a `\"b`\" `$HOME \\ c\"";

    snprintf(a->conf.instance, sizeof(a->conf.instance), "a \"b\" $HOME \\ c");
    tpl_request(&rq, "quoted");
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), 0);
    tpl_start_job(a, "quoted");
    assert_int_equal(nb_template_build_job(a, &a->docker, tpl_key(a, "quoted")), 0);
    assert_non_null(memmem(fake.build_context, sizeof(fake.build_context), want, strlen(want)));
    assert_int_equal(nb_template_get(a, "quoted", NULL, &t, &ae), 0);
    assert_string_equal(t.status, "ready");

    tpl_request(&rq, "quoted2");
    rq.dockerfile = "# escape=`\nFROM nanobox\n";
    rq.dockerfile_len = strlen(rq.dockerfile);
    assert_int_equal(nb_template_submit(a, &rq, &t, &ae), 0);
    tpl_start_job(a, "quoted2");
    nb_template_build_job(a, &a->docker, tpl_key(a, "quoted2"));
    assert_non_null(
        memmem(fake.build_context, sizeof(fake.build_context), want_bt, strlen(want_bt)));
}

/* ---- adoption after a fresh table (adopt.c) ---- */

#define ADOPT_ID "0123abcd-0000-4000-8000-00000000beef"

/* A listed container as Docker's labels describe it (docker.c reads them). */
static void ctr_from_labels(struct nb_docker_ctr *c, const char *labels_json)
{
    yajl_val v = NULL;
    char err[64];

    memset(c, 0, sizeof(*c));
    c->slot = -1;
    assert_int_equal(nb_json_parse(labels_json, strlen(labels_json), 8, &v, err, sizeof(err)), 0);
    nb_docker_ctr_labels(c, v);
    yajl_tree_free(v);
}

static void test_container_labels_are_read_back(void **state)
{
    struct nb_docker_ctr c;

    (void)state;
    ctr_from_labels(&c, "{\"nanobox.sandbox\":\"" ADOPT_ID "\",\"nanobox.owner\":\"alice\","
                        "\"nanobox.expires\":\"5000\",\"nanobox.created\":\"4000\","
                        "\"nanobox.slot\":\"3\",\"nanobox.image\":\"nanobox:latest\","
                        "\"nanobox.memory\":\"268435456\",\"nanobox.nano_cpus\":\"500000000\","
                        "\"nanobox.pids\":\"128\",\"nanobox.network\":\"bridge\","
                        "\"nanobox.auto_resume\":\"1\",\"nanobox.pooled\":\"0\","
                        "\"nanobox.on_timeout\":\"pause\","
                        "\"nanobox.metadata\":\"{\\\"a\\\":1}\"}");
    assert_string_equal(c.sandbox, ADOPT_ID);
    assert_string_equal(c.owner, "alice");
    assert_int_equal(c.expires, 5000);
    assert_int_equal(c.created, 4000);
    assert_int_equal(c.slot, 3);
    assert_string_equal(c.image, "nanobox:latest");
    assert_int_equal(c.memory, 268435456);
    assert_int_equal(c.nano_cpus, 500000000);
    assert_int_equal(c.pids, 128);
    assert_int_equal(c.network_bridge, 1);
    assert_int_equal(c.auto_resume, 1);
    assert_int_equal(c.pause_on_timeout, 1);
    assert_int_equal(c.pooled, 0);
    assert_string_equal(c.metadata, "{\"a\":1}");

    /* a container of a build before adoption labels: no slot; bad numbers are absent */
    ctr_from_labels(&c, "{\"nanobox.sandbox\":\"" ADOPT_ID "\",\"nanobox.expires\":\"12x\","
                        "\"nanobox.memory\":\"-5\",\"nanobox.network\":\"none\","
                        "\"nanobox.pooled\":\"1\"}");
    assert_int_equal(c.slot, -1);
    assert_int_equal(c.expires, 0);
    assert_int_equal(c.memory, 0);
    assert_int_equal(c.network_bridge, 0);
    assert_int_equal(c.pooled, 1);
    assert_int_equal(c.pause_on_timeout, 0);
    assert_string_equal(c.owner, "");
    ctr_from_labels(&c, "{\"nanobox.slot\":\"-2\"}");
    assert_int_equal(c.slot, -1);
    ctr_from_labels(&c, "{\"nanobox.slot\":\"\"}");
    assert_int_equal(c.slot, -1);
}

static void test_lease_is_written_and_read_back(void **state)
{
    struct fixture *f = *state;
    struct nb_app *a = &f->app;
    struct nb_slot s;
    struct nb_lease l;
    char path[PATH_MAX], text[4096];
    ssize_t n;
    int fd;

    memset(&s, 0, sizeof(s));
    snprintf(s.id, sizeof(s.id), "%s", ADOPT_ID);
    snprintf(s.owner, sizeof(s.owner), "bob");
    snprintf(s.metadata, sizeof(s.metadata), "{\"k\":\"v\\n\"}");
    s.state = NB_SLOT_RUNNING;
    s.expires = 7000;
    s.lifecycle = NB_LIFE_AUTO_RESUME | NB_LIFE_PAUSE_ON_TIMEOUT;
    nb_adopt_lease_write(&a->conf, 2, &s, 1000);
    nb_isolation_path(&a->conf, "lease", 2, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    assert_true(n > 0);
    text[n] = '\0';
    assert_int_equal(nb_adopt_lease_parse(text, (size_t)n, &l), 0);
    assert_string_equal(l.id, ADOPT_ID);
    assert_string_equal(l.owner, "bob");
    assert_int_equal(l.expires, 7000);
    assert_int_equal(l.ttl_left, 0);
    assert_int_equal(l.auto_resume, 1);
    assert_int_equal(l.pause_on_timeout, 1);
    assert_string_equal(l.metadata, "{\"k\":\"v\\n\"}");

    /* paused: its stopped TTL and its pause's end */
    s.state = NB_SLOT_PAUSED;
    s.ttl_left = 90;
    s.pause_expires = 9000;
    nb_adopt_lease_write(&a->conf, 2, &s, 1000);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    assert_true(n > 0);
    text[n] = '\0';
    assert_int_equal(nb_adopt_lease_parse(text, (size_t)n, &l), 0);
    assert_int_equal(l.expires, 1090);
    assert_int_equal(l.ttl_left, 90);
    assert_int_equal(l.pause_expires, 9000);

    /* not a lease: refused */
#define BAD(t) assert_int_equal(nb_adopt_lease_parse(t, strlen(t), &l), -1)
    BAD("");
    BAD("garbage");
    BAD("[]");
    BAD("{}");
    BAD("{\"id\":\"nope\",\"owner\":\"a\",\"expires\":5}");
    BAD("{\"id\":\"" ADOPT_ID "\",\"expires\":5}");
    BAD("{\"id\":\"" ADOPT_ID "\",\"owner\":\"a\"}");
    BAD("{\"id\":\"" ADOPT_ID "\",\"owner\":\"a\",\"expires\":0}");
    BAD("{\"id\":\"" ADOPT_ID "\",\"owner\":\"a\",\"expires\":\"5\"}");
    BAD("{\"id\":\"" ADOPT_ID "\",\"owner\":\"0123456789012345678901234567890123\",\"expires\":5}");
#undef BAD
}

/* argv as /proc/<pid>/cmdline has it: NUL after each. */
static size_t cmdline(char *out, size_t size, const char *const *argv)
{
    size_t len = 0;

    for (; *argv != NULL; argv++) {
        size_t n = strlen(*argv) + 1;
        assert_true(len + n <= size);
        memcpy(out + len, *argv, n);
        len += n;
    }
    return len;
}

static void test_forwarder_command_lines_are_parsed(void **state)
{
    const char *good[] = {"/usr/sbin/nanobox-fwd",
                          "--target-pid",
                          "4242",
                          "--port",
                          "8000",
                          "--listen",
                          "0.0.0.0:41000",
                          "--unix",
                          "/run/nb/ports/" ADOPT_ID "-8000.sock",
                          "--expires",
                          "1700000000",
                          "--unix-mode",
                          "666",
                          NULL};
    const char *other_dir[] = {"nanobox-fwd",
                               "--target-pid",
                               "1",
                               "--port",
                               "8000",
                               "--listen",
                               "h:1",
                               "--unix",
                               "/elsewhere/" ADOPT_ID "-8000.sock",
                               "--expires",
                               "5",
                               NULL};
    const char *port_mismatch[] = {"nanobox-fwd",
                                   "--target-pid",
                                   "1",
                                   "--port",
                                   "8001",
                                   "--listen",
                                   "h:1",
                                   "--unix",
                                   "/run/nb/ports/" ADOPT_ID "-8000.sock",
                                   "--expires",
                                   "5",
                                   NULL};
    const char *not_fwd[] = {"/bin/sleep",
                             "--target-pid",
                             "1",
                             "--port",
                             "8000",
                             "--listen",
                             "h:1",
                             "--unix",
                             "/run/nb/ports/" ADOPT_ID "-8000.sock",
                             "--expires",
                             "5",
                             NULL};
    const char *bad_host_port[] = {"nanobox-fwd",
                                   "--target-pid",
                                   "1",
                                   "--port",
                                   "8000",
                                   "--listen",
                                   "h:99999",
                                   "--unix",
                                   "/run/nb/ports/" ADOPT_ID "-8000.sock",
                                   "--expires",
                                   "5",
                                   NULL};
    const char *missing_value[] = {"nanobox-fwd",
                                   "--target-pid",
                                   "1",
                                   "--port",
                                   "8000",
                                   "--listen",
                                   "h:1",
                                   "--unix",
                                   "/run/nb/ports/" ADOPT_ID "-8000.sock",
                                   "--expires",
                                   NULL};
    struct nb_fwd_rec r;
    char buf[1024];
    size_t n;

    (void)state;
    n = cmdline(buf, sizeof(buf), good);
    assert_int_equal(nb_adopt_fwd_parse(buf, n, "/run/nb/ports", &r), 0);
    assert_string_equal(r.id, ADOPT_ID);
    assert_int_equal(r.sandboxport, 8000);
    assert_int_equal(r.hostport, 41000);
    assert_int_equal(r.target_pid, 4242);
    assert_int_equal(r.expires, 1700000000);
    /* another stack's ports_dir, or a prefix of a name */
    assert_int_equal(nb_adopt_fwd_parse(buf, n, "/run/nb", &r), -1);
    assert_int_equal(nb_adopt_fwd_parse(buf, n, "/run/nb/port", &r), -1);
    n = cmdline(buf, sizeof(buf), other_dir);
    assert_int_equal(nb_adopt_fwd_parse(buf, n, "/run/nb/ports", &r), -1);
    n = cmdline(buf, sizeof(buf), port_mismatch);
    assert_int_equal(nb_adopt_fwd_parse(buf, n, "/run/nb/ports", &r), -1);
    n = cmdline(buf, sizeof(buf), not_fwd);
    assert_int_equal(nb_adopt_fwd_parse(buf, n, "/run/nb/ports", &r), -1);
    n = cmdline(buf, sizeof(buf), bad_host_port);
    assert_int_equal(nb_adopt_fwd_parse(buf, n, "/run/nb/ports", &r), -1);
    n = cmdline(buf, sizeof(buf), missing_value);
    assert_int_equal(nb_adopt_fwd_parse(buf, n, "/run/nb/ports", &r), -1);
    /* cut short inside a value it needs (no NUL after it): never read past the end */
    n = cmdline(buf, sizeof(buf), good);
    {
        const char *at = memmem(buf, n, "1700000000", 10);
        assert_non_null(at);
        assert_int_equal(nb_adopt_fwd_parse(buf, (size_t)(at - buf) + 4, "/run/nb/ports", &r), -1);
    }
    assert_int_equal(nb_adopt_fwd_parse(buf, 0, "/run/nb/ports", &r), -1);
}

static void test_adoption_rules(void **state)
{
    struct nb_docker_ctr c;
    struct nb_lease l;
    struct nb_slot s;
    enum nb_slot_state to;
    char why[160];

    (void)state;
    ctr_from_labels(&c, "{\"nanobox.sandbox\":\"" ADOPT_ID "\",\"nanobox.owner\":\"alice\","
                        "\"nanobox.expires\":\"5000\",\"nanobox.created\":\"4000\","
                        "\"nanobox.slot\":\"3\",\"nanobox.image\":\"img\","
                        "\"nanobox.memory\":\"100\",\"nanobox.pids\":\"7\","
                        "\"nanobox.metadata\":\"{\\\"m\\\":2}\"}");
    snprintf(c.id, sizeof(c.id), "cafe");
    c.running = 1;
    assert_int_equal(nb_adopt_slot(&c, NULL, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), 0);
    assert_int_equal(to, NB_SLOT_RUNNING);
    assert_string_equal(s.id, ADOPT_ID);
    assert_string_equal(s.container_id, "cafe");
    assert_string_equal(s.owner, "alice");
    assert_string_equal(s.image, "img");
    assert_string_equal(s.metadata, "{\"m\":2}");
    assert_int_equal(s.expires, 5000);
    assert_int_equal(s.created, 4000);
    assert_int_equal(s.init_pid, 99);
    assert_int_equal(s.memory, 100);
    assert_int_equal(s.pids, 7);
    assert_int_equal(s.lifecycle, 0);
    c.pause_on_timeout = 1; /* label nanobox.on_timeout "pause" */
    assert_int_equal(nb_adopt_slot(&c, NULL, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), 0);
    assert_int_equal(s.lifecycle, NB_LIFE_PAUSE_ON_TIMEOUT);

    /* its lease (a hand-out, an extension) is newer than its labels */
    memset(&l, 0, sizeof(l));
    snprintf(l.id, sizeof(l.id), "%s", ADOPT_ID);
    snprintf(l.owner, sizeof(l.owner), "bob");
    snprintf(l.metadata, sizeof(l.metadata), "{}");
    l.expires = 8000;
    l.auto_resume = 1;
    assert_int_equal(nb_adopt_slot(&c, &l, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), 0);
    assert_string_equal(s.owner, "bob");
    assert_int_equal(s.expires, 8000);
    assert_int_equal(s.lifecycle, NB_LIFE_AUTO_RESUME); /* the lease's: no pause on timeout */
    assert_string_equal(s.metadata, "{}");

    /* paused: TTL left from the expiry, pause TTL afresh; or both from the lease */
    c.paused = 1;
    assert_int_equal(nb_adopt_slot(&c, NULL, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), 0);
    assert_int_equal(to, NB_SLOT_PAUSED);
    assert_int_equal(s.ttl_left, 500);
    assert_int_equal(s.pause_expires, 5100);
    l.ttl_left = 77;
    l.pause_expires = 4600;
    assert_int_equal(nb_adopt_slot(&c, &l, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), 0);
    assert_int_equal(s.ttl_left, 77);
    assert_int_equal(s.pause_expires, 4600);
    c.paused = 0;

    /* no owner anywhere: admin-only */
    c.owner[0] = '\0';
    assert_int_equal(nb_adopt_slot(&c, NULL, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), 0);
    assert_string_equal(s.owner, "");

    /* not adoptable */
    assert_int_equal(nb_adopt_slot(&c, NULL, 99, 3, 600, 4500, &s, &to, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "beyond max_sandboxes"));
    assert_int_equal(nb_adopt_slot(&c, NULL, 0, 4, 600, 4500, &s, &to, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "not running"));
    c.pooled = 1;
    assert_int_equal(nb_adopt_slot(&c, NULL, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "warm"));
    assert_int_equal(nb_adopt_slot(&c, &l, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), 0);
    c.pooled = 0;
    c.slot = -1;
    assert_int_equal(nb_adopt_slot(&c, NULL, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "nanobox.slot"));
    c.slot = 3;
    c.running = 0;
    assert_int_equal(nb_adopt_slot(&c, NULL, 99, 4, 600, 4500, &s, &to, why, sizeof(why)), -1);
}

static void test_owner_is_read_back_from_the_label(void **state)
{
    struct nb_docker_ctr c;
    struct nb_slot s;

    (void)state;
    memset(&c, 0, sizeof(c));
    memset(&s, 0, sizeof(s));
    snprintf(c.owner, sizeof(c.owner), "alice");
    s.state = NB_SLOT_RUNNING;
    assert_int_equal(nb_reaper_owner_from_label(&s, &c), 1);
    assert_string_equal(s.owner, "alice");
    /* an owner already there stays */
    snprintf(c.owner, sizeof(c.owner), "bob");
    assert_int_equal(nb_reaper_owner_from_label(&s, &c), 0);
    assert_string_equal(s.owner, "alice");
    /* a warm one (its label is empty), no container, or a slot not up: nothing */
    s.owner[0] = '\0';
    assert_int_equal(nb_reaper_owner_from_label(&s, NULL), 0);
    s.state = NB_SLOT_POOLED;
    assert_int_equal(nb_reaper_owner_from_label(&s, &c), 0);
    s.state = NB_SLOT_PAUSED;
    c.owner[0] = '\0';
    assert_int_equal(nb_reaper_owner_from_label(&s, &c), 0);
    assert_string_equal(s.owner, "");
}

/* The root disk cap's measure: blocks on disk, symlinks not followed, a stop past the cap. */
/* A sandbox's volumes label (volume.h) round-trips, and a malformed one is refused whole. */
static void test_volume_label_round_trips(void **state)
{
    struct nb_volume_mount m[NB_VOLUMES_PER_SANDBOX + 1], back[NB_VOLUMES_PER_SANDBOX];
    char label[NB_VOLUMES_PER_SANDBOX * (NB_VOLUME_NAME_MAX + NB_VOLUME_PATH_MAX + 2) + 1];
    static const char *const bad[] = {
        "noc",        ":/data",   "a:",
        "a/b:/data",  "..:/data", "a:/x,",
        "a:/x,,b:/y", ",a:/x",    "a:/1,b:/2,c:/3,d:/4,e:/5,f:/6,g:/7,h:/8,i:/9"};
    unsigned n = 0;
    (void)state;
    memset(m, 0, sizeof(m));
    for (unsigned i = 0; i < NB_VOLUMES_PER_SANDBOX; i++) {
        snprintf(m[i].name, sizeof(m[i].name), "v%u.x-%0*u", i, NB_VOLUME_NAME_MAX - 6, i);
        snprintf(m[i].path, sizeof(m[i].path), "/mnt/%0*u", NB_VOLUME_PATH_MAX - 5, i);
    }
    nb_volume_label(m, NB_VOLUMES_PER_SANDBOX, label, sizeof(label));
    assert_int_equal(nb_volume_label_parse(label, back, &n), 0);
    assert_int_equal(n, NB_VOLUMES_PER_SANDBOX);
    for (unsigned i = 0; i < n; i++) {
        assert_string_equal(back[i].name, m[i].name);
        assert_string_equal(back[i].path, m[i].path);
    }
    nb_volume_label(m, 0, label, sizeof(label));
    assert_string_equal(label, "");
    assert_int_equal(nb_volume_label_parse("", back, &n), 0);
    assert_int_equal(n, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(nb_volume_label_parse(bad[i], back, &n), -1);
}

static void test_diskcap_walk_sums_blocks(void **state)
{
    char dir[] = "/tmp/nb-diskcap-XXXXXX", path[PATH_MAX], buf[4096];
    int fd;
    int64_t empty, full;
    (void)state;
    assert_non_null(mkdtemp(dir));
    empty = nb_diskcap_walk(dir, 0);
    assert_true(empty >= 0);
    snprintf(path, sizeof(path), "%s/sub", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/sub/f", dir);
    fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    memset(buf, 'x', sizeof(buf));
    for (int i = 0; i < 64; i++) /* 256 KiB */
        assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
    assert_int_equal(fsync(fd), 0);
    close(fd);
    snprintf(path, sizeof(path), "%s/etc", dir); /* a symlink is not followed */
    assert_int_equal(symlink("/etc", path), 0);
    full = nb_diskcap_walk(dir, 0);
    assert_true(full >= empty + 256 * 1024);
    assert_true(full < empty + 256 * 1024 + 64 * 1024);
    assert_true(nb_diskcap_walk(dir, 1) > 1); /* stops, with what it summed */
    snprintf(path, sizeof(path), "%s/nothing", dir);
    assert_int_equal(nb_diskcap_walk(path, 0), -1);
    snprintf(path, sizeof(path), "%s/etc", dir);
    assert_int_equal(nb_diskcap_walk(path, 0), -1); /* the top itself a symlink */
    snprintf(path, sizeof(path), "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

#define T(test) cmocka_unit_test_setup_teardown(test, setup, teardown)
#define W(test) cmocka_unit_test_setup_teardown(test, setup_warm, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_create_starts_a_container_and_commits_a_running_slot),
        T(test_container_labels_are_read_back),
        T(test_lease_is_written_and_read_back),
        T(test_forwarder_command_lines_are_parsed),
        T(test_adoption_rules),
        T(test_owner_is_read_back_from_the_label),
        cmocka_unit_test(test_diskcap_walk_sums_blocks),
        cmocka_unit_test(test_volume_label_round_trips),
        T(test_create_refused_by_docker_frees_the_slot),
        T(test_create_with_a_missing_image_answers_503_image_missing),
        T(test_create_when_docker_is_unreachable_removes_nothing),
        T(test_start_failure_removes_the_container_and_frees_the_slot),
        T(test_container_that_does_not_stay_up_is_removed),
        T(test_failed_rollback_leaves_the_slot_to_reconciliation),
        T(test_create_whose_slot_was_taken_over_undoes_itself),
        T(test_full_table_answers_503_capacity_and_creates_nothing),
        T(test_destroy_removes_the_container_and_frees_the_slot),
        T(test_destroy_that_docker_refuses_gives_the_sandbox_back),
        T(test_expired_rule),
        T(test_expiry_destroys_expired_sandboxes_only),
        T(test_expiry_that_cannot_remove_leaves_the_slot_destroying),
        cmocka_unit_test(test_reaper_runs_jobs_at_their_subticks),
        cmocka_unit_test(test_reaper_wait_runs_a_woken_job_at_once),
        T(test_judge_rules),
        T(test_orphan_rule),
        T(test_released_pause_rules),
        T(test_idle_rule),
        T(test_reconcile_removes_orphan_containers),
        T(test_reconcile_spares_the_container_of_a_live_create),
        T(test_reconcile_frees_a_slot_whose_container_vanished),
        T(test_reconcile_destroys_a_sandbox_whose_container_stopped),
        T(test_container_event_destroys_a_dead_sandbox_at_once),
        T(test_reconcile_does_not_judge_sandboxes_newer_than_the_listing),
        T(test_reconcile_finishes_abandoned_creates_and_destroys),
        T(test_reconcile_waits_for_a_live_owner_until_it_is_stuck),
        T(test_reconcile_skipped_when_docker_is_unreachable),
        T(test_sandboxes_ride_through_a_restart_of_dockerd),
        T(test_pause_freezes_the_container_and_stops_the_ttl),
        T(test_pause_that_docker_refuses_leaves_it_running),
        T(test_pause_and_resume_of_no_sandbox_are_404),
        T(test_auto_resume_resumes_on_awake),
        T(test_on_timeout_pause_pauses_at_the_ttl_and_resumes_with_default_ttl),
        T(test_expiry_of_a_paused_sandbox_is_its_pause_ttl),
        T(test_reconcile_keeps_a_paused_sandbox_paused),
        T(test_a_paused_sandbox_is_destroyed),
        T(test_warm_wanted_sizing),
        W(test_warm_refill_starts_pooled_sandboxes_up_to_warm_pool),
        W(test_warm_refill_waits_while_docker_is_unreachable),
        W(test_warm_refill_keeps_the_last_free_slots_for_users),
        W(test_warm_refill_removes_one_surplus_per_pass),
        W(test_warm_refill_replaces_sandboxes_of_an_old_default_image),
        W(test_each_slot_runs_as_its_own_uid_warm_or_cold),
        W(test_create_with_the_defaults_takes_a_warm_sandbox),
        W(test_create_asking_for_more_than_the_defaults_is_served_cold),
        W(test_warm_sandbox_that_does_not_answer_is_destroyed_and_served_cold),
        W(test_cold_create_on_a_full_table_evicts_a_warm_sandbox),
        W(test_code_pool_is_kept_beside_the_default_one_with_kernels_started),
        W(test_code_pool_keeps_a_sandbox_whose_kernel_did_not_start),
        W(test_code_pool_off_or_not_allowed_keeps_none),
        W(test_code_pool_of_the_default_image_starts_every_kernel),
        cmocka_unit_test_setup_teardown(
            test_a_burst_that_misses_grows_the_pool_and_e2b_gets_its_own, setup_big, teardown_big),
        cmocka_unit_test_setup_teardown(test_the_memory_budget_caps_the_pools, setup_big,
                                        teardown_big),
        T(test_template_names_paths_and_refs),
        T(test_template_from_lines),
        T(test_template_submit_build_ready_and_delete),
        T(test_template_failed_build_keeps_the_error),
        T(test_template_list_and_bad_submits),
        T(test_template_labels_quote_the_instance),
    };

    nb_log_init("test_engine", NB_LOG_ERROR); /* the engine's warnings are expected here */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
