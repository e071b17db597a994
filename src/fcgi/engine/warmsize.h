/*
 * warmsize.h - how many warm sandboxes each pool keeps ready: the sizing
 * of the adaptive warm pools, as a pure state machine (no Docker, no
 * table: counts and times in, a target out), so that it is unit-tested by
 * itself (tests/unit/test_warmsize.c). warm.c feeds it from the demand
 * counters the workers keep in shared memory (metrics.h) and acts on it.
 *
 * Like php-fpm's dynamic mode: each pool ("kind") has a floor and a
 * ceiling from the config. Its target grows when creates find it empty (a
 * miss adds what was missed, up to the ceiling: a burst teaches it) and
 * shrinks by one per idle interval while ready sandboxes sit unused, never
 * below the floor. A memory budget caps the sum of all pools, and the
 * last free slots of the table are the users' (nb_warm_wanted).
 */
#ifndef NB_WARMSIZE_H
#define NB_WARMSIZE_H

#include <stddef.h>
#include <stdint.h>

/* One pool's sizing state: the reaper's own, in its memory. */
struct nb_warmsize {
    unsigned floor, ceiling; /* from the config; ceiling >= floor */
    unsigned target;         /* what the pool keeps ready now, floor .. ceiling */
    uint64_t misses_seen;    /* the pool's miss counter as last read */
    int64_t quiet_since;     /* ms: the last take, growth or shrink (the idle interval's start) */
};

/*
 * Start at the floor, with misses the pool's miss counter now (those
 * before are not demand this state machine saw). ceiling below floor is
 * taken as floor.
 */
void nb_warmsize_init(struct nb_warmsize *w, unsigned floor, unsigned ceiling, uint64_t misses,
                      int64_t now_ms);

/*
 * Carry on from target, what an earlier reaper had taught the pool (a
 * reaper restarted by the master), kept within the floor and the ceiling.
 */
void nb_warmsize_resume(struct nb_warmsize *w, unsigned target);

/*
 * One step at now_ms: misses is the pool's miss counter, last_take_ms the
 * time of its last take (hit or miss; 0: none yet), ready how many of its
 * sandboxes are ready, idle_ms the idle interval. New misses grow the
 * target by as many (up to the ceiling); a pool with ready sandboxes and
 * no take, growth or shrink for idle_ms shrinks by one (not below the
 * floor). Returns the target.
 */
unsigned nb_warmsize_step(struct nb_warmsize *w, uint64_t misses, int64_t last_take_ms,
                          unsigned ready, int64_t idle_ms, int64_t now_ms);

/*
 * The most warm sandboxes all pools may hold together, each counted at
 * per_sandbox bytes (its memory limit): at most budget bytes (0: no fixed
 * budget), and no more than those ready now (pooled) plus what the host's
 * MemAvailable (avail; UINT64_MAX: not known) holds above reserve.
 * UINT_MAX when nothing caps it.
 */
unsigned nb_warmsize_cap(uint64_t budget, uint64_t avail, uint64_t reserve, unsigned pooled,
                         uint64_t per_sandbox);

/*
 * Cut the targets want[0..n) so that they add up to at most total, the
 * first pools first (the last ones lose what does not fit).
 */
void nb_warmsize_fit(unsigned *want, size_t n, unsigned total);

#endif
