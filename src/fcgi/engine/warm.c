/*
 * warm.c - see warm.h.
 *
 * Every state change of a warm slot goes through the table's transitions
 * (commit to POOLED, hand out, mark destroying from POOLED only), so a
 * warm sandbox can never be handed out twice, and a user's RUNNING
 * sandbox is never taken for the pool's surplus.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adopt.h"
#include "agent.h"
#include "clock.h"
#include "code.h"
#include "isolation.h"
#include "log.h"
#include "metrics.h"
#include "procstat.h"
#include "templates.h"
#include "warm.h"
#include "warmsize.h"

/* Most time one refill pass may take from the reaper's tick. */
#define WARM_REFILL_BUDGET_MS 2000

/* How long a handed-out warm sandbox's agent has to answer a ping. */
#define WARM_PING_MS 1000

/* How long a code sandbox's python kernel may take to start (~2 s when all is well). */
#define WARM_KERNEL_MS 20000

const struct nb_sandbox_source nb_warm_source = {
    .take = nb_warm_take,
    .evict = nb_warm_evict,
};

/*
 * The pools ("kinds"): the default image's (warm_pool .. warm_pool_max),
 * code_image's with their kernel started (warm_pool_code ..
 * warm_pool_code_max; one pool of both when the two images are the same,
 * with the kernel started in all), the same two in E2B's layout (0 ..
 * warm_pool_e2b_max, where the base pool is on and E2B creates have a
 * layout of their own; no kernel: a code kernel starts in the workspace,
 * and an E2B sandbox's home is e2b_home), and those of warm_pool_template,
 * one per template (added to a pool of the same image; fixed sizes). A
 * code_image the operator does not allow has no pool. The kinds' order is
 * the same in every process (it comes from the config): their demand
 * counters in shared memory (metrics.h) go by it, and a memory budget too
 * small for all serves the first ones first.
 */
#define KINDS_MAX (4 + NB_WARM_TEMPLATES_MAX)
struct warm_kind {
    char image[NB_IMAGE_LEN];
    uint32_t layout; /* NB_LIFE_E2B_HOME for E2B's layout, else 0 */
    unsigned floor, ceiling;
    int kernel;                    /* start the default python kernel before pooling */
    char tpl[NB_TPL_NAME_MAX + 1]; /* a template of warm_pool_template: "" for the others */
};

_Static_assert(KINDS_MAX <= NB_METRICS_WARM_KINDS, "every warm pool has its demand counters");

static unsigned add_kind(struct warm_kind k[KINDS_MAX], unsigned n, const char *image,
                         uint32_t layout, unsigned floor, unsigned ceiling, int kernel,
                         const char *tpl)
{
    if (ceiling < floor)
        ceiling = floor;
    for (unsigned i = 0; i < n; i++)
        if (!strcmp(k[i].image, image) && k[i].layout == layout) {
            k[i].floor += floor;
            k[i].ceiling += ceiling;
            k[i].kernel |= kernel;
            return n;
        }
    if (n == KINDS_MAX)
        return n;
    snprintf(k[n].image, sizeof(k[n].image), "%s", image);
    k[n].layout = layout;
    k[n].floor = floor;
    k[n].ceiling = ceiling;
    k[n].kernel = kernel;
    snprintf(k[n].tpl, sizeof(k[n].tpl), "%s", tpl);
    return n + 1;
}

