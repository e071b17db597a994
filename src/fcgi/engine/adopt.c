/*
 * adopt.c - see adopt.h.
 *
 * Adoption puts each container back into the slot index it was created in
 * (its nanobox.slot label): the slot decides its uid, its per-slot files
 * (passwd, hostname) and, on the bridge network, its address, so no other
 * index would do. It runs before the master starts any worker when Docker
 * answers at start (main.c), else at the reaper's first reconciliation that
 * can list the containers.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adopt.h"
#include "clock.h"
#include "isolation.h"
#include "json.h"
#include "log.h"
#include "ports.h"
#include "snapshot.h"

#define LEASE_MAX 4096

/*
 * A sandbox id's shape (a textual UUID's length and dashes). Ids here are
 * only looked up in the table or compared with a container's label, never
 * used in a path, so the shape is enough (and this file stays below
 * sandbox.c, which writes leases through it).
 */
static int id_shaped(const char *id)
{
    return strlen(id) == NB_ID_LEN && id[8] == '-' && id[13] == '-' && id[18] == '-' &&
           id[23] == '-' && strspn(id, "0123456789abcdef-") == NB_ID_LEN;
}

void nb_adopt_lease_write(const struct nb_conf *c, uint32_t i, const struct nb_slot *s, int64_t now)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8], *slash;
    yajl_gen g = nb_json_gen();
    char *text;
    size_t len;
    int fd, ok;

    yajl_gen_map_open(g);
    nb_json_kv_str(g, "id", s->id);
    nb_json_kv_str(g, "owner", s->owner);
    nb_json_kv_int(g, "expires",
                   s->state == NB_SLOT_PAUSED ? now + s->ttl_left : (long long)s->expires);
    nb_json_kv_int(g, "ttl_left", s->state == NB_SLOT_PAUSED ? s->ttl_left : 0);
    nb_json_kv_int(g, "pause_expires", s->state == NB_SLOT_PAUSED ? s->pause_expires : 0);
    nb_json_kv_int(g, "auto_resume", (s->lifecycle & NB_LIFE_AUTO_RESUME) != 0);
    nb_json_kv_str(g, "on_timeout", s->lifecycle & NB_LIFE_PAUSE_ON_TIMEOUT ? "pause" : "destroy");
    nb_json_kv_str(g, "metadata", s->metadata);
    yajl_gen_map_close(g);
    text = nb_json_gen_take(g);
    len = strlen(text);

    nb_isolation_path(c, "lease", i, path, sizeof(path));
    slash = strrchr(path, '/');
    if (slash != NULL) {
        *slash = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            nb_warn("sandbox %s: mkdir %s: %s", s->id, path, strerror(errno));
        *slash = '/';
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        nb_warn("sandbox %s: cannot write its lease %s (%s): an upgrade that must adopt it "
                "falls back to its labels",
                s->id, path, strerror(errno));
        unlink(tmp);
    }
    free(text);
}

void nb_adopt_lease_note(struct nb_app *a, const char *id)
{
    struct nb_slot copy, *s;
    uint32_t i = 0;
    int found = 0;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && (s->state == NB_SLOT_RUNNING || s->state == NB_SLOT_PAUSED)) {
        copy = *s;
        i = (uint32_t)(s - a->table.slots);
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (found)
        nb_adopt_lease_write(&a->conf, i, &copy, nb_clock_real_s());
}

