/*
 * warmsize.c - see warmsize.h.
 */
#include "config.h"

#include <limits.h>

#include "warmsize.h"

void nb_warmsize_init(struct nb_warmsize *w, unsigned floor, unsigned ceiling, uint64_t misses,
                      int64_t now_ms)
{
    w->floor = floor;
    w->ceiling = ceiling < floor ? floor : ceiling;
    w->target = floor;
    w->misses_seen = misses;
    w->quiet_since = now_ms;
}

void nb_warmsize_resume(struct nb_warmsize *w, unsigned target)
{
    w->target = target < w->floor ? w->floor : target > w->ceiling ? w->ceiling : target;
}

unsigned nb_warmsize_step(struct nb_warmsize *w, uint64_t misses, int64_t last_take_ms,
                          unsigned ready, int64_t idle_ms, int64_t now_ms)
{
    if (misses > w->misses_seen) {
        uint64_t more = misses - w->misses_seen, room = w->ceiling - w->target;
        w->target += (unsigned)(more < room ? more : room);
        w->quiet_since = now_ms;
    } else if (last_take_ms > w->quiet_since) {
        w->quiet_since = last_take_ms; /* taken from: not idle */
    } else if (ready > 0 && w->target > w->floor && now_ms - w->quiet_since >= idle_ms) {
        w->target--;
        w->quiet_since = now_ms;
    }
    w->misses_seen = misses; /* a counter that went back (a restart) starts over from here */
    if (w->target < w->floor)
        w->target = w->floor;
    if (w->target > w->ceiling)
        w->target = w->ceiling;
    return w->target;
}

unsigned nb_warmsize_cap(uint64_t budget, uint64_t avail, uint64_t reserve, unsigned pooled,
                         uint64_t per_sandbox)
{
    uint64_t cap = UINT_MAX;
    if (per_sandbox == 0)
        return UINT_MAX;
    if (budget > 0 && budget / per_sandbox < cap)
        cap = budget / per_sandbox;
    if (avail != UINT64_MAX) {
        uint64_t more = avail > reserve ? (avail - reserve) / per_sandbox : 0;
        if (pooled + more < cap)
            cap = pooled + more;
    }
    return (unsigned)cap;
}

void nb_warmsize_fit(unsigned *want, size_t n, unsigned total)
{
    for (size_t i = 0; i < n; i++) {
        if (want[i] > total)
            want[i] = total;
        total -= want[i];
    }
}
