/*
 * reaper.c - see reaper.h.
 *
 * The reaper is a child of the master rather than part of it so that slow
 * Docker calls (removing a container can take a second) never delay the
 * master's supervision of the workers.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "adopt.h"
#include "clock.h"
#include "diskcap.h"
#include "history.h"
#include "rootdisk.h"
#include "log.h"
#include "metrics.h"
#include "network.h"
#include "ports.h"
#include "reaper.h"
#include "sandbox.h"
#include "snapshot.h"
#include "templates.h"
#include "usage.h"
#include "warm.h"

#define REAPER_SUBTICKS 10                            /* subticks a pass (~1 s) */
#define REAPER_SUBTICK_US (1000000 / REAPER_SUBTICKS) /* the wait after each */
#define RECONCILE_EVERY 30                            /* passes between reconciliations */

static volatile sig_atomic_t reaper_stop;

/* The last reconciliation could not list the containers (Docker away). */
static int reconcile_failing;

static void reaper_on_term(int sig)
{
    (void)sig;
    reaper_stop = 1;
}

struct doomed {
    char id[NB_ID_LEN + 1];
    char cid[NB_CID_LEN + 1];
    uint32_t gen;
    enum nb_mdestroy cause; /* what GET /metrics counts it as */
    int cold;               /* a pause at its timeout releases its memory */
};

/* Remove the containers of slots already marked DESTROYING by us. */
static void destroy_marked(struct nb_app *a, struct doomed *list, size_t n, const char *why)
{
    for (size_t i = 0; i < n; i++) {
        struct nb_derr de = {0};
        if (nb_sandbox_finish_destroy(a, list[i].id, list[i].cid, list[i].gen, &de) == 0) {
            nb_metrics_destroy(list[i].cause);
            nb_info("%s sandbox %s", why, list[i].id);
        } else {
            /* leave it DESTROYING: once stuck, reconciliation retries */
            nb_warn("could not remove %s sandbox %s: %s", why, list[i].id, de.msg);
        }
    }
}

int nb_reaper_expired(const struct nb_slot *s, int64_t now)
{
    /* POOLED slots carry no user's expiry: a hand-out sets it; a PAUSED
     * one's TTL is stopped, its pause TTL runs */
    return (s->state == NB_SLOT_RUNNING && s->expires <= now) ||
           (s->state == NB_SLOT_PAUSED && s->pause_expires <= now);
}

/*
 * At its TTL's end, a sandbox created with on_timeout "pause" is paused
 * instead, as POST .../pause does it (which gives a spent TTL default_ttl
 * for the resume). One Docker cannot pause is destroyed as an expired one
 * is, if it is still that sandbox, running and expired.
 */
static void pause_at_timeout(struct nb_app *a, struct doomed *list, size_t n)
{
    struct doomed *failed = nb_xcalloc(n ? n : 1, sizeof(*failed));
    size_t nfailed = 0;

    for (size_t i = 0; i < n; i++) {
        struct nb_apierr ae = {0};
        struct nb_slot *s;
        if (nb_sandbox_pause_how(a, list[i].id, !list[i].cold, NULL, &ae) == 0 ||
            ae.err == NB_E_NOT_FOUND)
            continue; /* paused, or gone meanwhile */
        nb_warn("sandbox %s: cannot pause it at its timeout (%s): destroying it", list[i].id,
                ae.msg);
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, list[i].id);
        if (s != NULL && s->generation == list[i].gen && s->expires <= nb_clock_real_s() &&
            nb_table_mark_destroying(&a->table, s, NB_SLOT_RUNNING, nb_clock_real_s()) == 0)
            failed[nfailed++] = list[i];
        nb_table_unlock(&a->table);
    }
    destroy_marked(a, failed, nfailed, "expired");
    free(failed);
}

