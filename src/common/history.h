/*
 * history.h - each sandbox's usage over its life: a bounded ring of
 * samples (CPU, memory, workspace disk) per slot of the state table, for
 * GET /sandbox/{id}/metrics?start=&end= and E2B's getMetrics({start, end}).
 *
 * The rings live in one anonymous MAP_SHARED mapping the master makes
 * before its first fork (nb_history_map), like the metrics block
 * (metrics.h): every worker reads it, the reaper writes it. Not in the
 * state table's file, so the table's layout stays as it is; a restart of
 * nanobox-fcgi starts every history again (the sandboxes live on).
 *
 * A ring is slot i's, tagged with the generation and id of the sandbox
 * its samples are of: a slot reused by another sandbox (a new generation)
 * reads as empty, and the first sample of the new one resets it. Every
 * call below expects the table's lock to be held (table.h), which orders
 * the reaper's writes with the workers' reads and with the slot's state.
 *
 * Size: NB_HRING_HEAD + cap * sizeof(struct nb_hsample) (64 + 40 * cap)
 * bytes per slot; 28.9 KB with the default 720 samples (metrics_history).
 */
#ifndef NB_HISTORY_H
#define NB_HISTORY_H

#include <stddef.h>
#include <stdint.h>

/* One sample, as the reaper took it (40 bytes). */
struct nb_hsample {
    int64_t t_ms;       /* unix milliseconds */
    uint64_t cpu_usec;  /* the cgroup's CPU time so far */
    uint64_t mem;       /* the cgroup's memory in use, bytes */
    uint64_t disk;      /* bytes used on the workspace */
    uint32_t cpu_centi; /* CPU since the previous sample, hundredths of a percent of one CPU */
    uint32_t pad;
};

/* A ring's head (64 bytes) and the samples after it. */
struct nb_hring {
    uint32_t gen;   /* the generation of the slot's sandbox; 0: empty */
    uint32_t next;  /* where the next sample goes */
    uint32_t count; /* samples held (at most the capacity) */
    uint32_t pad;
    char id[40];         /* the sandbox's id (NB_ID_LEN + 1) */
    uint64_t disk_total; /* the workspace's size at the last sample, bytes */
};
#define NB_HRING_HEAD sizeof(struct nb_hring)

struct nb_history {
    uint32_t nslots;
    uint32_t cap;      /* samples per ring; 0: no history kept */
    unsigned interval; /* seconds between samples */
    size_t ring_bytes; /* NB_HRING_HEAD + cap samples */
    size_t map_len;
    unsigned char *rings;
};

/* The process's history, or NULL before nb_history_map (unit tests, the CLI). */
extern struct nb_history *nb_history;

/*
 * Map nslots rings of cap samples (0: none kept, nothing mapped but the
 * descriptor), taken every interval seconds. 0, or -1 with a message.
 */
int nb_history_map(uint32_t nslots, uint32_t cap, unsigned interval, char *err, size_t errlen);
void nb_history_unmap(void);

/* The same on memory the caller gives (mem: nslots * nb_history_ring_bytes(cap)), for tests. */
void nb_history_init(struct nb_history *h, void *mem, uint32_t nslots, uint32_t cap,
                     unsigned interval);
size_t nb_history_ring_bytes(uint32_t cap);

/*
 * Add a sample to slot i for the sandbox (gen, id): a ring of another
 * sandbox is emptied first. cpu_centi is computed here from the ring's
 * last sample (the CPU time between them over the time between them);
 * for a first sample, from created (unix seconds) to it. Nothing when i
 * is out of range or no history is kept.
 */
void nb_history_add(struct nb_history *h, uint32_t i, uint32_t gen, const char *id, int64_t created,
                    int64_t t_ms, uint64_t cpu_usec, uint64_t mem, uint64_t disk,
                    uint64_t disk_total);

/* Empty slot i's ring (its sandbox ended). */
void nb_history_clear(struct nb_history *h, uint32_t i);

/*
 * The samples of sandbox (gen, id) in slot i whose time (unix seconds,
 * rounded down) is in [start, end], oldest first, at most max into out:
 * how many. None when the ring is another sandbox's. disk_total (may be
 * NULL) gets the workspace's size.
 */
size_t nb_history_read(const struct nb_history *h, uint32_t i, uint32_t gen, const char *id,
                       int64_t start, int64_t end, struct nb_hsample *out, size_t max,
                       uint64_t *disk_total);

#endif
