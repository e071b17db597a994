/*
 * mcp_sessions.c - see mcp_sessions.h.
 *
 * The file is a header and NB_MCP_SESSIONS slots. A file that does not
 * look like one (new, empty, another layout) is reset to all free slots
 * under the lock: losing sessions only makes their clients initialize again
 * (they get 404), so nothing here is worth more care than that.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "log.h"
#include "mcp_sessions.h"
#include "sandbox.h"

#define STORE_MAGIC "NBMCPSS" /* with its NUL: 8 bytes */
#define STORE_VERSION 3       /* 2: the cancelled calls; 3: the owner key */

struct store_slot {
    char id[NB_MCP_SESSION_ID_LEN + 1]; /* "" when free */
    char version[NB_MCP_VERSION_LEN];   /* negotiated protocol version */
    int64_t created;                    /* unix seconds */
    int64_t last_used;                  /* unix seconds */
    char owner[NB_OWNER_LEN + 8];       /* the name of the key that opened it */
};

/* A notifications/cancelled, kept until the worker running that call sees it. */
struct cancel_slot {
    char sid[NB_MCP_SESSION_ID_LEN + 1]; /* "" when free */
    char req[NB_MCP_REQUEST_ID_LEN + 1]; /* the request's id as JSON text */
    int64_t at;                          /* unix seconds */
};

struct store_file {
    char magic[8];
    uint32_t version;
    uint32_t slot_size; /* sizeof(struct store_slot) when written */
    uint32_t nslots;
    uint32_t reserved;
    struct store_slot slots[NB_MCP_SESSIONS];
    struct cancel_slot cancels[NB_MCP_CANCELS];
};

/* This process's view of the file: opened on first use, kept until exit. */
static struct {
    pid_t pid; /* who opened it: a forked child must open its own */
    int fd;
    struct store_file *map;
} store = {0, -1, NULL};

static int store_flock(int fd, int op)
{
    int rc;
    do
        rc = flock(fd, op);
    while (rc == -1 && errno == EINTR);
    return rc;
}

static void store_fail(struct nb_apierr *ae, const char *path, const char *what)
{
    int err = errno;

    nb_error("MCP sessions file %s: %s: %s", path, what, strerror(err));
    nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot keep MCP sessions (%s %s: %s)", what, path,
                  strerror(err));
}

static int store_valid(const struct store_file *f)
{
    return !memcmp(f->magic, STORE_MAGIC, sizeof(f->magic)) && f->version == STORE_VERSION &&
           f->slot_size == sizeof(struct store_slot) && f->nslots == NB_MCP_SESSIONS;
}

static void store_close(void)
{
    munmap(store.map, sizeof(*store.map));
    store.map = NULL;
    close(store.fd);
    store.fd = -1;
}

/* Open and map the file, making it valid if it is not (under the lock). */
static int store_open(const struct nb_conf *c, struct nb_apierr *ae)
{
    char path[sizeof(c->state_file) + 8];
    struct stat st;
    void *p;
    int fd;

    if (store.map != NULL && store.pid == getpid())
        return 0;
    if (store.map != NULL) /* inherited over fork: our own descriptor, or no lock */
        store_close();
    snprintf(path, sizeof(path), "%s.mcp", c->state_file);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd == -1) {
        store_fail(ae, path, "open");
        return -1;
    }
    if (store_flock(fd, LOCK_EX) == -1) {
        store_fail(ae, path, "flock");
        close(fd);
        return -1;
    }
    if (fstat(fd, &st) == -1) {
        store_fail(ae, path, "fstat");
        goto fail;
    }
    if ((size_t)st.st_size != sizeof(struct store_file) &&
        (ftruncate(fd, 0) == -1 || ftruncate(fd, sizeof(struct store_file)) == -1)) {
        store_fail(ae, path, "ftruncate");
        goto fail;
    }
    p = mmap(NULL, sizeof(struct store_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        store_fail(ae, path, "mmap");
        goto fail;
    }
    store.map = p;
    if (!store_valid(store.map)) {
        memset(store.map, 0, sizeof(*store.map));
        memcpy(store.map->magic, STORE_MAGIC, sizeof(store.map->magic));
        store.map->version = STORE_VERSION;
        store.map->slot_size = sizeof(struct store_slot);
        store.map->nslots = NB_MCP_SESSIONS;
    }
    store_flock(fd, LOCK_UN);
    store.fd = fd;
    store.pid = getpid();
    return 0;
fail:
    store_flock(fd, LOCK_UN);
    close(fd);
    return -1;
}

/* The file, mapped and locked; store_unlock when done. */
static struct store_file *store_lock(const struct nb_conf *c, struct nb_apierr *ae)
{
    struct stat st;

    for (int tries = 0; tries < 2; tries++) {
        if (store_open(c, ae) != 0)
            return NULL;
        if (store_flock(store.fd, LOCK_EX) == -1) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot lock the MCP sessions file: %s",
                          strerror(errno));
            return NULL;
        }
        /* removed under us (an operator's rm): follow the file the others will open */
        if (fstat(store.fd, &st) == 0 && st.st_nlink == 0) {
            store_flock(store.fd, LOCK_UN);
            store_close();
            continue;
        }
        return store.map;
    }
    nb_apierr_set(ae, NB_E_INTERNAL, "internal", "the MCP sessions file keeps disappearing");
    return NULL;
}

