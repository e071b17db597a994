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
#define NB_TABLE_VERSION 1
#define NB_ID_LEN 36            /* textual UUID */
#define NB_CID_LEN 64           /* Docker container id */
#define NB_MAX_PORTS 16         /* open ports per sandbox */
#define NB_META_LEN 1024        /* serialized metadata JSON */
#define NB_IMAGE_LEN 128

enum nb_slot_state {
    NB_SLOT_FREE = 0,
    NB_SLOT_CREATING,   /* reserved; container being created by owner_pid */
    NB_SLOT_RUNNING,
    NB_SLOT_DESTROYING, /* container being removed by owner_pid */
    NB_SLOT_POOLED,     /* started with the defaults, waiting to be handed out */
};

struct nb_port {
    uint16_t sandboxport;       /* 0: unused */
    uint16_t hostport;
    pid_t fwd_pid;              /* forwarder process */
    uint64_t fwd_start;         /* its start time (clock ticks, /proc/pid/stat field 22) */
    int64_t expires;            /* unix seconds */
};

struct nb_slot {
    uint32_t state;             /* enum nb_slot_state */
    uint32_t generation;        /* bumped on every reserve: detects reuse */
    char id[NB_ID_LEN + 1];
    char container_id[NB_CID_LEN + 1];
    pid_t owner_pid;            /* process working on a CREATING/DESTROYING slot */
    int64_t state_since;        /* unix seconds the state was entered */
    int64_t created;            /* unix seconds */
    int64_t expires;            /* unix seconds */
    pid_t init_pid;             /* host pid of the container's PID 1 */
    /* limits as applied */
    uint64_t memory;
    uint64_t nano_cpus;
    int64_t pids;
    uint32_t network_bridge;    /* 0 none, 1 bridge */
    char image[NB_IMAGE_LEN];
    char metadata[NB_META_LEN]; /* JSON object text, "{}" when none */
    struct nb_port ports[NB_MAX_PORTS];
};

struct nb_table_header {
    char magic[8];
    uint32_t version;
    uint32_t slot_size;         /* sizeof(struct nb_slot) when written */
    uint32_t nslots;
    uint32_t reserved;
    uint64_t generation;        /* source of slot generations */
    pthread_mutex_t lock;       /* robust, process-shared */
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
 * file with another magic, version or slot size is refused (-1, message in
 * err); one with fewer or more slots is grown or, if the extra slots are
 * free, shrunk.
 */
int nb_table_open(struct nb_table *t, const char *path, uint32_t nslots, char *err, size_t errlen);
void nb_table_close(struct nb_table *t);

/*
 * Lock/unlock the whole table. Lock repairs EOWNERDEAD and returns 0; a lock
 * that cannot be used at all aborts the process (the master replaces a
 * worker; the next start of nanobox-fcgi resets the lock).
 */
int nb_table_lock(struct nb_table *t);
void nb_table_unlock(struct nb_table *t);

/* The following expect the lock to be held. */

/* Slot with this id in any non-free state, or NULL. */
struct nb_slot *nb_table_find(struct nb_table *t, const char *id);

/*
 * Reserve a free slot for id: state CREATING, owner = getpid(), new
 * generation, created/expires set. NULL when the table is full.
 */
struct nb_slot *nb_table_reserve(struct nb_table *t, const char *id, int64_t now, int64_t expires);

/* Back to FREE, zeroed but for the generation. */
void nb_table_release(struct nb_table *t, struct nb_slot *s);

/* Number of slots not FREE. */
uint32_t nb_table_count(struct nb_table *t);

#endif
