/*
 * table.h - the shared state table: one file, mmap'd MAP_SHARED by every
 * nanobox process (master, workers, reaper).
 *
 * Layout: a versioned header followed by fixed-size slots, one per sandbox.
 * A robust process-shared mutex in the header guards everything; a process
 * that dies holding it leaves EOWNERDEAD to the next locker, which marks the
 * mutex consistent and carries on (every update is a few stores that leave
 * each slot valid at every step, so there is nothing to roll back).
 *
 * Because the table is a file, a crash of every nanobox process loses no
 * sandbox: the next start maps the same file and reconciles it with Docker.
 */
#ifndef NB_TABLE_H
#define NB_TABLE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define NB_TABLE_MAGIC "NANOBOX\0"
#define NB_TABLE_VERSION 2 /* 2: slots record their owner key */
#define NB_ID_LEN 36       /* textual UUID */
#define NB_CID_LEN 64      /* Docker container id */
#define NB_MAX_PORTS 16    /* open ports per sandbox */
#define NB_META_LEN 1024   /* serialized metadata JSON */
#define NB_IMAGE_LEN 128
#define NB_OWNER_LEN 32 /* a key name (keys.h NB_KEY_NAME_MAX) */

/*
 * Header flag: the table was created afresh (no file, or one of another
 * layout moved aside): the running containers of this instance are to be
 * adopted from what Docker knows (adopt.c) before any create takes a slot.
 * Cleared once an adoption pass has run.
 */
#define NB_TABLE_ADOPT_PENDING 1u

enum nb_slot_state {
    NB_SLOT_FREE = 0,
    NB_SLOT_CREATING, /* reserved; container being created by owner_pid */
    NB_SLOT_RUNNING,
    NB_SLOT_DESTROYING, /* container being removed by owner_pid */
    NB_SLOT_POOLED,     /* started with the defaults, waiting to be handed out */
    NB_SLOT_PAUSED,     /* frozen (docker pause): its TTL stopped, its pause TTL runs */
};

/* A slot's lifecycle bits (struct nb_slot.lifecycle; 1 was the whole field
 * before the second, so a table from then reads the same). */
#define NB_LIFE_AUTO_RESUME 1u      /* a call that needs it running resumes it */
#define NB_LIFE_PAUSE_ON_TIMEOUT 2u /* its TTL's end pauses it instead of destroying it */
#define NB_LIFE_E2B_HOME 4u         /* E2B's layout: its user and workspace are e2b_home's */
/* PAUSED with its memory released: no container, its files in its pause
 * image (snapshot.h); a resume boots a new container from them */
#define NB_LIFE_RELEASED 8u
/* a pause that releases the memory, or the resume of one, is under way
 * (transient: another pause or resume waits for it) */
#define NB_LIFE_BUSY 16u
/* its timeout's pause (NB_LIFE_PAUSE_ON_TIMEOUT) releases the memory */
#define NB_LIFE_PAUSE_COLD 32u
/* it has a pause image (snapshot.h; its container may run from it): removed with it */
#define NB_LIFE_PAUSE_IMAGE 64u
/* it mounts persistent volumes (volume.h), which its container's label
 * nanobox.volumes names: a fork, and a resume from its pause image (which
 * keeps that label), mount them again */
#define NB_LIFE_VOLUMES 128u

struct nb_port {
    uint16_t sandboxport; /* 0: unused */
    uint16_t hostport;
    pid_t fwd_pid;      /* forwarder process */
    uint64_t fwd_start; /* its start time (clock ticks, /proc/pid/stat field 22) */
    int64_t expires;    /* unix seconds */
};