int nb_adopt_lease_parse(const char *text, size_t len, struct nb_lease *l)
{
    const char *idp[] = {"id", NULL}, *owp[] = {"owner", NULL}, *exp[] = {"expires", NULL};
    const char *tlp[] = {"ttl_left", NULL}, *pep[] = {"pause_expires", NULL};
    const char *arp[] = {"auto_resume", NULL}, *mdp[] = {"metadata", NULL};
    const char *otp[] = {"on_timeout", NULL};
    yajl_val v = NULL, id, ow, ex, tl, pe, ar, md, ot;
    char err[64];
    int rc = -1;

    memset(l, 0, sizeof(*l));
    if (nb_json_parse(text, len, 4, &v, err, sizeof(err)) != 0 || !YAJL_IS_OBJECT(v))
        goto out;
    id = yajl_tree_get(v, idp, yajl_t_string);
    ow = yajl_tree_get(v, owp, yajl_t_string);
    ex = yajl_tree_get(v, exp, yajl_t_number);
    tl = yajl_tree_get(v, tlp, yajl_t_number);
    pe = yajl_tree_get(v, pep, yajl_t_number);
    ar = yajl_tree_get(v, arp, yajl_t_number);
    md = yajl_tree_get(v, mdp, yajl_t_string);
    ot = yajl_tree_get(v, otp, yajl_t_string);
    if (id == NULL || !id_shaped(nb_json_string(id)) || ow == NULL ||
        strlen(nb_json_string(ow)) >= NB_OWNER_LEN || ex == NULL || !YAJL_IS_INTEGER(ex) ||
        YAJL_GET_INTEGER(ex) <= 0 || (md != NULL && strlen(nb_json_string(md)) >= NB_META_LEN))
        goto out;
    snprintf(l->id, sizeof(l->id), "%s", nb_json_string(id));
    snprintf(l->owner, sizeof(l->owner), "%s", nb_json_string(ow));
    l->expires = YAJL_GET_INTEGER(ex);
    l->auto_resume = ar != NULL && YAJL_IS_INTEGER(ar) && YAJL_GET_INTEGER(ar) == 1;
    l->pause_on_timeout = ot != NULL && !strcmp(nb_json_string(ot), "pause");
    snprintf(l->metadata, sizeof(l->metadata), "%s", md != NULL ? nb_json_string(md) : "{}");
    /* a paused one's stopped TTL and its pause's end; 0: not recorded */
    l->ttl_left =
        tl != NULL && YAJL_IS_INTEGER(tl) && YAJL_GET_INTEGER(tl) > 0 ? YAJL_GET_INTEGER(tl) : 0;
    l->pause_expires =
        pe != NULL && YAJL_IS_INTEGER(pe) && YAJL_GET_INTEGER(pe) > 0 ? YAJL_GET_INTEGER(pe) : 0;
    rc = 0;
out:
    yajl_tree_free(v);
    return rc;
}

int nb_adopt_slot(const struct nb_docker_ctr *c, const struct nb_lease *l, pid_t init_pid,
                  uint32_t nslots, unsigned max_pause, int64_t now, struct nb_slot *out,
                  enum nb_slot_state *to, char *why, size_t whylen)
{
    int64_t expires;

    if (!c->running || init_pid <= 0) {
        snprintf(why, whylen, "it is not running");
        return -1;
    }
    if (c->slot < 0) {
        snprintf(why, whylen,
                 "it has no nanobox.slot label (made by a nanobox from before adoption)");
        return -1;
    }
    if (c->slot >= (int64_t)nslots) {
        snprintf(why, whylen, "its slot %lld is beyond max_sandboxes (%u)", (long long)c->slot,
                 nslots);
        return -1;
    }
    if (c->pooled && l == NULL) {
        snprintf(why, whylen, "a warm sandbox never handed out (the pool refills)");
        return -1;
    }
    /* the lease, when it is this sandbox's, is newer than the labels */
    expires = l != NULL ? l->expires : c->expires;
    memset(out, 0, sizeof(*out));
    snprintf(out->id, sizeof(out->id), "%.*s", NB_ID_LEN, c->sandbox);
    snprintf(out->container_id, sizeof(out->container_id), "%s", c->id);
    out->created = c->created > 0 ? c->created : now;
    /* no expiry recorded: it goes at once rather than living forever */
    out->expires = expires > 0 ? expires : now;
    out->init_pid = init_pid;
    out->memory = c->memory;
    out->nano_cpus = c->nano_cpus;
    out->pids = c->pids;
    out->network_bridge = (uint32_t)(c->network_bridge != 0);
    snprintf(out->image, sizeof(out->image), "%s", c->image);
    snprintf(out->metadata, sizeof(out->metadata), "%s",
             l != NULL ? l->metadata : (c->metadata[0] ? c->metadata : "{}"));
    if (l != NULL ? l->auto_resume : c->auto_resume)
        out->lifecycle |= NB_LIFE_AUTO_RESUME;
    if (l != NULL ? l->pause_on_timeout : c->pause_on_timeout)
        out->lifecycle |= NB_LIFE_PAUSE_ON_TIMEOUT;
    if (c->e2b_home) /* its mounts say so for good: the label only */
        out->lifecycle |= NB_LIFE_E2B_HOME;
    if (c->volumes) /* its label names them: a resume and a fork mount them again */
        out->lifecycle |= NB_LIFE_VOLUMES;
    /* no owner known: admin-only (docs/ARCHITECTURE.md, "Adoption") */
    snprintf(out->owner, sizeof(out->owner), "%s", l != NULL ? l->owner : c->owner);
    *to = NB_SLOT_RUNNING;
    if (c->paused) {
        /* as its lease says; without one, its TTL stopped when it paused (the
         * label's expiry ran on meanwhile) and the pause TTL starts afresh */
        *to = NB_SLOT_PAUSED;
        if (l != NULL && l->ttl_left > 0 && l->pause_expires > 0) {
            out->ttl_left = l->ttl_left;
            out->pause_expires = l->pause_expires;
        } else {
            out->ttl_left = out->expires > now ? out->expires - now : 1;
            out->pause_expires = now + (int64_t)max_pause;
        }
    }
    return 0;
}

