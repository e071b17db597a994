/*
 * cmd_files.c - "cp": copy a file into a sandbox (LOCAL ID:PATH) or out of
 * it (ID:PATH LOCAL).
 *
 * Through the files API (PUT/GET /sandbox/{id}/files?path=), so tmpfs paths
 * such as /workspace work. A relative PATH is taken from the workspace.
 * As cp(1) does, a local directory (`cp ID:/workspace/out.txt .`) or a
 * sandbox path ending in "/" as the destination means "in there, under the
 * source's name". Files are held in memory on the way, up to max_answer
 * bytes.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "cli.h"
#include "client.h"
#include "url.h"

struct cp_plan {
    int put;            /* 1: local -> sandbox, 0: sandbox -> local */
    char id[37];        /* the sandbox (resolved once the API exists) */
    const char *remote; /* absolute path in the sandbox */
    const char *local;  /* local path, "-" for stdin/stdout */
};

/* "ID:PATH" -> 1 with id/path split; 0 for a local path. */
static int split_remote(const char *arg, char id[37], const char **path)
{
    const char *colon = strchr(arg, ':'), *slash = strchr(arg, '/');
    size_t n;

    if (colon == NULL || colon == arg || (slash != NULL && slash < colon))
        return 0; /* "./a:b" and "/x:y" are local paths */
    n = (size_t)(colon - arg);
    if (n > 36)
        return 0;
    memcpy(id, arg, n);
    id[n] = '\0';
    *path = colon + 1;
    return 1;
}

/* The last name of path ("a/b/" -> "b"); *len is 0 when there is none. */
static const char *last_name(const char *path, size_t *len)
{
    size_t end = strlen(path), start;

    while (end > 0 && path[end - 1] == '/')
        end--;
    for (start = end; start > 0 && path[start - 1] != '/'; start--)
        ;
    *len = end - start;
    return path + start;
}

/* dir + "/" + the last name of from, into b. */
static void join_name(struct nb_buf *b, const char *dir, const char *from)
{
    size_t n, d = strlen(dir);
    const char *name = last_name(from, &n);

    nb_buf_printf(b, "%s%s%.*s", dir, d > 0 && dir[d - 1] == '/' ? "" : "/", (int)n, name);
}

/* "/sandbox/ID/files?path=REMOTE" into b. */
static void files_url(struct nb_buf *b, const struct cp_plan *p)
{
    nb_buf_printf(b, "/sandbox/");
    nb_url_escape(b, p->id);
    nb_buf_printf(b, "/files?path=");
    nb_url_escape(b, p->remote);
}

static int cp_put(struct client *c, const struct cp_plan *p)
{
    FILE *f = strcmp(p->local, "-") ? fopen(p->local, "re") : stdin;
    struct client_req req = {.method = "PUT",
                             .content_type = "application/octet-stream",
                             .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf data, path;
    char chunk[65536];
    size_t n;
    int rc = CLI_OK;

    if (f == NULL) {
        fprintf(stderr, "nanobox: cannot read %s: %s\n", p->local, strerror(errno));
        return CLI_FAIL;
    }
    nb_buf_init(&data, c->max_answer);
    while (rc == CLI_OK && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if (nb_buf_append(&data, chunk, n) != NB_OK) {
            fprintf(stderr, "nanobox: %s is larger than %zu bytes\n", p->local, c->max_answer);
            rc = CLI_FAIL;
        }
    if (rc == CLI_OK && ferror(f)) {
        fprintf(stderr, "nanobox: cannot read %s: %s\n", p->local, strerror(errno));
        rc = CLI_FAIL;
    }
    if (f != stdin)
        fclose(f);
    if (rc != CLI_OK) {
        nb_buf_free(&data);
        return rc;
    }
    nb_buf_init(&path, 1u << 20);
    files_url(&path, p);
    req.path = path.data;
    req.body = data.data ? data.data : "";
    req.body_len = data.len;
    rc = client_call(c, &req, &a);
    if (rc == CLI_OK && c->json)
        client_print_raw(&a);
    client_answer_free(&a);
    nb_buf_free(&path);
    nb_buf_free(&data);
    return rc;
}

/* The files API's answer for a directory: {"path", "type": "dir", "entries": [...]}.
 * A file's bytes may be JSON too, so the shape is checked, not just the parse. */
static int is_listing(yajl_val j)
{
    const char *k_type[] = {"type", NULL}, *k_entries[] = {"entries", NULL};
    yajl_val t = j ? yajl_tree_get(j, k_type, yajl_t_string) : NULL;
    const char *type = t ? YAJL_GET_STRING(t) : NULL;
    return type != NULL && !strcmp(type, "dir") &&
           yajl_tree_get(j, k_entries, yajl_t_array) != NULL;
}

static int cp_get(struct client *c, const struct cp_plan *p)
{
    struct client_req req = {.method = "GET", .raw_answer = 1, .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path;
    FILE *f;
    int rc;

    nb_buf_init(&path, 1u << 20);
    files_url(&path, p);
    req.path = path.data;
    rc = client_call(c, &req, &a);
    nb_buf_free(&path);
    if (rc != CLI_OK)
        goto out;
    if (is_listing(a.json)) {
        /* a directory answers its JSON listing, not bytes */
        fprintf(stderr, "nanobox: %s:%s is a directory; cp copies single files\n", p->id,
                p->remote);
        rc = CLI_FAIL;
        goto out;
    }
    f = strcmp(p->local, "-") ? fopen(p->local, "we") : stdout;
    if (f == NULL || (a.body.len > 0 && fwrite(a.body.data, 1, a.body.len, f) != a.body.len) ||
        (f != stdout ? fclose(f) : fflush(f)) != 0) {
        fprintf(stderr, "nanobox: cannot write %s: %s\n", p->local, strerror(errno));
        rc = CLI_FAIL;
    }
out:
    client_answer_free(&a);
    return rc;
}

int cmd_cp(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct cp_plan plan = {0};
    struct nb_buf joined;
    struct stat st;
    char other[37];
    const char *ignored;
    size_t n;
    int rc, src_remote, dst_remote;

    nb_buf_init(&joined, 1u << 20);
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
    /* a destination that is a directory takes the source's name, as in cp(1) */
    if (plan.put) {
        n = strlen(plan.remote);
        if (n > 0 && plan.remote[n - 1] == '/') {
            last_name(plan.local, &n);
            if (!strcmp(plan.local, "-") || n == 0) {
                rc = cli_usage_error(cmd, "%s is a directory: name the file to write in it",
                                     pos.v[1]);
                goto out;
            }
            join_name(&joined, plan.remote, plan.local);
            plan.remote = joined.data;
        }
    } else if (strcmp(plan.local, "-") != 0 && stat(plan.local, &st) == 0 && S_ISDIR(st.st_mode)) {
        last_name(plan.remote, &n);
        if (n > 0) {
            join_name(&joined, plan.local, plan.remote);
            plan.local = joined.data;
        }
    }
    rc = plan.put ? cp_put(c, &plan) : cp_get(c, &plan);
out:
    nb_buf_free(&joined);
    free(pos.v);
    return rc;
}
