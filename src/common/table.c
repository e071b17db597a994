/*
 * table.c - the shared state table file (see table.h for the layout).
 *
 * Opening is the delicate part, because several processes may open the same
 * file at once, a previous run may have died half-way through creating it,
 * and another process may still have it mapped. The rules, after LMDB's lock
 * file:
 *
 * - Every process that has the table open holds flock(LOCK_SH) on its file
 *   description for as long as it is open (forked children share it).
 * - An opener first tries flock(LOCK_EX | LOCK_NB). Getting it proves no
 *   other process has the table open: only then may it create the header,
 *   resize the file, or reset the mutex (a mutex left locked by a process
 *   that died with the whole machine is never marked EOWNERDEAD by the
 *   kernel, so the first opener after a reboot re-initialises it). It then
 *   downgrades to LOCK_SH.
 * - Anybody else waits for LOCK_SH, which also waits out an initialiser, and
 *   uses the table with the slot count the file has.
 * - The header is written with the magic last, so a file whose magic is all
 *   zero bytes is one whose creation never finished, and is created afresh.
 * - The file is never shorter than the header's slot count says: growing
 *   extends the file before raising nslots, shrinking lowers nslots before
 *   cutting the file. Nobody can therefore touch a page past the end of the
 *   file (which would be SIGBUS), even after a crash in the middle.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "table.h"

/* Slots follow the header directly, so the header must keep them aligned. */
_Static_assert(sizeof(struct nb_table_header) % _Alignof(struct nb_slot) == 0,
               "slots after the header would be misaligned");

#define TABLE_HDR_SIZE sizeof(struct nb_table_header)
#define TABLE_SLOT_SIZE sizeof(struct nb_slot)

/* Far beyond any one host (under 2 GiB of slots); keeps sizes from overflowing. */
#define TABLE_MAX_SLOTS (1u << 20)

/* How long an opener waits for a half-created file to be finished. */
#define TABLE_INIT_WAIT_MS 5000

static void table_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void table_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static size_t table_len(uint32_t nslots)
{
    return TABLE_HDR_SIZE + (size_t)nslots * TABLE_SLOT_SIZE;
}

/* flock(2) that rides out signals: a blocking LOCK_SH may wait a while. */
static int table_flock(int fd, int op)
{
    int rc;

    do
        rc = flock(fd, op);
    while (rc == -1 && errno == EINTR);
    return rc;
}

static int table_map(struct nb_table *t, uint32_t nslots, const char *path, char *err,
                     size_t errlen)
{
    size_t len = table_len(nslots);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);

    if (p == MAP_FAILED) {
        table_err(err, errlen, "mmap %s (%zu bytes): %s", path, len, strerror(errno));
        return -1;
    }
    t->hdr = p;
    t->slots = (struct nb_slot *)((char *)p + TABLE_HDR_SIZE);
    t->map_len = len;
    t->nslots = nslots;
    return 0;
}

static void table_unmap(struct nb_table *t)
{
    if (t->hdr != NULL)
        munmap(t->hdr, t->map_len);
    t->hdr = NULL;
    t->slots = NULL;
    t->map_len = 0;
    t->nslots = 0;
}

static int table_truncate(struct nb_table *t, size_t len, const char *path, char *err,
                          size_t errlen)
{
    if (ftruncate(t->fd, (off_t)len) == -1) {
        table_err(err, errlen, "resize %s to %zu bytes: %s", path, len, strerror(errno));
        return -1;
    }
    return 0;
}

/* (Re)initialise the robust, process-shared mutex; nobody else may hold it. */
static int table_init_lock(struct nb_table *t, const char *path, char *err, size_t errlen)
{
    pthread_mutexattr_t attr;
    int rc;

    rc = pthread_mutexattr_init(&attr);
    if (rc != 0) {
        table_err(err, errlen, "%s: mutex attributes: %s", path, strerror(rc));
        return -1;
    }
    rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init(&t->hdr->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) {
        table_err(err, errlen, "%s: initialise the table lock: %s", path, strerror(rc));
        return -1;
    }
    return 0;
}