/* Read a lease file whole; 0 and text NUL-terminated, or -1. */
static int lease_read(const struct nb_conf *c, uint32_t i, char *text, size_t size, size_t *len)
{
    char path[PATH_MAX];
    ssize_t n;
    int fd;

    nb_isolation_path(c, "lease", i, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, text, size - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    *len = (size_t)n;
    return 0;
}

/* The value after flag in a NUL-separated argv, or NULL. */
static const char *arg_after(const char *cmdline, size_t len, const char *flag)
{
    const char *p = cmdline, *end = cmdline + len;

    while (p < end) {
        size_t n = strnlen(p, (size_t)(end - p));
        const char *next = p + n + 1;
        if (n == strlen(flag) && memcmp(p, flag, n) == 0 && next < end &&
            memchr(next, '\0', (size_t)(end - next)) != NULL)
            return next;
        p = next;
    }
    return NULL;
}

static int num_arg(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long n;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    n = strtoll(s, &end, 10);
    if (*end != '\0' || errno != 0 || n < lo || n > hi)
        return -1;
    *out = n;
    return 0;
}

int nb_adopt_fwd_parse(const char *cmdline, size_t len, const char *ports_dir, struct nb_fwd_rec *r)
{
    const char *argv0 = cmdline, *base, *sock, *listen, *colon;
    size_t dl = strlen(ports_dir);
    long long port, hostport, pid, expires;
    char id[NB_ID_LEN + 1];

    memset(r, 0, sizeof(*r));
    if (len == 0 || memchr(cmdline, '\0', len) == NULL)
        return -1;
    base = strrchr(argv0, '/');
    base = base != NULL ? base + 1 : argv0;
    if (strcmp(base, "nanobox-fwd") != 0)
        return -1;
    sock = arg_after(cmdline, len, "--unix");
    listen = arg_after(cmdline, len, "--listen");
    colon = listen != NULL ? strrchr(listen, ':') : NULL;
    if (sock == NULL || colon == NULL ||
        num_arg(arg_after(cmdline, len, "--port"), 1, 65535, &port) != 0 ||
        num_arg(colon + 1, 1, 65535, &hostport) != 0 ||
        num_arg(arg_after(cmdline, len, "--target-pid"), 1, INT_MAX, &pid) != 0 ||
        num_arg(arg_after(cmdline, len, "--expires"), 1, INT64_MAX, &expires) != 0)
        return -1;
    /* <ports_dir>/<id>-<port>.sock, as ports.c names it */
    if (strncmp(sock, ports_dir, dl) != 0 || sock[dl] != '/')
        return -1;
    sock += dl + 1;
    if (strlen(sock) < NB_ID_LEN + 1 || sock[NB_ID_LEN] != '-')
        return -1;
    memcpy(id, sock, NB_ID_LEN);
    id[NB_ID_LEN] = '\0';
    {
        char want[32];
        snprintf(want, sizeof(want), "%lld.sock", port);
        if (strcmp(sock + NB_ID_LEN + 1, want) != 0)
            return -1;
    }
    if (!id_shaped(id))
        return -1;
    snprintf(r->id, sizeof(r->id), "%s", id);
    r->sandboxport = (uint16_t)port;
    r->hostport = (uint16_t)hostport;
    r->target_pid = (pid_t)pid;
    r->expires = (int64_t)expires;
    return 0;
}

/* Record the forwarders still running for the adopted sandboxes' ports. */
static int adopt_forwarders(struct nb_app *a)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int taken = 0;

    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        char path[64], cmd[8192];
        struct nb_fwd_rec r;
        struct nb_slot *s;
        uint64_t start;
        ssize_t n;
        pid_t pid;
        int fd;

        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        pid = (pid_t)atoi(de->d_name);
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        n = read(fd, cmd, sizeof(cmd));
        close(fd);
        if (n <= 0 || nb_adopt_fwd_parse(cmd, (size_t)n, a->conf.ports_dir, &r) != 0)
            continue;
        start = nb_proc_starttime(pid);
        if (start == 0)
            continue;
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, r.id);
        if (s != NULL && s->init_pid == r.target_pid) {
            struct nb_port *free_p = NULL;
            int known = 0;
            for (int j = 0; j < NB_MAX_PORTS; j++) {
                if (s->ports[j].sandboxport == r.sandboxport)
                    known = 1;
                else if (s->ports[j].sandboxport == 0 && free_p == NULL)
                    free_p = &s->ports[j];
            }
            if (!known && free_p != NULL) {
                free_p->hostport = r.hostport;
                free_p->fwd_pid = pid;
                free_p->fwd_start = start;
                free_p->expires = r.expires;
                free_p->sandboxport = r.sandboxport;
                taken++;
            }
        }
        nb_table_unlock(&a->table);
    }
    closedir(d);
    return taken;
}