static unsigned warm_kinds(const struct nb_conf *c, struct warm_kind k[KINDS_MAX])
{
    struct nb_warm_template wt[NB_WARM_TEMPLATES_MAX];
    char err[256], image[NB_IMAGE_LEN], cname[NB_TPL_NAME_MAX + 1];
    int n_wt;
    int code = c->warm_pool_code > 0 && c->code_image[0] != '\0' &&
               nb_conf_image_allowed(c, c->code_image);
    /* E2B creates have a layout of their own: pools of it beside the plain
     * ones, where there is an E2B front to make such creates */
#ifdef NB_WITH_E2B
    int e2b = c->warm_pool_e2b_max > 0 && nb_isolation_e2b_layout(c);
#else
    int e2b = 0;
#endif
    unsigned n = 0;

    if (c->warm_pool > 0)
        n = add_kind(k, n, c->images[0], 0, c->warm_pool, c->warm_pool_max, 0, "");
    if (code)
        n = add_kind(k, n, c->code_image, 0, c->warm_pool_code, c->warm_pool_code_max, 1, "");
    if (e2b && c->warm_pool > 0)
        n = add_kind(k, n, c->images[0], NB_LIFE_E2B_HOME, 0, c->warm_pool_e2b_max, 0, "");
    if (e2b && code)
        n = add_kind(k, n, c->code_image, NB_LIFE_E2B_HOME, 0, c->warm_pool_e2b_max, 0, "");
    n_wt = nb_conf_warm_templates(c->warm_pool_template, wt, err, sizeof(err));
    for (int i = 0; i < n_wt; i++) {
        unsigned j;
        /* one of the operator's images by its template name, or a built one */
        for (j = 0; j < c->n_images; j++) {
            nb_template_conf_name(c->images[j], cname, sizeof(cname));
            if (!strcmp(cname, wt[i].name))
                break;
        }
        if (j < c->n_images)
            snprintf(image, sizeof(image), "%s", c->images[j]);
        else
            nb_template_ref(c, NULL, wt[i].name, image, sizeof(image)); /* the admin's */
        n = add_kind(k, n, image, 0, wt[i].want, wt[i].want, 0, j < c->n_images ? "" : wt[i].name);
    }
    return n;
}

/* The kind a slot of image and lifecycle bits belongs to, or n. */
static unsigned kind_of(const struct warm_kind *k, unsigned n, const char *image,
                        uint32_t lifecycle)
{
    unsigned i;
    for (i = 0; i < n; i++)
        if (!strcmp(k[i].image, image) && k[i].layout == (lifecycle & NB_LIFE_E2B_HOME))
            break;
    return i;
}

/* A kind's target as the reaper last set it, or its floor before it did. */
static unsigned published_target(const struct warm_kind *k, unsigned i)
{
    struct nb_mwarm m;
    nb_metrics_warm_read(i, &m);
    return m.published ? m.target : k[i].floor;
}

unsigned nb_warm_target(const struct nb_conf *c, const char *image)
{
    struct warm_kind k[KINDS_MAX];
    unsigned n = warm_kinds(c, k), sum = 0;

    for (unsigned i = 0; i < n; i++)
        if (!strcmp(k[i].image, image))
            sum += published_target(k, i);
    return sum;
}

unsigned nb_warm_pools(struct nb_app *a, struct nb_warm_pool *out, unsigned max)
{
    struct warm_kind k[KINDS_MAX];
    unsigned n = warm_kinds(&a->conf, k);

    if (n > max)
        n = max;
    for (unsigned i = 0; i < n; i++) {
        struct nb_mwarm m;
        memset(&out[i], 0, sizeof(out[i]));
        memcpy(out[i].image, k[i].image, sizeof(out[i].image));
        memcpy(out[i].tpl, k[i].tpl, sizeof(out[i].tpl));
        out[i].layout = k[i].layout ? "e2b" : "nanobox";
        out[i].floor = k[i].floor;
        out[i].ceiling = k[i].ceiling;
        out[i].target = published_target(k, i);
        nb_metrics_warm_read(i, &m);
        out[i].hits = m.hits;
        out[i].misses = m.misses;
    }
    nb_table_lock(&a->table);
    for (uint32_t j = 0; j < a->table.nslots; j++) {
        const struct nb_slot *s = &a->table.slots[j];
        unsigned i;
        if (s->state != NB_SLOT_POOLED)
            continue;
        i = kind_of(k, n, s->image, s->lifecycle);
        if (i < n)
            out[i].ready++;
    }
    nb_table_unlock(&a->table);
    return n;
}

/* The kind that serves spec, or -1: the defaults only, of one pool's image and layout. */
static int fitting_kind(const struct nb_conf *c, const struct nb_sandbox_spec *spec)
{
    struct warm_kind k[KINDS_MAX];
    unsigned n = warm_kinds(c, k), i = kind_of(k, n, spec->image, spec->lifecycle);

    if (i == n || k[i].ceiling == 0 || spec->memory != c->memory ||
        spec->nano_cpus != c->nano_cpus || spec->pids != c->pids || spec->network_bridge ||
        spec->n_env != 0)
        return -1;
    return (int)i;
}