void nb_reaper_expire(struct nb_app *a)
{
    struct doomed *list, *pause;
    size_t n = 0, npause = 0;
    int64_t now = nb_clock_real_s();

    list = nb_xcalloc(a->table.nslots, sizeof(*list));
    pause = nb_xcalloc(a->table.nslots, sizeof(*pause));
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        enum nb_mdestroy cause = s->state == NB_SLOT_PAUSED ? NB_MD_PAUSE_EXPIRED : NB_MD_EXPIRED;
        struct doomed *d;
        if (!nb_reaper_expired(s, now))
            continue;
        if (s->state == NB_SLOT_PAUSED && (s->lifecycle & NB_LIFE_BUSY))
            continue; /* its pause or resume ends first */
        if (s->state == NB_SLOT_RUNNING && (s->lifecycle & NB_LIFE_PAUSE_ON_TIMEOUT)) {
            d = &pause[npause++];
            d->cold = (s->lifecycle & NB_LIFE_PAUSE_COLD) != 0;
        } else if (nb_table_mark_destroying(&a->table, s, (enum nb_slot_state)s->state, now) == 0)
            d = &list[n++];
        else
            continue;
        d->cause = cause;
        snprintf(d->id, sizeof(d->id), "%s", s->id);
        snprintf(d->cid, sizeof(d->cid), "%s", s->container_id);
        d->gen = s->generation;
    }
    nb_table_unlock(&a->table);
    destroy_marked(a, list, n, "expired");
    pause_at_timeout(a, pause, npause);
    free(list);
    free(pause);
}

int nb_reaper_idle(const struct nb_slot *s, int64_t now)
{
    int64_t since = s->last_active > s->state_since ? s->last_active : s->state_since;
    return s->state == NB_SLOT_RUNNING && s->idle_pause > 0 && now - since >= s->idle_pause;
}

void nb_reaper_idle_pause(struct nb_app *a)
{
    char ids[NB_REAPER_IDLE_BATCH][NB_ID_LEN + 1];
    size_t n = 0;
    int64_t now = nb_clock_real_s();

    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots && n < NB_REAPER_IDLE_BATCH; i++)
        if (nb_reaper_idle(&a->table.slots[i], now))
            snprintf(ids[n++], sizeof(ids[0]), "%s", a->table.slots[i].id);
    nb_table_unlock(&a->table);
    for (size_t i = 0; i < n; i++) {
        struct nb_apierr ae = {0};
        if (nb_sandbox_pause_how(a, ids[i], 0, NULL, &ae) == 0) {
            nb_info("sandbox %s: idle, paused without its memory", ids[i]);
            continue;
        }
        /* it keeps running; its idle clock starts again so it is not retried at every pass */
        nb_warn("sandbox %s: idle, but cannot pause it: %s", ids[i], ae.msg);
        nb_sandbox_touch(a, ids[i]);
    }
}

/*
 * The writable layer of a root sandbox, in bytes: the overlay2 upper
 * directory walked (st_blocks), else Docker's SizeRw (a driver with no
 * upper directory, or one this process may not read). -1: not known.
 */
static int64_t root_layer_bytes(struct nb_app *a, const char *cid, uint64_t cap)
{
    char upper[4096];
    int64_t size_rw = -1, bytes = -1;
    struct nb_derr de = {0};
    if (nb_docker_rw_layer(&a->docker, cid, 0, upper, sizeof(upper), &size_rw, &de) != 0)
        return -1;
    if (upper[0] && nb_rootdisk_bounded(upper))
        return 0; /* on a file system of root_disk_max bytes: it cannot pass them */
    if (upper[0])
        bytes = nb_diskcap_walk(upper, cap);
    if (bytes < 0 &&
        nb_docker_rw_layer(&a->docker, cid, 1, upper, sizeof(upper), &size_rw, &de) == 0)
        bytes = size_rw;
    return bytes;
}