struct released {
    struct nb_app *a;
    int64_t now;
    int adopted;
};

/*
 * A sandbox paused without its memory has no container: its pause image
 * carries its container's labels (snapshot.c), read as a listed paused
 * container's, and its lease its TTLs. Adopted PAUSED, released.
 */
static void adopt_released(void *arg, const char *sid, const char *image_id, const void *labels)
{
    struct released *r = arg;
    struct nb_app *a = r->a;
    struct nb_docker_ctr c;
    struct nb_lease lease, *lp = NULL;
    enum nb_slot_state to;
    struct nb_slot slot;
    char why[160], text[LEASE_MAX];
    size_t len;
    int known, rc;

    memset(&c, 0, sizeof(c));
    nb_docker_ctr_labels(&c, labels);
    if (!id_shaped(sid) || strcmp(c.sandbox, sid) != 0)
        return; /* not one this nanobox's pause made */
    nb_table_lock(&a->table);
    known = nb_table_find(&a->table, sid) != NULL;
    nb_table_unlock(&a->table);
    if (known)
        return;
    c.running = c.paused = 1; /* as a frozen one: no pid, no container */
    c.id[0] = '\0';
    if (c.slot >= 0 && (uint64_t)c.slot < a->table.nslots &&
        lease_read(&a->conf, (uint32_t)c.slot, text, sizeof(text), &len) == 0 &&
        nb_adopt_lease_parse(text, len, &lease) == 0 && strcmp(lease.id, sid) == 0)
        lp = &lease;
    if (nb_adopt_slot(&c, lp, 1, a->table.nslots, a->conf.max_pause, r->now, &slot, &to, why,
                      sizeof(why)) != 0) {
        nb_warn("adoption: sandbox %s paused without memory (image %.19s) not adopted: %s; "
                "reconciliation removes its image",
                sid, image_id, why);
        return;
    }
    slot.init_pid = 0;
    slot.lifecycle |= NB_LIFE_RELEASED | NB_LIFE_PAUSE_IMAGE;
    nb_table_lock(&a->table);
    rc = nb_table_adopt(&a->table, (uint32_t)c.slot, &slot, NB_SLOT_PAUSED, r->now);
    nb_table_unlock(&a->table);
    if (rc != 0) {
        nb_warn("adoption: sandbox %s: its slot %lld is taken; reconciliation removes its image",
                sid, (long long)c.slot);
        return;
    }
    nb_info("adopted sandbox %s (paused without memory, image %.19s, slot %lld, owner \"%s\")", sid,
            image_id, (long long)c.slot, slot.owner);
    r->adopted++;
}