int nb_warm_fits(const struct nb_conf *c, const struct nb_sandbox_spec *spec)
{
    return fitting_kind(c, spec) >= 0;
}

/*
 * The id of a warm sandbox was never shown to anyone before it is handed
 * out, so giving it the request's TTL, metadata and auto_resume makes it as good as
 * new. Its agent must answer, though: a warm sandbox may have sat for
 * hours.
 */
int nb_warm_take(struct nb_app *a, const struct nb_sandbox_spec *spec, struct nb_slot *out)
{
    struct nb_apierr ae;
    struct nb_slot *s;
    int64_t now = nb_clock_real_s();
    int found = 0, kind = fitting_kind(&a->conf, spec);

    if (kind < 0)
        return -1; /* not a miss: the pool holds nothing of this kind */
    nb_table_lock(&a->table);
    /* over a quota: no hand-out (the cold create after it answers the 429) */
    s = nb_sandbox_quota_locked(a, spec, &ae) != 0
            ? NULL
            : nb_table_hand_out(&a->table, spec->image, spec->lifecycle & NB_LIFE_E2B_HOME, now,
                                now + spec->ttl);
    if (s != NULL) {
        /* its owner from now on: the key that asked for it */
        snprintf(s->owner, sizeof(s->owner), "%s", spec->key != NULL ? spec->key->name : "");
        snprintf(s->metadata, sizeof(s->metadata), "%s", spec->metadata);
        s->lifecycle = spec->lifecycle;
        *out = *s;
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        nb_metrics_warm(0);
        nb_metrics_warm_take((unsigned)kind, 0, nb_clock_mono_ms()); /* demand: it grows */
        return -1;
    }
    if (nb_agent_ping(out, WARM_PING_MS, &ae) != 0) {
        nb_warn("warm sandbox %s does not answer (%s): destroying it", out->id, ae.msg);
        if (nb_sandbox_destroy(a, out->id, &ae) == 0)
            nb_metrics_destroy(NB_MD_WARM_POOL);
        nb_metrics_warm(0);
        nb_metrics_warm_take((unsigned)kind, 0, nb_clock_mono_ms());
        return -1;
    }
    nb_metrics_warm(1);
    nb_metrics_warm_take((unsigned)kind, 1, nb_clock_mono_ms());
    /* its owner and expiry are the table's only: kept where an adoption finds them */
    nb_adopt_lease_note(a, out->id);
    nb_info("handed out warm sandbox %s", out->id);
    return 0;
}

int nb_warm_evict(struct nb_app *a)
{
    char id[NB_ID_LEN + 1] = "", cid[NB_CID_LEN + 1] = "";
    uint32_t gen = 0;
    struct nb_derr de = {0};

    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        if (nb_table_mark_destroying(&a->table, s, NB_SLOT_POOLED, nb_clock_real_s()) != 0)
            continue;
        snprintf(id, sizeof(id), "%s", s->id);
        snprintf(cid, sizeof(cid), "%s", s->container_id);
        gen = s->generation;
        break;
    }
    nb_table_unlock(&a->table);
    if (id[0] == '\0')
        return -1;
    if (nb_sandbox_finish_destroy(a, id, cid, gen, &de) != 0)
        return -1;
    nb_metrics_destroy(NB_MD_WARM_POOL);
    return 0;
}

unsigned nb_warm_wanted(unsigned warm_pool, uint32_t pooled, uint32_t free_slots)
{
    uint32_t missing, spare;

    if (pooled >= warm_pool || free_slots <= warm_pool)
        return 0;
    missing = warm_pool - pooled;
    spare = free_slots - warm_pool;
    return missing < spare ? missing : spare;
}

