/*
 * usage.c - see usage.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgstat.h"
#include "clock.h"
#include "buf.h"
#include "isolation.h"
#include "log.h"
#include "usage.h"

/* What the pass reads of a slot, with the lock held, to sample it without. */
struct probe {
    uint32_t index, gen;
    char id[NB_ID_LEN + 1];
    char cid[NB_CID_LEN + 1];
    pid_t pid;
    int64_t created;
    unsigned lifecycle;
};

int nb_usage_sample(struct nb_app *a)
{
    struct probe *list;
    size_t n = 0;
    int sampled = 0;

    if (nb_history == NULL || nb_history->cap == 0)
        return 0;
    list = nb_xcalloc(a->table.nslots, sizeof(*list));
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        if (s->state == NB_SLOT_FREE) {
            nb_history_clear(nb_history, i); /* an end the destroy did not clear */
            continue;
        }
        if (s->state != NB_SLOT_RUNNING || s->init_pid <= 0 || s->container_id[0] == '\0')
            continue;
        list[n].index = i;
        list[n].gen = s->generation;
        snprintf(list[n].id, sizeof(list[n].id), "%s", s->id);
        snprintf(list[n].cid, sizeof(list[n].cid), "%s", s->container_id);
        list[n].pid = s->init_pid;
        list[n].created = s->created;
        list[n].lifecycle = s->lifecycle;
        n++;
    }
    nb_table_unlock(&a->table);

    for (size_t k = 0; k < n; k++) {
        struct probe *p = &list[k];
        struct nb_cgstat st;
        char err[256];
        int64_t used = -1, size = -1, t_ms;
        struct nb_slot *s;
        if (nb_cgstat_read(NB_CGSTAT_PROC_ROOT, NB_CGSTAT_CG_ROOT, p->pid, p->cid, &st, err,
                           sizeof(err)) != 0) {
            nb_debug("sandbox %s: no usage sample: %s", p->id, err);
            continue;
        }
        nb_cgstat_fs(NB_CGSTAT_PROC_ROOT, p->pid, nb_isolation_workspace(&a->conf, p->lifecycle),
                     &used, &size);
        t_ms = nb_clock_real_ms();
        /* still the sandbox read, still running: its ring */
        nb_table_lock(&a->table);
        s = &a->table.slots[p->index];
        if (s->generation == p->gen && s->state == NB_SLOT_RUNNING && !strcmp(s->id, p->id)) {
            nb_history_add(nb_history, p->index, p->gen, p->id, p->created, t_ms,
                           st.cpu_usage_usec < 0 ? 0 : (uint64_t)st.cpu_usage_usec,
                           st.mem_current < 0 ? 0 : (uint64_t)st.mem_current,
                           used < 0 ? 0 : (uint64_t)used, size < 0 ? 0 : (uint64_t)size);
            sampled++;
        }
        nb_table_unlock(&a->table);
    }
    free(list);
    return sampled;
}

size_t nb_usage_history(struct nb_app *a, const struct nb_slot *slot, int64_t start, int64_t end,
                        struct nb_hsample *out, size_t max, uint64_t *disk_total)
{
    size_t n = 0;
    struct nb_slot *s;

    if (disk_total != NULL)
        *disk_total = 0;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, slot->id);
    if (s != NULL && s->generation == slot->generation)
        n = nb_history_read(nb_history, (uint32_t)(s - a->table.slots), s->generation, s->id, start,
                            end, out, max, disk_total);
    nb_table_unlock(&a->table);
    return n;
}

uint32_t nb_usage_capacity(void)
{
    return nb_history != NULL && nb_history->rings != NULL ? nb_history->cap : 0;
}
