/*
 * clock.h - the two clocks nanobox reads, one helper each.
 *
 * Monotonic time measures intervals and deadlines (timeouts, budgets,
 * ticks): it never jumps when the wall clock is set. Realtime (unix
 * seconds) is for what is stored or shown: a sandbox's created/expires in
 * the table and the API, a forwarder's --expires, a process's start time.
 * Mixing them is the bug to avoid, so each name says which clock it is.
 *
 * Header-only (static inline) because nanobox-init links nothing but libc
 * and each helper is one system call.
 */
#ifndef NB_CLOCK_H
#define NB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds on the monotonic clock (since an arbitrary start). */
static inline int64_t nb_clock_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whole seconds on the monotonic clock. */
static inline int64_t nb_clock_mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

/* Unix seconds (wall clock). */
static inline int64_t nb_clock_real_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

/* Unix milliseconds (wall clock). */
static inline int64_t nb_clock_real_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