int nb_reaper_root_disk(struct nb_app *a)
{
    struct doomed *list, *over;
    size_t n = 0, nover = 0;
    uint64_t cap = a->conf.root_disk_max;
    int64_t now;

    if (cap == 0 || a->conf.root_templates[0] == '\0')
        return 0;
    /* RUNNING sandboxes with a root; a paused one cannot write, a warm one
     * has had no user yet, and no other sandbox is ever inspected */
    list = nb_xcalloc(a->table.nslots, sizeof(*list));
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        if (s->state != NB_SLOT_RUNNING || s->container_id[0] == '\0' ||
            !nb_template_root(&a->conf, s->image))
            continue;
        snprintf(list[n].id, sizeof(list[n].id), "%s", s->id);
        snprintf(list[n].cid, sizeof(list[n].cid), "%s", s->container_id);
        list[n].gen = s->generation;
        n++;
    }
    nb_table_unlock(&a->table);

    over = nb_xcalloc(n ? n : 1, sizeof(*over));
    for (size_t i = 0; i < n; i++) {
        int64_t t0 = nb_clock_mono_ms(), bytes = root_layer_bytes(a, list[i].cid, cap);
        struct nb_slot *s;
        nb_debug("sandbox %s: writable layer %lld bytes (measured in %lld ms)", list[i].id,
                 (long long)bytes, (long long)(nb_clock_mono_ms() - t0));
        if (bytes < 0 || (uint64_t)bytes <= cap)
            continue;
        /* still the sandbox measured, still running: marked as an expired one is */
        now = nb_clock_real_s();
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, list[i].id);
        if (s && s->generation == list[i].gen && !strcmp(s->container_id, list[i].cid) &&
            nb_table_mark_destroying(&a->table, s, NB_SLOT_RUNNING, now) == 0) {
            over[nover] = list[i];
            over[nover].cause = NB_MD_ROOT_DISK;
            nover++;
            nb_warn(
                "sandbox %s: its root wrote at least %lld bytes into the image, over root_disk_max "
                "(%llu); destroying it",
                list[i].id, (long long)bytes, (unsigned long long)cap);
        }
        nb_table_unlock(&a->table);
    }
    destroy_marked(a, over, nover, "over root_disk_max, removed");
    free(over);
    free(list);
    return (int)nover;
}

/* A live slot (one a reconciliation judges) of sandbox id with container cid. */
static struct nb_slot *live_slot_of(struct nb_app *a, const char *id, const char *cid)
{
    struct nb_slot *s = nb_table_find(&a->table, id);
    if (s == NULL || strcmp(s->container_id, cid) != 0)
        return NULL;
    if (s->state != NB_SLOT_RUNNING && s->state != NB_SLOT_PAUSED && s->state != NB_SLOT_POOLED)
        return NULL;
    return s;
}

int nb_reaper_container_event(struct nb_app *a, const char *id, const char *cid, int gone)
{
    struct doomed d;
    struct nb_slot *s;
    int found, running = 0;
    pid_t pid = 0;
    uint32_t gen = 0;

    if (id[0] == '\0' || cid[0] == '\0')
        return 0;
    nb_table_lock(&a->table);
    s = live_slot_of(a, id, cid);
    found = s != NULL;
    if (s)
        gen = s->generation;
    nb_table_unlock(&a->table);
    if (!found)
        return 0; /* not a sandbox of ours, or already going (a destroy's own die) */
    if (!gone) {
        struct nb_derr de = {0};
        if (nb_docker_inspect(&a->docker, cid, &running, &pid, &de) != 0 &&
            !(de.kind == NB_DERR_HTTP && de.status == 404))
            return -1;
        if (running)
            return 0;
    }
    memset(&d, 0, sizeof(d));
    nb_table_lock(&a->table);
    s = live_slot_of(a, id, cid);
    found = s != NULL && s->generation == gen &&
            nb_table_mark_destroying(&a->table, s, (enum nb_slot_state)s->state,
                                     nb_clock_real_s()) == 0;
    if (found) {
        snprintf(d.id, sizeof(d.id), "%s", s->id);
        snprintf(d.cid, sizeof(d.cid), "%s", s->container_id);
        d.gen = s->generation;
        d.cause = gone ? NB_MD_VANISHED : NB_MD_STOPPED;
    }
    nb_table_unlock(&a->table);
    if (!found)
        return 0;
    nb_warn("sandbox %s: its container %s (Docker event); destroying it", id,
            gone ? "was removed" : "died");
    destroy_marked(a, &d, 1, gone ? "cleaned up vanished" : "removed dead");
    return 1;
}

struct seen {
    struct nb_docker_ctr *ctr;
    size_t n, alloc;
};

static void seen_add(void *arg, const struct nb_docker_ctr *c)
{
    struct seen *s = arg;
    if (s->n == s->alloc) {
        s->alloc = s->alloc ? s->alloc * 2 : 64;
        s->ctr = nb_xrealloc(s->ctr, s->alloc * sizeof(*s->ctr));
    }
    s->ctr[s->n++] = *c;
}

static int owner_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int nb_reaper_orphan(const struct nb_docker_ctr *c, const struct nb_slot *s)
{
    /* a CREATING slot has no container id yet: it protects its sandbox id's container; so
     * does a paused one while its memory is released or brought back (BUSY), not after */
    if (s != NULL && s->state == NB_SLOT_PAUSED &&
        (s->lifecycle & (NB_LIFE_RELEASED | NB_LIFE_BUSY)) == NB_LIFE_RELEASED)
        return 1;
    return s == NULL || (s->container_id[0] && strcmp(s->container_id, c->id) != 0);
}