/* The pool's prepare hook for a code sandbox: its default python kernel, started now. */
static void warm_kernel(struct nb_app *a, const struct nb_slot *slot)
{
    struct nb_apierr ae;
    int64_t t0 = nb_clock_mono_ms();
    (void)a;
    if (nb_code_warm(slot, WARM_KERNEL_MS, &ae) != 0) {
        /* still a sandbox worth keeping: its first run starts the kernel instead */
        nb_warn("warm sandbox %s: its python kernel did not start (%s); pooled without it",
                slot->id, ae.msg);
        return;
    }
    nb_info("warm sandbox %s: python kernel started in %lld ms", slot->id,
            (long long)(nb_clock_mono_ms() - t0));
}

/* The host's MemAvailable in bytes; UINT64_MAX when /proc/meminfo does not say. */
static uint64_t mem_available(void)
{
    unsigned long long kb = nb_proc_number("/proc/meminfo", "MemAvailable:", ULLONG_MAX);
    return kb == ULLONG_MAX ? UINT64_MAX : (uint64_t)kb * 1024;
}

/*
 * The kinds' sizing state: the reaper's alone (warmsize.h). A kind whose
 * image, layout, floor or ceiling changed starts again at its floor.
 */
static struct nb_warmsize sizes[KINDS_MAX];
static struct warm_kind sized[KINDS_MAX];

static void size_kinds(const struct nb_conf *c, const struct warm_kind *k, unsigned n,
                       const uint32_t *pooled, unsigned *want)
{
    int64_t now = nb_clock_mono_ms(), idle_ms = (int64_t)c->warm_pool_idle * 1000;
    unsigned total = 0;

    for (unsigned i = 0; i < n; i++) {
        struct nb_mwarm m;
        nb_metrics_warm_read(i, &m);
        if (strcmp(sized[i].image, k[i].image) != 0 || sized[i].layout != k[i].layout ||
            sized[i].floor != k[i].floor || sized[i].ceiling != k[i].ceiling) {
            nb_warmsize_init(&sizes[i], k[i].floor, k[i].ceiling, m.misses, now);
            /* a restarted reaper (its sizes lost, the shared target kept) goes on
             * from where the last one left off; a changed kind starts afresh */
            if (!sized[i].image[0] && m.published)
                nb_warmsize_resume(&sizes[i], m.target);
            sized[i] = k[i];
        }
        want[i] = nb_warmsize_step(&sizes[i], m.misses, m.last_take_ms, pooled[i], idle_ms, now);
        total += pooled[i];
    }
    /* the memory budget, and the host's memory above the reserve: the first kinds first */
    nb_warmsize_fit(want, n,
                    nb_warmsize_cap(c->warm_pool_memory, mem_available(), c->warm_pool_reserve,
                                    total, c->memory));
    for (unsigned i = 0; i < n; i++)
        nb_metrics_warm_target(i, want[i]);
}

/*
 * Parallel refill (warm_pool_parallel > 1): each warm sandbox is made by a
 * short-lived child of the reaper, which commits it POOLED through the
 * table and exits, so the reaper's tick never waits on Docker for it. The
 * reaper knows its children by pid (never waitpid(-1): the template
 * builders and others are its children too).
 */
#define KIDS_MAX 16
#define KID_DOCKER_DOWN 2    /* a child's exit status: Docker did not answer */
#define KIND_BACKOFF_MS 1000 /* a kind whose create failed waits this long */
static struct {
    pid_t pid;
    unsigned kind;
} kids[KIDS_MAX];
static unsigned n_kids;
static int64_t kind_retry_at[KINDS_MAX]; /* monotonic ms: no new child for it before */
#define USERS_FIRST_MS 2000              /* the longest users' creates hold a refill back */
static int64_t users_since;              /* monotonic ms: users' creates in flight since */

/* Collect the children that ended; -1 if one found Docker unreachable. */
static int reap_kids(void)
{
    int down = 0;
    for (unsigned i = 0; i < n_kids;) {
        int st = 0;
        pid_t r = waitpid(kids[i].pid, &st, WNOHANG);
        if (r == 0) {
            i++;
            continue;
        }
        if (r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == KID_DOCKER_DOWN)
            down = 1;
        else if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            kind_retry_at[kids[i].kind] = nb_clock_mono_ms() + KIND_BACKOFF_MS;
        kids[i] = kids[--n_kids];
    }
    return down ? -1 : 0;
}