int nb_adopt_run(struct nb_app *a, const struct nb_docker_ctr *list, size_t n)
{
    int64_t now = nb_clock_real_s();
    int adopted = 0, pending, ports;

    nb_table_lock(&a->table);
    pending = (a->table.hdr->flags & NB_TABLE_ADOPT_PENDING) != 0;
    nb_table_unlock(&a->table);
    if (!pending)
        return 0;
    for (size_t k = 0; k < n; k++) {
        const struct nb_docker_ctr *c = &list[k];
        struct nb_lease lease, *lp = NULL;
        struct nb_derr de = {0};
        enum nb_slot_state to;
        struct nb_slot slot;
        char why[160], text[LEASE_MAX];
        size_t len;
        int running = 0, known, rc;
        pid_t pid = 0;

        if (!id_shaped(c->sandbox))
            continue;
        nb_table_lock(&a->table);
        known = nb_table_find(&a->table, c->sandbox) != NULL;
        nb_table_unlock(&a->table);
        if (known)
            continue;
        if (c->running && nb_docker_inspect(&a->docker, c->id, &running, &pid, &de) != 0) {
            nb_warn("adoption: sandbox %s: cannot inspect container %.12s: %s", c->sandbox, c->id,
                    de.msg);
            continue;
        }
        if (c->slot >= 0 && (uint64_t)c->slot < a->table.nslots &&
            lease_read(&a->conf, (uint32_t)c->slot, text, sizeof(text), &len) == 0 &&
            nb_adopt_lease_parse(text, len, &lease) == 0 && strcmp(lease.id, c->sandbox) == 0)
            lp = &lease;
        if (nb_adopt_slot(c, lp, running ? pid : 0, a->table.nslots, a->conf.max_pause, now, &slot,
                          &to, why, sizeof(why)) != 0) {
            nb_warn("adoption: sandbox %s (container %.12s) not adopted: %s; reconciliation "
                    "removes it",
                    c->sandbox, c->id, why);
            continue;
        }
        nb_table_lock(&a->table);
        rc = nb_table_adopt(&a->table, (uint32_t)c->slot, &slot, to, now);
        nb_table_unlock(&a->table);
        if (rc != 0) {
            nb_warn("adoption: sandbox %s: its slot %lld is taken; reconciliation removes it",
                    c->sandbox, (long long)c->slot);
            continue;
        }
        nb_info("adopted sandbox %s (container %.12s, slot %lld, owner \"%s\"%s, %s, %lld s of "
                "TTL left)",
                slot.id, slot.container_id, (long long)c->slot, slot.owner,
                slot.owner[0] ? "" : ": admin-only", to == NB_SLOT_PAUSED ? "paused" : "running",
                (long long)(slot.expires - now));
        adopted++;
    }
    {
        struct released r = {a, now, 0};
        nb_snapshot_pause_images(a, adopt_released, &r);
        adopted += r.adopted;
    }
    ports = adopt_forwarders(a);
    nb_table_lock(&a->table);
    a->table.hdr->flags &= ~NB_TABLE_ADOPT_PENDING;
    nb_table_unlock(&a->table);
    nb_info("adoption after a fresh state table: %d sandboxes and %d open ports adopted from "
            "Docker",
            adopted, ports);
    return adopted;
}