enum nb_reconcile nb_reaper_judge(const struct nb_slot *s, const struct nb_docker_ctr *ctr,
                                  int owner_alive, int64_t listed_at)
{
    switch ((enum nb_slot_state)s->state) {
    case NB_SLOT_RUNNING:
    case NB_SLOT_POOLED:
    case NB_SLOT_PAUSED: /* a paused container counts as up: it stays paused */
        /* paused without its memory: it has no container, its files are in its pause image */
        if (s->state == NB_SLOT_PAUSED && (s->lifecycle & (NB_LIFE_RELEASED | NB_LIFE_BUSY)))
            return NB_RECONCILE_KEEP;
        if (s->state_since >= listed_at)
            return NB_RECONCILE_KEEP; /* became RUNNING after the listing: not judged on it */
        if (ctr == NULL)
            return NB_RECONCILE_FREE;
        return ctr->running ? NB_RECONCILE_KEEP : NB_RECONCILE_DESTROY;
    case NB_SLOT_CREATING:
    case NB_SLOT_DESTROYING:
        if (!owner_alive || listed_at - s->state_since > NB_REAPER_STUCK_SECONDS)
            return NB_RECONCILE_FINISH;
        return NB_RECONCILE_KEEP;
    case NB_SLOT_FREE:
    default:
        return NB_RECONCILE_KEEP;
    }
}

int nb_reaper_owner_from_label(struct nb_slot *s, const struct nb_docker_ctr *ctr)
{
    if (ctr == NULL || s->owner[0] != '\0' || ctr->owner[0] == '\0' ||
        strlen(ctr->owner) >= NB_OWNER_LEN ||
        (s->state != NB_SLOT_RUNNING && s->state != NB_SLOT_PAUSED))
        return 0;
    snprintf(s->owner, sizeof(s->owner), "%s", ctr->owner);
    return 1;
}

/* The listed container of slot s (by id), or NULL. */
static const struct nb_docker_ctr *seen_find(const struct seen *seen, const struct nb_slot *s)
{
    if (s->container_id[0] == '\0')
        return NULL;
    for (size_t j = 0; j < seen->n; j++)
        if (strcmp(seen->ctr[j].id, s->container_id) == 0)
            return &seen->ctr[j];
    return NULL;
}