/* The child's end: its Docker connection closed (valgrind sees nothing lost), then status. */
static void __attribute__((noreturn)) kid_exit(struct nb_app *a, int status)
{
    nb_docker_cleanup(&a->docker);
    _exit(status);
}

/* A child making one warm sandbox of spec: 0, or KID_DOCKER_DOWN, or 1. */
static void kid_run(struct nb_app *a, const struct nb_sandbox_spec *spec, pid_t parent)
{
    struct nb_slot slot;
    struct nb_apierr ae;

    /* dies with the reaper: its half-made sandbox is then reconciliation's (owner dead) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        kid_exit(a, 1);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    nb_log_set_role("refill");
    /* this process's own connection, not the reaper's (whose copy is let go here) */
    nb_docker_cleanup(&a->docker);
    if (nb_docker_init(&a->docker, a->conf.docker_socket, a->conf.docker_max_response) != 0)
        _exit(1);
    if (nb_sandbox_make(a, spec, NB_SLOT_POOLED, &slot, &ae) != 0) {
        if (ae.err == NB_E_DOCKER_DOWN)
            kid_exit(a, KID_DOCKER_DOWN);
        nb_warn("could not refill the warm pool (%s): %s", spec->image, ae.msg);
        kid_exit(a, 1);
    }
    kid_exit(a, 0);
}

/*
 * Creates of users in flight: CREATING slots whose live owner is not a
 * refill child. The pool waits for them: Docker serves them first.
 */
static unsigned user_creates(struct nb_app *a)
{
    unsigned n = 0;
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        unsigned k;
        if (s->state != NB_SLOT_CREATING || s->owner_pid <= 0 || s->owner_pid == getpid())
            continue;
        for (k = 0; k < n_kids && kids[k].pid != s->owner_pid; k++)
            ;
        if (k == n_kids && (kill(s->owner_pid, 0) == 0 || errno == EPERM))
            n++;
    }
    nb_table_unlock(&a->table);
    return n;
}

/* The spec of kind k's warm sandboxes: the defaults, in its layout. */
static void kind_spec(const struct nb_conf *c, const struct warm_kind *k,
                      struct nb_sandbox_spec *spec)
{
    memset(spec, 0, sizeof(*spec));
    snprintf(spec->image, sizeof(spec->image), "%.*s", (int)sizeof(spec->image) - 1, k->image);
    spec->memory = c->memory;
    spec->nano_cpus = c->nano_cpus;
    spec->pids = c->pids;
    spec->ttl = c->max_ttl;      /* the label's; a hand-out sets the real expiry in the table */
    spec->lifecycle = k->layout; /* E2B's layout is made at create: mounts, user, home */
    snprintf(spec->metadata, sizeof(spec->metadata), "{}");
    spec->prepare = k->kernel ? warm_kernel : NULL;
}