/* Write a fresh table of nslots free slots. Caller holds LOCK_EX. */
static int table_create(struct nb_table *t, uint32_t nslots, const char *path, char *err,
                        size_t errlen)
{
    /* Cutting to 0 first drops whatever a failed earlier attempt left. */
    if (table_truncate(t, 0, path, err, errlen) == -1 ||
        table_truncate(t, table_len(nslots), path, err, errlen) == -1 ||
        table_map(t, nslots, path, err, errlen) == -1)
        return -1;
    t->hdr->version = NB_TABLE_VERSION;
    t->hdr->slot_size = (uint32_t)TABLE_SLOT_SIZE;
    t->hdr->nslots = nslots;
    t->hdr->generation = 0;
    /* a table made afresh knows none of the containers that may run: adopt them */
    t->hdr->flags = NB_TABLE_ADOPT_PENDING;
    if (table_init_lock(t, path, err, errlen) == -1)
        return -1;
    /* The magic says "complete": it must not land before the rest. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(t->hdr->magic, NB_TABLE_MAGIC, sizeof(t->hdr->magic));
    return 0;
}

/*
 * Change the slot count of a mapped table. Caller holds LOCK_EX. A shrink
 * that would drop a slot in use is not done: the table keeps its size.
 */
static int table_resize(struct nb_table *t, uint32_t nslots, const char *path, char *err,
                        size_t errlen)
{
    uint32_t old = t->nslots;

    if (nslots > old) {
        if (table_truncate(t, table_len(nslots), path, err, errlen) == -1)
            return -1;
        table_unmap(t);
        if (table_map(t, nslots, path, err, errlen) == -1)
            return -1;
        t->hdr->nslots = nslots;
        nb_info("state table %s grown from %u to %u slots", path, old, nslots);
        return 0;
    }
    for (uint32_t i = nslots; i < old; i++) {
        if (t->slots[i].state != NB_SLOT_FREE) {
            nb_warn("state table %s: cannot shrink from %u to %u slots while slot %u "
                    "(sandbox %.*s) is in use; keeping %u slots",
                    path, old, nslots, i, NB_ID_LEN, t->slots[i].id, old);
            return 0;
        }
    }
    t->hdr->nslots = nslots;
    table_unmap(t);
    if (table_truncate(t, table_len(nslots), path, err, errlen) == -1 ||
        table_map(t, nslots, path, err, errlen) == -1)
        return -1;
    nb_info("state table %s shrunk from %u to %u slots", path, old, nslots);
    return 0;
}

/*
 * New (empty), or what table_create leaves when it dies before the magic:
 * a header of ours, partly written, and whole slots. Anything else with a
 * zero magic is somebody else's file, and is not ours to wipe.
 */
static int table_half_created(const struct nb_table_header *h, off_t size)
{
    if (size == 0)
        return 1;
    return (h->version == 0 || h->version == NB_TABLE_VERSION) &&
           (h->slot_size == 0 || h->slot_size == TABLE_SLOT_SIZE) &&
           (uint64_t)size > TABLE_HDR_SIZE &&
           ((uint64_t)size - TABLE_HDR_SIZE) % TABLE_SLOT_SIZE == 0;
}

/*
 * Look at the file under whichever flock we hold and map it. Returns 0 when
 * mapped, 1 when the file is not initialised and we may not initialise it
 * (shared lock: try again), 2 when it is of another layout or damaged and we
 * are alone (exclusive: the reason in err, for table_move_aside), -1 on
 * error.
 */
static int table_attach(struct nb_table *t, const char *path, uint32_t want, int exclusive,
                        char *err, size_t errlen)
{
    static const char zero_magic[8];
    struct nb_table_header h;
    struct stat st;
    ssize_t n;

    if (fstat(t->fd, &st) == -1) {
        table_err(err, errlen, "stat %s: %s", path, strerror(errno));
        return -1;
    }
    memset(&h, 0, sizeof(h));
    n = pread(t->fd, &h, sizeof(h), 0);
    if (n == -1) {
        table_err(err, errlen, "read %s: %s", path, strerror(errno));
        return -1;
    }
    if (memcmp(h.magic, zero_magic, sizeof(h.magic)) == 0 && table_half_created(&h, st.st_size)) {
        if (!exclusive)
            return 1;
        if (st.st_size > 0)
            nb_warn("state table %s was never completely created; creating it afresh", path);
        return table_create(t, want, path, err, errlen);
    }
    if ((size_t)n < sizeof(h) || memcmp(h.magic, NB_TABLE_MAGIC, sizeof(h.magic)) != 0)
        table_err(err, errlen, "it is not a nanobox state table (bad magic)");
    else if (h.version != NB_TABLE_VERSION)
        table_err(err, errlen, "it has state table layout version %u, this build uses %u",
                  h.version, NB_TABLE_VERSION);
    else if (h.slot_size != TABLE_SLOT_SIZE)
        table_err(err, errlen, "it has %u-byte slots, this build uses %zu-byte slots", h.slot_size,
                  TABLE_SLOT_SIZE);
    else if (h.nslots == 0 || h.nslots > TABLE_MAX_SLOTS ||
             (uint64_t)st.st_size < (uint64_t)table_len(h.nslots))
        table_err(err, errlen, "it is damaged: its header says %u slots but it holds %lld bytes",
                  h.nslots, (long long)st.st_size);
    else
        goto usable;
    if (exclusive)
        return 2; /* nobody has it open: the caller moves it aside */
    {
        char why[192];
        snprintf(why, sizeof(why), "%s", err ? err : "");
        table_err(err, errlen,
                  "%s: %s, and another process (an older nanobox-fcgi?) still has it open: "
                  "stop that one first; this one then moves the file aside and adopts the "
                  "running sandboxes",
                  path, why);
    }
    return -1;
usable:
    if (exclusive && (uint64_t)st.st_size > (uint64_t)table_len(h.nslots)) {
        /* A shrink was cut short after lowering nslots: finish it. */
        if (table_truncate(t, table_len(h.nslots), path, err, errlen) == -1)
            return -1;
    }
    if (table_map(t, h.nslots, path, err, errlen) == -1)
        return -1;
    if (!exclusive) {
        if (want != h.nslots)
            nb_warn("state table %s is open in another process: keeping its %u slots "
                    "(asked for %u)",
                    path, h.nslots, want);
        return 0;
    }
    /* We are alone: any holder of the lock is dead, perhaps since a reboot. */
    if (table_init_lock(t, path, err, errlen) == -1)
        return -1;
    if (want != h.nslots)
        return table_resize(t, want, path, err, errlen);
    return 0;
}

/*
 * Rename the file we hold LOCK_EX on to <path>.old (an older .old goes) and
 * open a new, empty one at path in its place; err holds the reason on entry.
 * Renaming, not wiping: whatever the file was, it is still there to read.
 */
static int table_move_aside(struct nb_table *t, const char *path, char *err, size_t errlen)
{
    char old[4096], why[192];

    snprintf(why, sizeof(why), "%s", err ? err : "");
    if ((size_t)snprintf(old, sizeof(old), "%s.old", path) >= sizeof(old)) {
        table_err(err, errlen, "%s: path too long", path);
        return -1;
    }
    if (rename(path, old) == -1) {
        table_err(err, errlen, "%s: %s, and it cannot be moved to %s: %s", path, why, old,
                  strerror(errno));
        return -1;
    }
    nb_warn("state table %s: %s; moved it to %s and creating a fresh table: the running "
            "sandboxes of this instance are adopted from Docker",
            path, why, old);
    close(t->fd); /* drops our LOCK_EX on the old file */
    t->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (t->fd == -1) {
        table_err(err, errlen, "open %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int nb_table_open(struct nb_table *t, const char *path, uint32_t nslots, char *err, size_t errlen)
{
    int result = -1;
    long waited_ms = 0;

    t->fd = -1;
    t->map_len = 0;
    t->hdr = NULL;
    t->slots = NULL;
    t->nslots = 0;
    table_err(err, errlen, "no error");

    if (nslots == 0 || nslots > TABLE_MAX_SLOTS) {
        table_err(err, errlen, "state table %s: %u slots is out of range (1 to %u)", path, nslots,
                  TABLE_MAX_SLOTS);
        goto out;
    }
    t->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (t->fd == -1) {
        table_err(err, errlen, "open %s: %s", path, strerror(errno));
        goto out;
    }
    for (;;) {
        int exclusive = 1;
        int rc;

        if (table_flock(t->fd, LOCK_EX | LOCK_NB) == -1) {
            if (errno != EWOULDBLOCK) {
                table_err(err, errlen, "flock %s: %s", path, strerror(errno));
                goto out;
            }
            exclusive = 0;
            if (table_flock(t->fd, LOCK_SH) == -1) {
                table_err(err, errlen, "flock %s: %s", path, strerror(errno));
                goto out;
            }
        }
        rc = table_attach(t, path, nslots, exclusive, err, errlen);
        if (rc == -1)
            goto out;
        if (rc == 2) {
            /* another layout (an upgrade), or damaged: kept as .old, and a fresh one */
            if (table_move_aside(t, path, err, errlen) == -1)
                goto out;
            continue;
        }
        if (rc == 0 && !exclusive)
            break;
        if (rc == 0) {
            /*
             * Downgrade. flock(2) does this by unlocking first, so another
             * opener may slip in, find itself alone and resize: re-read the
             * count once we hold LOCK_SH, when it can no longer change.
             */
            if (table_flock(t->fd, LOCK_SH) == -1) {
                table_err(err, errlen, "flock %s: %s", path, strerror(errno));
                goto out;
            }
            if (t->hdr->nslots != t->nslots) {
                uint32_t now_slots = t->hdr->nslots;
                table_unmap(t);
                if (table_map(t, now_slots, path, err, errlen) == -1)
                    goto out;
            }
            break;
        }
        /* Half-created by an opener that died; wait to get LOCK_EX. */
        if (table_flock(t->fd, LOCK_UN) == -1) {
            table_err(err, errlen, "flock %s: %s", path, strerror(errno));
            goto out;
        }
        if (waited_ms >= TABLE_INIT_WAIT_MS) {
            table_err(err, errlen, "%s is held open by another process but was never initialised",
                      path);
            goto out;
        }
        {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            waited_ms++;
        }
    }
    result = 0;
out:
    if (result == -1)
        nb_table_close(t);
    return result;
}

void nb_table_close(struct nb_table *t)
{
    table_unmap(t);
    if (t->fd != -1)
        close(t->fd); /* also drops our LOCK_SH once no fork shares it */
    t->fd = -1;
}

void nb_table_lock(struct nb_table *t)
{
    int rc = pthread_mutex_lock(&t->hdr->lock);

    if (rc == 0)
        return;
    if (rc == EOWNERDEAD) {
        /* Every update leaves slots valid, so there is nothing to undo. */
        rc = pthread_mutex_consistent(&t->hdr->lock);
        if (rc != 0) {
            /* unusable until every process restarts (the first opener resets it) */
            nb_error("state table lock: cannot mark consistent: %s", strerror(rc));
            abort();
        }
        nb_warn("repaired table lock left by a dead process");
        return;
    }
    nb_error("state table lock: %s", strerror(rc));
    abort();
}

void nb_table_unlock(struct nb_table *t)
{
    int rc = pthread_mutex_unlock(&t->hdr->lock);

    if (rc != 0)
        nb_error("state table unlock: %s", strerror(rc));
}

int nb_slot_live(const struct nb_slot *s, int64_t now)
{
    return s != NULL && ((s->state == NB_SLOT_RUNNING &&
                          (s->expires > now || (s->lifecycle & NB_LIFE_PAUSE_ON_TIMEOUT))) ||
                         (s->state == NB_SLOT_PAUSED && s->pause_expires > now));
}

struct nb_slot *nb_table_find(struct nb_table *t, const char *id)
{
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct nb_slot *s = &t->slots[i];
        if (s->state != NB_SLOT_FREE && strncmp(s->id, id, NB_ID_LEN + 1) == 0)
            return s;
    }
    return NULL;
}

uint32_t nb_table_count(struct nb_table *t)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < t->nslots; i++)
        if (t->slots[i].state != NB_SLOT_FREE)
            n++;
    return n;
}

void nb_table_usage(struct nb_table *t, const char *owner, struct nb_table_usage *u)
{
    memset(u, 0, sizeof(*u));
    for (uint32_t i = 0; i < t->nslots; i++) {
        const struct nb_slot *s = &t->slots[i];
        if ((s->state != NB_SLOT_CREATING && s->state != NB_SLOT_RUNNING &&
             s->state != NB_SLOT_PAUSED) ||
            strcmp(s->owner, owner) != 0)
            continue;
        u->sandboxes++;
        u->memory += s->memory;
        u->nano_cpus += s->nano_cpus;
        for (unsigned p = 0; p < NB_MAX_PORTS; p++)
            if (s->ports[p].sandboxport != 0)
                u->ports++;
    }
}

uint32_t nb_table_count_state(struct nb_table *t, enum nb_slot_state state)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < t->nslots; i++)
        if (t->slots[i].state == (uint32_t)state)
            n++;
    return n;
}

