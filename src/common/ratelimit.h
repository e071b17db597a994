/*
 * ratelimit.h - the per-key request rate of the keys file (`rate=10r/s`,
 * docs/CONFIG.md "Keys file"), enforced by nanobox-fcgi itself: one token
 * bucket per key name, shared by every worker.
 *
 * The buckets sit in the metrics block (metrics.h), the anonymous
 * MAP_SHARED mapping the master makes before its first fork, so every
 * worker sees the same ones. A bucket is found by the key's name, not by
 * its place in the keys file: a reload (SIGHUP) that adds, removes or
 * reorders keys keeps each key's bucket and never hands it to another.
 *
 * A bucket is one 64-bit number, the time at which it will be full again
 * (GCRA, the "theoretical arrival time"), moved forward by one interval per
 * request with a compare-and-swap: no lock, so a worker that dies mid-way
 * leaves nothing held. "Nr/s" lets N requests through at once (a full
 * bucket) and then one every 1/N s; "Nr/m" the same per minute.
 */
#ifndef NB_RATELIMIT_H
#define NB_RATELIMIT_H

#include <stdint.h>

#include "keys.h"

/* Twice the keys a file may hold: names of removed keys keep their slot. */
#define NB_RATE_SLOTS (2 * NB_KEYS_MAX)

struct nb_rate_slot {
    uint32_t state; /* 0 free, 1 being claimed, 2 ready (name set) */
    char name[NB_KEY_NAME_MAX + 1];
    int64_t tat_ns; /* monotonic ns at which the bucket is full again */
};

struct nb_rate_table {
    struct nb_rate_slot slot[NB_RATE_SLOTS];
    uint64_t full; /* requests not limited because no slot was free */
};

/*
 * Parse a keys-file rate ("10r/s", "30r/m") into a burst (N) and the
 * interval between two requests in ns. 0, or -1 when rate is not one.
 */
int nb_rate_parse(const char *rate, uint32_t *burst, int64_t *interval_ns);

/*
 * One request of key name, whose rate is rate (the keys file's text),
 * at now_ns (CLOCK_MONOTONIC). 1 when it may go on; 0 when the key is over
 * its rate, with *retry_ms the wait until one more request would pass.
 * A NULL table, an empty or unreadable rate, or a full table: 1.
 */
int nb_rate_take(struct nb_rate_table *t, const char *name, const char *rate, int64_t now_ns,
                 int64_t *retry_ms);

/* CLOCK_MONOTONIC in ns. */
int64_t nb_rate_now_ns(void);

#endif