static void store_unlock(void)
{
    store_flock(store.fd, LOCK_UN);
}

static int expired(const struct store_slot *s, int64_t now)
{
    return now - s->last_used > NB_MCP_SESSION_IDLE;
}

/* The live slot of id opened by owner, or NULL; an expired one is freed on the way. */
static struct store_slot *slot_find(struct store_file *f, const char *id, const char *owner,
                                    int64_t now)
{
    if (strlen(id) != NB_MCP_SESSION_ID_LEN)
        return NULL;
    for (size_t i = 0; i < NB_MCP_SESSIONS; i++) {
        struct store_slot *s = &f->slots[i];
        if (strcmp(s->id, id) != 0)
            continue;
        if (strcmp(s->owner, owner) != 0)
            return NULL; /* another key's session is no session */
        if (expired(s, now)) {
            memset(s, 0, sizeof(*s));
            return NULL;
        }
        return s;
    }
    return NULL;
}

int nb_mcp_session_new(const struct nb_conf *c, const char *tag, const char *owner,
                       const char *version, char id[NB_MCP_SESSION_ID_LEN + 1],
                       struct nb_apierr *ae)
{
    struct store_file *f = store_lock(c, ae);
    struct store_slot *pick = NULL;
    int64_t now = nb_clock_real_s();

    if (f == NULL)
        return -1;
    for (size_t i = 0; i < NB_MCP_SESSIONS; i++) {
        struct store_slot *s = &f->slots[i];
        if (s->id[0] == '\0' || expired(s, now)) {
            pick = s;
            break;
        }
        if (pick == NULL || s->last_used < pick->last_used)
            pick = s;
    }
    if (pick->id[0] != '\0' && !expired(pick, now))
        nb_info("MCP session %s evicted (idle %llds): %d sessions are open", pick->id,
                (long long)(now - pick->last_used), NB_MCP_SESSIONS);
    nb_cluster_new_id(tag, id);
    memset(pick, 0, sizeof(*pick));
    memcpy(pick->id, id, NB_MCP_SESSION_ID_LEN + 1);
    snprintf(pick->version, sizeof(pick->version), "%s", version);
    snprintf(pick->owner, sizeof(pick->owner), "%s", owner);
    pick->created = pick->last_used = now;
    store_unlock();
    return 0;
}

int nb_mcp_session_find(const struct nb_conf *c, const char *owner, const char *id, char *version,
                        size_t vlen, struct nb_apierr *ae)
{
    struct store_file *f = store_lock(c, ae);
    struct store_slot *s;
    int64_t now = nb_clock_real_s();

    if (f == NULL)
        return -1;
    s = slot_find(f, id, owner, now);
    if (s != NULL) {
        s->last_used = now;
        snprintf(version, vlen, "%s", s->version);
    }
    store_unlock();
    return s != NULL;
}

int nb_mcp_session_end(const struct nb_conf *c, const char *owner, const char *id,
                       struct nb_apierr *ae)
{
    struct store_file *f = store_lock(c, ae);
    struct store_slot *s;

    if (f == NULL)
        return -1;
    s = slot_find(f, id, owner, nb_clock_real_s());
    if (s != NULL)
        memset(s, 0, sizeof(*s));
    store_unlock();
    return s != NULL;
}

int nb_mcp_cancel_add(const struct nb_conf *c, const char *sid, const char *req,
                      struct nb_apierr *ae)
{
    struct store_file *f;
    struct cancel_slot *pick = NULL;

    if (strlen(sid) != NB_MCP_SESSION_ID_LEN || strlen(req) > NB_MCP_REQUEST_ID_LEN)
        return 0; /* no call of ours has such an id */
    if ((f = store_lock(c, ae)) == NULL)
        return -1;
    for (size_t i = 0; i < NB_MCP_CANCELS; i++) {
        struct cancel_slot *k = &f->cancels[i];
        if (k->sid[0] == '\0' || (!strcmp(k->sid, sid) && !strcmp(k->req, req))) {
            pick = k;
            break;
        }
        if (pick == NULL || k->at < pick->at)
            pick = k; /* the oldest goes: its call is long over */
    }
    memset(pick, 0, sizeof(*pick));
    memcpy(pick->sid, sid, NB_MCP_SESSION_ID_LEN + 1);
    snprintf(pick->req, sizeof(pick->req), "%s", req);
    pick->at = nb_clock_real_s();
    store_unlock();
    return 1;
}

int nb_mcp_cancel_take(const struct nb_conf *c, const char *sid, const char *req)
{
    struct nb_apierr ae = {0};
    struct store_file *f;
    int found = 0;

    if (strlen(sid) != NB_MCP_SESSION_ID_LEN || strlen(req) > NB_MCP_REQUEST_ID_LEN)
        return 0;
    if ((f = store_lock(c, &ae)) == NULL)
        return 0;
    for (size_t i = 0; i < NB_MCP_CANCELS && !found; i++) {
        struct cancel_slot *k = &f->cancels[i];
        if (!strcmp(k->sid, sid) && !strcmp(k->req, req)) {
            memset(k, 0, sizeof(*k));
            found = 1;
        }
    }
    store_unlock();
    return found;
}