/* ---- the slot state machine (table.h) ---- */

/*
 * Enter state with its owner. The lock is held, so the order of the stores
 * matters only to a reader that peeks without it; the state goes last all
 * the same, with release ordering, as in reserve.
 */
static void slot_enter(struct nb_slot *s, enum nb_slot_state state, pid_t owner, int64_t now)
{
    s->owner_pid = owner;
    s->state_since = now;
    __atomic_store_n(&s->state, (uint32_t)state, __ATOMIC_RELEASE);
}

/* The slot of id still at generation gen, or NULL. */
static struct nb_slot *slot_of(struct nb_table *t, const char *id, uint32_t gen)
{
    struct nb_slot *s = nb_table_find(t, id);

    return s != NULL && s->generation == gen ? s : NULL;
}

struct nb_slot *nb_table_reserve(struct nb_table *t, const char *id, int64_t now, int64_t expires)
{
    struct nb_slot *s = NULL;
    uint32_t gen;
    size_t idlen;

    for (uint32_t i = 0; i < t->nslots; i++) {
        if (t->slots[i].state == NB_SLOT_FREE) {
            s = &t->slots[i];
            break;
        }
    }
    if (s == NULL)
        return NULL;
    do
        gen = (uint32_t)++t->hdr->generation;
    while (gen == 0);