struct nb_slot {
    uint32_t state;      /* enum nb_slot_state */
    uint32_t generation; /* bumped on every reserve: detects reuse */
    char id[NB_ID_LEN + 1];
    char container_id[NB_CID_LEN + 1];
    pid_t owner_pid;     /* process working on a CREATING/DESTROYING slot */
    int64_t state_since; /* unix seconds the state was entered */
    int64_t created;     /* unix seconds */
    int64_t expires;     /* unix seconds */
    pid_t init_pid;      /* host pid of the container's PID 1 */
    /* limits as applied */
    uint64_t memory;
    uint64_t nano_cpus;
    int64_t pids;
    uint32_t network_bridge; /* 0 none, 1 bridge */
    char image[NB_IMAGE_LEN];
    char metadata[NB_META_LEN]; /* JSON object text, "{}" when none */
    struct nb_port ports[NB_MAX_PORTS];
    /* pause and resume */
    uint32_t lifecycle;    /* NB_LIFE_* bits */
    int64_t ttl_left;      /* PAUSED: seconds of TTL it had when paused */
    int64_t pause_expires; /* PAUSED: unix seconds its pause ends (it is destroyed) */
    /* the name of the API key that created it (keys.h); "" while warm, or made before owners */
    char owner[NB_OWNER_LEN + 8];
    /* the idle pause: unix seconds of the last API call naming it (set by
     * the route guard), and the idle seconds after which the reaper pauses
     * it, releasing its memory (0: never) */
    int64_t last_active;
    int64_t idle_pause;
};

struct nb_table_header {
    char magic[8];
    uint32_t version;
    uint32_t slot_size; /* sizeof(struct nb_slot) when written */
    uint32_t nslots;
    uint32_t flags;       /* NB_TABLE_ADOPT_PENDING */
    uint64_t generation;  /* source of slot generations */
    pthread_mutex_t lock; /* robust, process-shared */
};

struct nb_table {
    int fd;
    size_t map_len;
    struct nb_table_header *hdr;
    struct nb_slot *slots;
    uint32_t nslots;
};

/*
 * Open (creating if absent) the table file with nslots slots. An existing
 * file with another magic, version or slot size, or a damaged one, is moved
 * aside to <path>.old (replacing an older .old) and a fresh table created,
 * with NB_TABLE_ADOPT_PENDING set, as for a missing file; it is refused (-1,
 * message in err) only while another process still has it open (an old
 * nanobox still running). One with fewer or more slots is grown or, if the
 * extra slots are free, shrunk.
 */
int nb_table_open(struct nb_table *t, const char *path, uint32_t nslots, char *err, size_t errlen);
void nb_table_close(struct nb_table *t);

/*
 * Lock/unlock the whole table. Lock repairs EOWNERDEAD and returns; a lock
 * that cannot be used at all aborts the process (the master replaces a
 * worker; the next start of nanobox-fcgi resets the lock). So it has no
 * failure for a caller to check.
 */
void nb_table_lock(struct nb_table *t);
void nb_table_unlock(struct nb_table *t);

/* The following expect the lock to be held. */

/* Slot with this id in any non-free state, or NULL. */
struct nb_slot *nb_table_find(struct nb_table *t, const char *id);

/*
 * Is s (may be NULL) a sandbox the API serves: running and unexpired, or
 * paused within its pause TTL? One whose TTL ended with on_timeout "pause"
 * still is: running until the reaper's next tick pauses it.
 */
int nb_slot_live(const struct nb_slot *s, int64_t now);

/* Number of slots not FREE. */
uint32_t nb_table_count(struct nb_table *t);

/* What the sandboxes of one owner hold: live ones (CREATING, RUNNING,
 * PAUSED), their memory and CPUs, and their open ports. */
struct nb_table_usage {
    unsigned sandboxes;
    uint64_t memory;
    uint64_t nano_cpus;
    unsigned ports;
};
void nb_table_usage(struct nb_table *t, const char *owner, struct nb_table_usage *u);

/* Number of slots in state. */
uint32_t nb_table_count_state(struct nb_table *t, enum nb_slot_state state);

/*
 * The slot state machine. Every change of a slot's state is one of these
 * functions; no other file writes state, owner_pid or state_since. Each
 * checks the state it leaves and refuses (NULL or -1, slot untouched) a
 * transition that is not allowed from there:
 *
 *   FREE ──reserve──> CREATING ──commit──> RUNNING or POOLED
 *   POOLED ──hand_out──> RUNNING
 *   RUNNING ──pause──> PAUSED ──resume──> RUNNING
 *   RUNNING, POOLED, PAUSED ──mark_destroying──> DESTROYING ──unmark──> RUNNING or PAUSED
 *   CREATING, DESTROYING (abandoned) ──take_over──> DESTROYING
 *   CREATING, DESTROYING ──free──> FREE;  any ──release──> FREE
 *   FREE ──adopt──> RUNNING or PAUSED (a fresh table taking a running container back)
 *
 * The ones that take (id, gen) are for a caller that dropped the lock for
 * a Docker call: they act only on the slot that still has this id and the
 * generation the caller saw, so a slot that reconciliation took over, or
 * that was freed and reused meanwhile, is never overwritten.
 */

