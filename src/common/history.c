/*
 * history.c - see history.h.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "history.h"

struct nb_history *nb_history;
static struct nb_history mapped;

size_t nb_history_ring_bytes(uint32_t cap)
{
    return NB_HRING_HEAD + (size_t)cap * sizeof(struct nb_hsample);
}

void nb_history_init(struct nb_history *h, void *mem, uint32_t nslots, uint32_t cap,
                     unsigned interval)
{
    h->nslots = mem != NULL ? nslots : 0;
    h->cap = cap;
    h->interval = interval;
    h->ring_bytes = nb_history_ring_bytes(cap);
    h->map_len = (size_t)h->nslots * h->ring_bytes;
    h->rings = mem;
}

int nb_history_map(uint32_t nslots, uint32_t cap, unsigned interval, char *err, size_t errlen)
{
    size_t len = (size_t)nslots * nb_history_ring_bytes(cap);
    void *p = NULL;

    if (cap > 0 && nslots > 0) {
        /* anonymous pages are zero: every ring starts empty */
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            snprintf(err, errlen, "cannot map the metrics history (%zu bytes): %s", len,
                     strerror(errno));
            return -1;
        }
    }
    nb_history_init(&mapped, p, nslots, cap, interval);
    nb_history = &mapped;
    return 0;
}

void nb_history_unmap(void)
{
    if (nb_history != NULL && nb_history->rings != NULL)
        munmap(nb_history->rings, nb_history->map_len);
    nb_history = NULL;
}

static struct nb_hring *ring_of(const struct nb_history *h, uint32_t i)
{
    if (h == NULL || h->cap == 0 || h->rings == NULL || i >= h->nslots)
        return NULL;
    return (struct nb_hring *)(void *)(h->rings + (size_t)i * h->ring_bytes);
}

static struct nb_hsample *samples_of(struct nb_hring *r)
{
    return (struct nb_hsample *)(void *)(r + 1);
}

static int ring_is(const struct nb_hring *r, uint32_t gen, const char *id)
{
    return r->count > 0 && r->gen == gen && strncmp(r->id, id, sizeof(r->id)) == 0;
}

void nb_history_clear(struct nb_history *h, uint32_t i)
{
    struct nb_hring *r = ring_of(h, i);
    if (r != NULL && (r->count > 0 || r->id[0] != '\0'))
        memset(r, 0, h->ring_bytes);
}

/* Hundredths of a percent of one CPU: used usec of CPU over dt_ms of time. */
static uint32_t centi_of(uint64_t used_usec, int64_t dt_ms)
{
    double c;
    if (dt_ms <= 0)
        return 0;
    c = (double)used_usec / ((double)dt_ms * 1000.0) * 10000.0;
    return c > 4e9 ? 4000000000u : (uint32_t)(c + 0.5);
}

void nb_history_add(struct nb_history *h, uint32_t i, uint32_t gen, const char *id, int64_t created,
                    int64_t t_ms, uint64_t cpu_usec, uint64_t mem, uint64_t disk,
                    uint64_t disk_total)
{
    struct nb_hring *r = ring_of(h, i);
    struct nb_hsample *s;
    uint64_t used;
    int64_t dt;

    if (r == NULL)
        return;
    if (!ring_is(r, gen, id)) {
        memset(r, 0, h->ring_bytes);
        r->gen = gen;
        snprintf(r->id, sizeof(r->id), "%s", id);
    }
    if (r->count > 0) {
        const struct nb_hsample *last = &samples_of(r)[(r->next + h->cap - 1) % h->cap];
        used = cpu_usec >= last->cpu_usec ? cpu_usec - last->cpu_usec : 0;
        dt = t_ms - last->t_ms;
    } else {
        used = cpu_usec;
        dt = t_ms - created * 1000;
    }
    s = &samples_of(r)[r->next];
    memset(s, 0, sizeof(*s));
    s->t_ms = t_ms;
    s->cpu_usec = cpu_usec;
    s->mem = mem;
    s->disk = disk;
    s->cpu_centi = centi_of(used, dt);
    r->disk_total = disk_total;
    r->next = (r->next + 1) % h->cap;
    if (r->count < h->cap)
        r->count++;
}

size_t nb_history_read(const struct nb_history *h, uint32_t i, uint32_t gen, const char *id,
                       int64_t start, int64_t end, struct nb_hsample *out, size_t max,
                       uint64_t *disk_total)
{
    struct nb_hring *r = ring_of(h, i);
    size_t n = 0;

    if (disk_total != NULL)
        *disk_total = 0;
    if (r == NULL || !ring_is(r, gen, id))
        return 0;
    if (disk_total != NULL)
        *disk_total = r->disk_total;
    for (uint32_t k = 0; k < r->count && n < max; k++) {
        const struct nb_hsample *s = &samples_of(r)[(r->next + h->cap - r->count + k) % h->cap];
        int64_t t = s->t_ms / 1000;
        if (t >= start && t <= end)
            out[n++] = *s;
    }
    return n;
}