int nb_warm_refill(struct nb_app *a)
{
    const struct nb_conf *c = &a->conf;
    struct nb_sandbox_spec spec;
    struct warm_kind kinds[KINDS_MAX];
    char extra[NB_ID_LEN + 1] = "", extra_cid[NB_CID_LEN + 1] = "";
    uint32_t pooled[KINDS_MAX] = {0}, kept[KINDS_MAX] = {0}, extra_gen = 0;
    uint32_t free_slots, making[KINDS_MAX] = {0};
    unsigned n_kinds = warm_kinds(c, kinds), want[KINDS_MAX];
    int parallel = c->warm_pool_parallel > 1;
    int64_t t0;
    /* templates of warm_pool_template: ready or not, asked Docker about once a second */
    static int tpl_ready[KINDS_MAX];
    static unsigned calls;

    for (unsigned k = 0; k < n_kinds; k++) {
        if (!kinds[k].tpl[0])
            continue;
        if (calls % 10 == 0) {
            char image[NB_IMAGE_LEN];
            struct nb_apierr ae;
            tpl_ready[k] = nb_template_image(a, kinds[k].tpl, NULL, image, sizeof(image), &ae) == 0;
            if (!tpl_ready[k])
                nb_debug("warm pool of template %s: %s", kinds[k].tpl, ae.msg);
        }
        /* not (yet, or any more) ready: no pool, and what it held is surplus */
        if (!tpl_ready[k])
            kinds[k].floor = kinds[k].ceiling = 0;
    }
    calls++;
    if (reap_kids() != 0)
        return -1; /* the caller waits for Docker */
    for (unsigned i = 0; i < n_kids; i++)
        if (kids[i].kind < n_kinds)
            making[kids[i].kind]++; /* in flight: they count toward the target */

    nb_table_lock(&a->table);
    free_slots = nb_table_count_state(&a->table, NB_SLOT_FREE);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        unsigned k;
        if (s->state != NB_SLOT_POOLED)
            continue;
        k = kind_of(kinds, n_kinds, s->image, s->lifecycle);
        if (k < n_kinds)
            pooled[k]++;
    }
    nb_table_unlock(&a->table);
    size_kinds(c, kinds, n_kinds, pooled, want);

    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        unsigned k;
        if (s->state != NB_SLOT_POOLED)
            continue;
        k = kind_of(kinds, n_kinds, s->image, s->lifecycle);
        if (k == n_kinds || kept[k] >= want[k]) {
            /* more than its pool wants now, or of a kind no pool holds any more: one per pass */
            if (extra[0] == '\0' &&
                nb_table_mark_destroying(&a->table, s, NB_SLOT_POOLED, nb_clock_real_s()) == 0) {
                snprintf(extra, sizeof(extra), "%s", s->id);
                snprintf(extra_cid, sizeof(extra_cid), "%s", s->container_id);
                extra_gen = s->generation;
            }
            continue;
        }
        kept[k]++;
    }
    nb_table_unlock(&a->table);
    if (extra[0] != '\0') {
        struct nb_derr de = {0};
        if (nb_sandbox_finish_destroy(a, extra, extra_cid, extra_gen, &de) == 0) {
            nb_metrics_destroy(NB_MD_WARM_POOL);
            nb_info("removed surplus warm sandbox %s", extra);
        }
    }

    /*
     * Users' creates in flight go first: no new warm sandbox meanwhile, for
     * up to USERS_FIRST_MS at a time (a steady stream of creates the pools
     * cannot serve must not starve them for good).
     */
    t0 = nb_clock_mono_ms();
    if (user_creates(a) > 0) {
        if (users_since == 0)
            users_since = t0;
        if (t0 - users_since < USERS_FIRST_MS)
            return 0;
        users_since = t0; /* one round now, then users first again */
    } else {
        users_since = 0;
    }
    for (unsigned k = 0; k < n_kinds; k++) {
        /* one committed by a child not reaped yet counts twice here: at worst one start late */
        unsigned wanted = nb_warm_wanted(want[k], kept[k] + making[k], free_slots);
        free_slots -= wanted; /* the next pool counts what this one takes as used */
        kind_spec(c, &kinds[k], &spec);
        for (unsigned i = 0; i < wanted && parallel; i++) {
            pid_t parent = getpid(), pid;
            if (n_kids >= c->warm_pool_parallel || n_kids >= KIDS_MAX ||
                nb_clock_mono_ms() < kind_retry_at[k])
                break;
            pid = fork();
            if (pid < 0) {
                nb_warn("warm pool: cannot fork a refill: %s", strerror(errno));
                return 0;
            }
            if (pid == 0)
                kid_run(a, &spec, parent);
            kids[n_kids].pid = pid;
            kids[n_kids].kind = k;
            n_kids++;
        }
        for (unsigned i = 0; i < wanted && !parallel; i++) {
            struct nb_slot slot;
            struct nb_apierr ae;
            if (nb_sandbox_make(a, &spec, NB_SLOT_POOLED, &slot, &ae) != 0) {
                if (ae.err == NB_E_DOCKER_DOWN)
                    return -1; /* the caller waits for Docker: no warning at every pass */
                nb_warn("could not refill the warm pool (%s): %s", kinds[k].image, ae.msg);
                break;
            }
            /* the budget bounds the whole pass; the kernel's start counts too */
            if (nb_clock_mono_ms() - t0 > WARM_REFILL_BUDGET_MS)
                return 0;
        }
    }
    return 0;
}