    /* Fill while still FREE; CREATING goes in last (see table.h). */
    memset(s, 0, sizeof(*s));
    s->generation = gen;
    idlen = strnlen(id, NB_ID_LEN);
    memcpy(s->id, id, idlen);
    s->created = now;
    s->expires = expires;
    memcpy(s->metadata, "{}", 3);
    slot_enter(s, NB_SLOT_CREATING, getpid(), now);
    return s;
}

struct nb_slot *nb_table_commit(struct nb_table *t, const char *id, uint32_t gen,
                                enum nb_slot_state to, const char *cid, pid_t init_pid, int64_t now)
{
    struct nb_slot *s = slot_of(t, id, gen);

    if (s == NULL || s->state != NB_SLOT_CREATING ||
        (to != NB_SLOT_RUNNING && to != NB_SLOT_POOLED))
        return NULL;
    snprintf(s->container_id, sizeof(s->container_id), "%s", cid);
    s->init_pid = init_pid;
    slot_enter(s, to, 0, now);
    return s;
}

struct nb_slot *nb_table_hand_out(struct nb_table *t, const char *image, uint32_t layout,
                                  int64_t now, int64_t expires)
{
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct nb_slot *s = &t->slots[i];
        if (s->state != NB_SLOT_POOLED || strncmp(s->image, image, sizeof(s->image)) != 0 ||
            (s->lifecycle & NB_LIFE_E2B_HOME) != layout)
            continue;
        s->created = now;
        s->expires = expires;
        slot_enter(s, NB_SLOT_RUNNING, 0, now);
        return s;
    }
    return NULL;
}

