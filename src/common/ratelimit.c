/*
 * ratelimit.c - see ratelimit.h. A slot is claimed like an entry of the
 * metrics' error table: 0 -> 1 by compare-and-swap, the name written, then
 * 2 with release order; readers compare names only in state 2.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ratelimit.h"

int nb_rate_parse(const char *rate, uint32_t *burst, int64_t *interval_ns)
{
    uint32_t n = 0;
    size_t i = 0;
    if (rate == NULL)
        return -1;
    while (rate[i] >= '0' && rate[i] <= '9' && i < 7)
        n = n * 10 + (uint32_t)(rate[i++] - '0');
    if (i == 0 || i > 6 || n == 0)
        return -1;
    if (!strcmp(rate + i, "r/s"))
        *interval_ns = 1000000000LL / n;
    else if (!strcmp(rate + i, "r/m"))
        *interval_ns = 60000000000LL / n;
    else
        return -1;
    *burst = n;
    return 0;
}

int64_t nb_rate_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* FNV-1a of the name: where its probe starts. */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

/* The slot of name, claimed if it has none yet; NULL when the table is full. */
static struct nb_rate_slot *slot_of(struct nb_rate_table *t, const char *name)
{
    uint32_t h = name_hash(name);
    for (uint32_t i = 0; i < NB_RATE_SLOTS; i++) {
        struct nb_rate_slot *s = &t->slot[(h + i) % NB_RATE_SLOTS];
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st == 0) {
            uint32_t expect = 0;
            if (__atomic_compare_exchange_n(&s->state, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                snprintf(s->name, sizeof(s->name), "%s", name);
                __atomic_store_n(&s->state, 2, __ATOMIC_RELEASE);
                return s;
            }
            st = expect;
        }
        /* another worker is writing a name here: a few instructions' wait */
        for (int spin = 0; st == 1 && spin < 100000; spin++)
            st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st == 2 && !strcmp(s->name, name))
            return s;
    }
    return NULL;
}

int nb_rate_take(struct nb_rate_table *t, const char *name, const char *rate, int64_t now_ns,
                 int64_t *retry_ms)
{
    struct nb_rate_slot *s;
    uint32_t burst;
    int64_t iv, tat, next;

    *retry_ms = 0;
    if (t == NULL || name == NULL || name[0] == '\0' || rate == NULL || rate[0] == '\0' ||
        nb_rate_parse(rate, &burst, &iv) != 0)
        return 1;
    s = slot_of(t, name);
    if (s == NULL) {
        __atomic_fetch_add(&t->full, 1, __ATOMIC_RELAXED);
        return 1;
    }
    tat = __atomic_load_n(&s->tat_ns, __ATOMIC_RELAXED);
    for (;;) {
        /* an empty bucket's time is now; a full one lets burst requests by */
        next = (tat > now_ns ? tat : now_ns) + iv;
        if (next - now_ns > (int64_t)burst * iv) {
            /* over: one more passes once the bucket's time is back in reach */
            *retry_ms = (next - now_ns - (int64_t)burst * iv + 999999) / 1000000;
            return 0;
        }
        if (__atomic_compare_exchange_n(&s->tat_ns, &tat, next, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return 1;
    }
}
