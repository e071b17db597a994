/*
 * usage.h - each sandbox's usage history (history.h): the reaper's pass
 * that samples every running sandbox's cgroup and workspace, and the read
 * of one sandbox's samples in a range for the API (GET
 * /sandbox/{id}/metrics?start=&end=, E2B's getMetrics).
 */
#ifndef NB_USAGE_H
#define NB_USAGE_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "history.h"

/*
 * One sample of every RUNNING sandbox (a paused one is frozen: its last
 * sample stands), and the rings of slots whose sandbox ended emptied.
 * Returns the number of sandboxes sampled.
 */
int nb_usage_sample(struct nb_app *a);

/*
 * The samples of the sandbox slot (a copy nb_sandbox_get made) whose time
 * is in [start, end] unix seconds, oldest first, at most max: how many.
 * disk_total (may be NULL): the workspace's size at the last sample.
 */
size_t nb_usage_history(struct nb_app *a, const struct nb_slot *slot, int64_t start, int64_t end,
                        struct nb_hsample *out, size_t max, uint64_t *disk_total);

/* Samples the ring of one sandbox holds at most (metrics_history); 0: none kept. */
uint32_t nb_usage_capacity(void);

#endif