int nb_table_pause(struct nb_table *t, struct nb_slot *s, int64_t now, int64_t pause_expires)
{
    (void)t;
    if (s->state != NB_SLOT_RUNNING)
        return -1;
    s->ttl_left = s->expires > now ? s->expires - now : 1;
    s->pause_expires = pause_expires;
    slot_enter(s, NB_SLOT_PAUSED, 0, now);
    return 0;
}

int nb_table_resume(struct nb_table *t, struct nb_slot *s, int64_t now)
{
    (void)t;
    if (s->state != NB_SLOT_PAUSED)
        return -1;
    s->expires = now + s->ttl_left;
    s->ttl_left = 0;
    s->pause_expires = 0;
    slot_enter(s, NB_SLOT_RUNNING, 0, now);
    return 0;
}

int nb_table_mark_destroying(struct nb_table *t, struct nb_slot *s, enum nb_slot_state from,
                             int64_t now)
{
    (void)t;
    if ((from != NB_SLOT_RUNNING && from != NB_SLOT_POOLED && from != NB_SLOT_PAUSED) ||
        s->state != (uint32_t)from)
        return -1;
    slot_enter(s, NB_SLOT_DESTROYING, getpid(), now);
    return 0;
}

int nb_table_unmark_destroying(struct nb_table *t, const char *id, uint32_t gen)
{
    struct nb_slot *s = slot_of(t, id, gen);

    if (s == NULL || s->state != NB_SLOT_DESTROYING)
        return -1;
    /* state_since keeps the time of the mark, as it always has; a paused
     * one (its pause TTL still set) goes back to its pause */
    slot_enter(s, s->pause_expires != 0 ? NB_SLOT_PAUSED : NB_SLOT_RUNNING, 0, s->state_since);
    return 0;
}