int nb_reaper_reconcile(struct nb_app *a)
{
    struct seen seen = {NULL, 0, 0};
    struct nb_derr de = {0};
    struct doomed *list;
    size_t n = 0;
    int64_t listed_at = nb_clock_real_s();
    int removed = 0, bridge = a->conf.allow_bridge, was_failing = reconcile_failing;

    if (nb_docker_list(&a->docker, a->conf.instance, seen_add, &seen, &de) < 0) {
        /* once, not at every retry while dockerd is away */
        if (!reconcile_failing)
            nb_warn("reconciliation skipped: %s; every sandbox is kept as it is until "
                    "Docker answers",
                    de.msg);
        reconcile_failing = 1;
        free(seen.ctr);
        return -1;
    }
    reconcile_failing = 0;

    /* a table made afresh (an upgrade, a lost file): the running sandboxes are
     * adopted before anything below could call them orphans (adopt.h) */
    nb_adopt_run(a, seen.ctr, seen.n);

    /* containers with no slot (or a slot of another container) are orphans */
    for (size_t i = 0; i < seen.n; i++) {
        struct nb_slot *s;
        int orphan;
        nb_table_lock(&a->table);
        s = seen.ctr[i].sandbox[0] ? nb_table_find(&a->table, seen.ctr[i].sandbox) : NULL;
        orphan = nb_reaper_orphan(&seen.ctr[i], s);
        nb_table_unlock(&a->table);
        if (!orphan)
            continue;
        if (nb_rootdisk_remove(a, seen.ctr[i].id, nb_rootdisk_wanted(&a->conf, seen.ctr[i].image),
                               &de) == 0) {
            nb_info("removed orphan container %.12s (sandbox label \"%s\")", seen.ctr[i].id,
                    seen.ctr[i].sandbox);
            removed++;
        } else {
            nb_warn("could not remove orphan container %.12s: %s", seen.ctr[i].id, de.msg);
        }
    }

    /* slots whose container is gone or dead, and slots abandoned mid-change */
    list = nb_xcalloc(a->table.nslots, sizeof(*list));
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        const struct nb_docker_ctr *ctr;
        int marked = 0;
        if (s->state == NB_SLOT_FREE)
            continue;
        bridge |= s->network_bridge != 0;
        ctr = seen_find(&seen, s);
        switch (nb_reaper_judge(s, ctr, owner_alive(s->owner_pid), listed_at)) {
        case NB_RECONCILE_KEEP:
            if (nb_reaper_owner_from_label(s, ctr))
                nb_info("sandbox %s: owner \"%s\" read back from its container's label", s->id,
                        s->owner);
            break;
        case NB_RECONCILE_FREE:
            nb_warn("sandbox %s: its container is gone; freeing the slot", s->id);
            nb_history_clear(nb_history, (uint32_t)(s - a->table.slots));
            nb_table_release(&a->table, s);
            nb_metrics_destroy(NB_MD_VANISHED);
            break;
        case NB_RECONCILE_DESTROY:
            nb_warn("sandbox %s: its container stopped; destroying it", s->id);
            marked = nb_table_mark_destroying(&a->table, s, (enum nb_slot_state)s->state,
                                              listed_at) == 0;
            list[n].cause = NB_MD_STOPPED;
            break;
        case NB_RECONCILE_FINISH:
            nb_warn("sandbox %s: abandoned while %s; finishing the job", s->id,
                    s->state == NB_SLOT_CREATING ? "creating" : "destroying");
            marked = nb_table_take_over(&a->table, s, listed_at) == 0;
            list[n].cause = NB_MD_ABANDONED;
            break;
        }
        if (marked) {
            snprintf(list[n].id, sizeof(list[n].id), "%s", s->id);
            snprintf(list[n].cid, sizeof(list[n].cid), "%s", s->container_id);
            list[n].gen = s->generation;
            n++;
        }
    }
    nb_table_unlock(&a->table);
    destroy_marked(a, list, n, "reconciled");
    free(list);
    /* the /dev/pts volumes of containers removed without theirs */
    int swept_volumes = nb_docker_volume_sweep(&a->docker, a->conf.instance, &de);
    if (swept_volumes > 0) {
        nb_info("removed %d unused volume(s) of sandboxes", swept_volumes);
        removed += swept_volumes;
    } else if (swept_volumes < 0) {
        nb_warn("could not sweep unused volumes: %s", de.msg);
    }
    /* after the slots: the pause images no released sandbox uses any more */
    nb_snapshot_sweep(a);
    if (was_failing)
        nb_info("Docker answers again: reconciled, %zu containers listed, %zu sandboxes "
                "finished or destroyed, %d orphans removed",
                seen.n, n, removed);
    free(seen.ctr);
    if (bridge) {
        /* the base rules re-checked (a dockerd restart may have moved them), then
         * every sandbox chain whose sandbox left by any path is removed */
        struct nb_apierr ae;
        if (nb_network_ensure(a, &ae) != 0)
            nb_warn("bridge network: %s", ae.msg);
        int swept = nb_network_reconcile(a);
        if (swept > 0)
            removed += swept;
    }
    nb_metrics_reconciled(nb_clock_real_s()); /* done: operators and tests can tell */
    return removed + (int)n;
}

/* ---- the loop: a table of jobs ---- */

/*
 * Docker's state, at every pass: a ping (its going away is noticed at
 * once), or a reconciliation on the first pass, the third (slots that
 * turned RUNNING in the second of a listing are not judged on it; a second
 * pass just after start-up settles those quickly), every RECONCILE_EVERY
 * passes, and every pass while Docker is away (a restart of dockerd), so
 * that what still runs is adopted as soon as it answers.
 */
static void job_docker(struct nb_reaper *r)
{
    unsigned pass = r->tick / REAPER_SUBTICKS;
    int due = pass % RECONCILE_EVERY == 0 || pass == 2;
    if (!due && !r->docker_away) {
        struct nb_derr de = {0};
        r->docker_away = nb_docker_ping(&r->a->docker, &de) != 0;
    }
    if (due || r->docker_away)
        r->docker_away = nb_reaper_reconcile(r->a) < 0;
}

