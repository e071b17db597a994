/*
 * keysync.h - the API keys of a cluster, the same on every node
 * (docs/CLUSTER.md, "Keys"): each key a line under <prefix>keys/<name> in
 * etcd, and each node's keys file (keys.h) a copy the member process keeps
 * in step both ways. The workers read the file as always.
 */
#ifndef NB_KEYSYNC_H
#define NB_KEYSYNC_H

#include <stdint.h>
#include <sys/stat.h>

#include "etcd.h"
#include "keys.h"

struct nb_keysync {
    int synced_ok; /* synced holds the set last agreed with the cluster */
    struct nb_keys synced;
    int64_t rev;      /* etcd's revision when the keys were last read */
    int seen_have;    /* the file existed when last synced */
    struct stat seen; /* and looked like this */
};

/*
 * One round. The file changed since the last one (`nanobox keys add`, an
 * edit): what changed is put to (or deleted from) etcd. The first round
 * after a join adds the node's keys the cluster has not (the cluster's
 * line wins for a name both have). Then, when pull is set or something
 * was pushed, the cluster's keys are read and, if they differ, written
 * over the file (atomically, mode 0600). A file that does not parse is
 * left as it is and nothing is pushed (a half-edited file is not the
 * cluster's), and neither is a file that is gone (it is written again from
 * the cluster's keys). 1 the file was rewritten, 0 nothing to do, -1 etcd did not
 * answer.
 */
int nb_keysync_round(struct nb_keysync *ks, struct nb_etcd *e, const char *prefix, const char *path,
                     int pull);

void nb_keysync_free(struct nb_keysync *ks);

#endif
