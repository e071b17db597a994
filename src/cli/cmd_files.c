/*
 * cmd_files.c - "cp": copy a file into a sandbox (LOCAL ID:PATH) or out of
 * it (ID:PATH LOCAL).
 *
 * The server has no files API yet (/sandbox/{id}/files is a later issue), so
 * after checking the command line this says so and exits 2. When the API
 * lands, cp_put and cp_get below get their HTTP calls; the argument handling
 * stays as it is.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "client.h"

struct cp_plan {
    int put;              /* 1: local -> sandbox, 0: sandbox -> local */
    char id[37];          /* the sandbox (resolved once the API exists) */
    const char *remote;   /* absolute path in the sandbox */
    const char *local;    /* local path, "-" for stdin/stdout */
};

/* "ID:PATH" -> 1 with id/path split; 0 for a local path. */
static int split_remote(const char *arg, char id[37], const char **path)
{
    const char *colon = strchr(arg, ':'), *slash = strchr(arg, '/');
    size_t n;

    if (colon == NULL || colon == arg || (slash != NULL && slash < colon))
        return 0;                      /* "./a:b" and "/x:y" are local paths */
    n = (size_t)(colon - arg);
    if (n > 36)
        return 0;
    memcpy(id, arg, n);
    id[n] = '\0';
    *path = colon + 1;
    return 1;
}

static int cp_not_served(void)
{
    fprintf(stderr, "nanobox: cp is not supported by this server yet (needs the files API)\n");
    return CLI_USAGE;
}

static int cp_put(struct client *c, const struct cp_plan *p)
{
    return cp_not_served();
}

static int cp_get(struct client *c, const struct cp_plan *p)
{
    return cp_not_served();
}

int cmd_cp(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct cp_plan plan = {0};
    char other[37];
    const char *ignored;
    int rc, src_remote, dst_remote;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 2) {
        rc = cli_usage_error(cmd, "give a SOURCE and a DESTINATION, one of them ID:PATH");
        goto out;
    }
    src_remote = split_remote(pos.v[0], plan.id, &plan.remote);
    dst_remote = src_remote ? split_remote(pos.v[1], other, &ignored)
                            : split_remote(pos.v[1], plan.id, &plan.remote);
    if (src_remote == dst_remote) {
        rc = cli_usage_error(cmd, "exactly one of SOURCE and DESTINATION must be ID:PATH");
        goto out;
    }
    plan.put = dst_remote;
    plan.local = plan.put ? pos.v[0] : pos.v[1];
    rc = plan.put ? cp_put(c, &plan) : cp_get(c, &plan);
out:
    free(pos.v);
    return rc;
}