static void job_expire(struct nb_reaper *r)
{
    nb_reaper_expire(r->a);
    nb_reaper_idle_pause(r->a);
}

static void job_root_disk(struct nb_reaper *r)
{
    nb_reaper_root_disk(r->a);
}

/* each sandbox's usage history (usage.h): a sample every metrics_interval seconds */
static void job_usage(struct nb_reaper *r)
{
    nb_usage_sample(r->a);
}

static void job_ports(struct nb_reaper *r)
{
    nb_ports_reap(r->a);
}

/* a hand-out is refilled within a subtick (~0.1 s), not a second */
static void job_warm(struct nb_reaper *r)
{
    if (nb_warm_refill(r->a) < 0) {
        nb_warn("warm pool: Docker does not answer; refills wait until it does");
        r->docker_away = 1;
    }
}

/* template builds: a queued one starts at once (the queue's descriptor wakes the reaper) */
static void job_templates(struct nb_reaper *r)
{
    nb_templates_pump(r->a);
}

static int job_may_run(const struct nb_reaper *r, const struct nb_reaper_job *j)
{
    return !(j->needs_docker && r->docker_away);
}

void nb_reaper_subtick(struct nb_reaper *r)
{
    for (size_t i = 0; i < r->njobs; i++) {
        const struct nb_reaper_job *j = &r->jobs[i];
        if (j->every > 0 && r->tick % j->every == 0 && job_may_run(r, j))
            j->run(r);
    }
    r->tick++;
}

void nb_reaper_wait(struct nb_reaper *r, unsigned usec)
{
    struct pollfd pfd[NB_REAPER_JOBS_MAX];
    size_t job_of[NB_REAPER_JOBS_MAX], n = 0;
    int64_t end = nb_clock_mono_ms() + usec / 1000;

    for (size_t i = 0; i < r->njobs && n < NB_REAPER_JOBS_MAX; i++) {
        if (r->jobs[i].wake_fd < 0)
            continue;
        pfd[n].fd = r->jobs[i].wake_fd;
        pfd[n].events = POLLIN;
        job_of[n++] = i;
    }
    while (!reaper_stop) {
        int64_t left = end - nb_clock_mono_ms();
        int rc;
        if (left <= 0)
            break;
        rc = poll(pfd, (nfds_t)n, (int)left);
        if (rc < 0 && errno != EINTR) {
            usleep((useconds_t)left * 1000); /* cannot poll: a plain sleep */
            break;
        }
        for (size_t k = 0; rc > 0 && k < n; k++) {
            const struct nb_reaper_job *j = &r->jobs[job_of[k]];
            char buf[4096];
            if (pfd[k].revents & (POLLERR | POLLHUP | POLLNVAL)) {
                pfd[k].fd = -1; /* broken: not a wake source for the rest of this wait */
                continue;
            }
            if (!(pfd[k].revents & POLLIN))
                continue;
            while (read(pfd[k].fd, buf, sizeof(buf)) > 0)
                ; /* read empty: one run serves every event so far */
            if (job_may_run(r, j))
                j->run(r);
        }
    }
}

void nb_reaper_run(struct nb_app *a)
{
    struct sigaction sa;
    /* in the order a subtick runs them; "every" in subticks */
    struct nb_reaper_job jobs[] = {
        {"docker", REAPER_SUBTICKS, 0, job_docker, -1},
        {"expire", REAPER_SUBTICKS, 0, job_expire, -1},
        {"root disk", REAPER_SUBTICKS * a->conf.root_disk_check, 1, job_root_disk, -1},
        {"ports", REAPER_SUBTICKS, 0, job_ports, -1},
        {"usage", REAPER_SUBTICKS * a->conf.metrics_interval, 0, job_usage, -1},
        /* not while Docker is away: a failed create at every subtick */
        {"warm refill", 1, 1, job_warm, -1},
        {"templates", 1, 1, job_templates, nb_templates_queue_fd(&a->conf)},
    };
    struct nb_reaper r = {a, 0, 0, jobs, sizeof(jobs) / sizeof(jobs[0])};

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = reaper_on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    nb_log_set_role("reaper");
    prctl(PR_SET_NAME, "nanobox-reaper"); /* ps and top name it */
    while (!reaper_stop) {
        nb_reaper_subtick(&r);
        nb_reaper_wait(&r, REAPER_SUBTICK_US);
    }
    nb_docker_cleanup(&a->docker);
    _exit(0);
}