int nb_table_take_over(struct nb_table *t, struct nb_slot *s, int64_t now)
{
    (void)t;
    if (s->state != NB_SLOT_CREATING && s->state != NB_SLOT_DESTROYING)
        return -1;
    slot_enter(s, NB_SLOT_DESTROYING, getpid(), now);
    return 0;
}

int nb_table_disown(struct nb_table *t, const char *id, uint32_t gen)
{
    struct nb_slot *s = slot_of(t, id, gen);

    if (s == NULL || (s->state != NB_SLOT_CREATING && s->state != NB_SLOT_DESTROYING))
        return -1;
    s->owner_pid = 0;
    return 0;
}

int nb_table_free(struct nb_table *t, const char *id, uint32_t gen)
{
    struct nb_slot *s = slot_of(t, id, gen);

    if (s == NULL || (s->state != NB_SLOT_CREATING && s->state != NB_SLOT_DESTROYING))
        return -1;
    nb_table_release(t, s);
    return 0;
}

int nb_table_adopt(struct nb_table *t, uint32_t i, const struct nb_slot *from,
                   enum nb_slot_state to, int64_t now)
{
    struct nb_slot *s;
    uint32_t gen;

    if (i >= t->nslots || t->slots[i].state != NB_SLOT_FREE ||
        (to != NB_SLOT_RUNNING && to != NB_SLOT_PAUSED))
        return -1;
    s = &t->slots[i];
    do
        gen = (uint32_t)++t->hdr->generation;
    while (gen == 0);
    /* filled while still FREE; the state goes in last, as in reserve */
    *s = *from;
    s->state = NB_SLOT_FREE;
    s->generation = gen;
    slot_enter(s, to, 0, now);
    return 0;
}

void nb_table_release(struct nb_table *t, struct nb_slot *s)
{
    uint32_t gen = s->generation;

    (void)t;
    __atomic_store_n(&s->state, (uint32_t)NB_SLOT_FREE, __ATOMIC_RELEASE);
    memset(s, 0, sizeof(*s));
    s->generation = gen;
}