/*
 * Reserve a free slot for id: state CREATING, owner = getpid(), new
 * generation, created/expires set. NULL when the table is full.
 */
struct nb_slot *nb_table_reserve(struct nb_table *t, const char *id, int64_t now, int64_t expires);

/*
 * CREATING -> to (RUNNING or POOLED): the slot's container cid is up with
 * PID 1 init_pid; the owner is cleared. NULL if the slot of id is gone, of
 * another generation or no longer CREATING (then the container is the
 * caller's to remove), or if to is neither RUNNING nor POOLED.
 */
struct nb_slot *nb_table_commit(struct nb_table *t, const char *id, uint32_t gen,
                                enum nb_slot_state to, const char *cid, pid_t init_pid,
                                int64_t now);

/*
 * POOLED -> RUNNING: hand out the first warm slot of image whose layout
 * bit (lifecycle & NB_LIFE_E2B_HOME) is layout, with created = now and the
 * given expiry. NULL when there is none.
 */
struct nb_slot *nb_table_hand_out(struct nb_table *t, const char *image, uint32_t layout,
                                  int64_t now, int64_t expires);

/*
 * RUNNING -> PAUSED: the TTL stops (ttl_left = what was left, at least 1 s)
 * and the pause TTL runs until pause_expires. -1 from any other state.
 */
int nb_table_pause(struct nb_table *t, struct nb_slot *s, int64_t now, int64_t pause_expires);

/*
 * PAUSED -> RUNNING: the TTL goes on from ttl_left (expires = now +
 * ttl_left). -1 from any other state.
 */
int nb_table_resume(struct nb_table *t, struct nb_slot *s, int64_t now);

/*
 * from (RUNNING, POOLED or PAUSED) -> DESTROYING, owned by this process.
 * from is the state the caller judged the slot in: -1 if the slot is in
 * another (a DELETE never takes a warm slot, the pool never a user's).
 */
int nb_table_mark_destroying(struct nb_table *t, struct nb_slot *s, enum nb_slot_state from,
                             int64_t now);

/*
 * DESTROYING -> RUNNING (PAUSED if it was paused), owner cleared: a
 * destroy whose Docker call failed puts the sandbox back, so it can be
 * destroyed again. -1 unless the slot of id has generation gen and is
 * DESTROYING.
 */
int nb_table_unmark_destroying(struct nb_table *t, const char *id, uint32_t gen);

/*
 * CREATING or DESTROYING -> DESTROYING, owned by this process: take over a
 * slot whose owner died or got stuck, to finish the job. -1 from any
 * other state.
 */
int nb_table_take_over(struct nb_table *t, struct nb_slot *s, int64_t now);

/*
 * Let go of the CREATING or DESTROYING slot of id at generation gen (owner
 * 0): its container could not be removed, and the next reconciliation
 * takes the slot over at once instead of waiting for it to look stuck.
 */
int nb_table_disown(struct nb_table *t, const char *id, uint32_t gen);

/*
 * CREATING or DESTROYING -> FREE for the slot of id at generation gen, once
 * its container is gone. -1 (nothing done) when the slot is gone, of
 * another generation, or in another state.
 */
int nb_table_free(struct nb_table *t, const char *id, uint32_t gen);

/*
 * FREE -> RUNNING or PAUSED: slot index i takes over a running container of
 * a table that was lost (adopt.c): *from is copied in (its state, owner_pid
 * and generation ignored), with a new generation. -1 if slot i is out of
 * range or not FREE, or to is neither RUNNING nor PAUSED.
 */
int nb_table_adopt(struct nb_table *t, uint32_t i, const struct nb_slot *from,
                   enum nb_slot_state to, int64_t now);

/*
 * Any state -> FREE, zeroed but for the generation: for reconciliation,
 * which frees a slot whose container vanished while it holds the lock.
 */
void nb_table_release(struct nb_table *t, struct nb_slot *s);

#endif
