/*
 * cmd_files.c - a sandbox's files: "cp" (into a sandbox, LOCAL ID:PATH, or
 * out of it, ID:PATH LOCAL; -r for directories), "ls ID [PATH]",
 * "rm ID:PATH...", "mkdir ID PATH..." and "mv ID FROM TO".
 *
 * Through the files API (/sandbox/{id}/files, see docs/API.md), so tmpfs
 * paths such as /workspace work. A relative PATH is taken from the
 * workspace. As cp(1) and mv(1) do, a destination that is a directory (a
 * local one, a sandbox path ending in "/", or one the files API says is a
 * directory) means "in there, under the source's name". Each file is held
 * in memory on the way, up to max_answer bytes. A directory (-r) goes as
 * one tar in one request (/sandbox/{id}/files/archive), made and extracted
 * here with libarchive (tarball.c), also held in memory up to max_answer.
 *
 * "rm" of files takes ID:PATH because "nanobox rm ID" destroys the sandbox:
 * cmd_rm (cmd_sandbox.c) hands ID:PATH arguments over to files_rm.
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
#include "json.h"
#include "output.h"
#include "tarball.h"
#include "url.h"

#define FILES_LS_DEFAULT "/workspace" /* the server's default workspace */

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

/* dir + "/" + the last name of from, as a new string. */
static char *join_name(const char *dir, const char *from)
{
    struct nb_buf b;
    size_t n, d = strlen(dir);
    const char *name = last_name(from, &n);

    nb_buf_init(&b, (size_t)-1);
    nb_buf_printf(&b, "%s%s%.*s", dir, d > 0 && dir[d - 1] == '/' ? "" : "/", (int)n, name);
    return nb_buf_steal(&b);
}

static int ends_with_slash(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && s[n - 1] == '/';
}

/* "/sandbox/ID/files<suffix>[?path=REMOTE<extra>]" into b. */
static void files_url(struct nb_buf *b, const char *id, const char *suffix, const char *remote,
                      const char *extra)
{
    sandbox_path(b, id, "/files");
    nb_buf_printf(b, "%s", suffix);
    if (remote != NULL) {
        nb_buf_printf(b, "?path=");
        nb_url_escape(b, remote);
        nb_buf_printf(b, "%s", extra != NULL ? extra : "");
    }
}

/* The files API's answer for a directory: {"path", "type": "dir", "entries": [...]}.
 * A file's bytes may be JSON too, so the shape is checked, not just the parse. */
static int is_listing(yajl_val j)
{
    return !strcmp(out_str(j, "type"), "dir") && out_get(j, "entries", yajl_t_array) != NULL;
}

enum remote_kind { R_ERR = -1, R_NONE, R_FILE, R_DIR };

/* What PATH is in the sandbox: a directory, a file, nothing (or a place
 * nothing can be written: the write will say why), or R_ERR after saying
 * why. A file's bytes are not fetched (client_req.probe). */
static enum remote_kind remote_kind(struct client *c, const char *id, const char *path)
{
    struct client_req req = {.method = "GET",
                             .raw_answer = 1,
                             .probe = 1,
                             .keep_errors = 1,
                             .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf url;
    enum remote_kind k;

    files_url(&url, id, "", path, NULL);
    req.path = url.data;
    if (client_call(c, &req, &a) == CLI_OK)
        k = is_listing(a.json) ? R_DIR : R_FILE;
    else if (a.status == 404 || a.status == 409)
        k = R_NONE;
    else
        k = a.status >= 300 ? (client_report(c, &a), R_ERR) : R_ERR;
    client_answer_free(&a);
    nb_buf_free(&url);
    return k;
}

/* A JSON body {k1: v1[, k2: v2]} POSTed to /files<suffix>; the answer printed with --json. */
static int files_post(struct client *c, const char *id, const char *suffix, const char *k1,
                      const char *v1, const char *k2, const char *v2)
{
    struct client_req req = {.method = "POST", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf url;
    yajl_gen g = nb_json_gen();
    char *body;
    int rc;

    yajl_gen_map_open(g);
    nb_json_kv_str(g, k1, v1);
    if (k2 != NULL)
        nb_json_kv_str(g, k2, v2);
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    files_url(&url, id, suffix, NULL, NULL);
    req.path = url.data;
    if ((rc = client_call(c, &req, &a)) == CLI_OK && c->json)
        client_print_raw(&a);
    client_answer_free(&a);
    nb_buf_free(&url);
    free(body);
    return rc;
}

/* ------------------------------------------------------------------- cp */

struct cp_run {
    struct client *c;
    const char *id;
    int recursive;
    int failures; /* files skipped (links, devices), the rest copied */
};

static int put_file(struct cp_run *r, const char *local, const char *remote, unsigned mode)
{
    struct client_req req = {.method = "PUT",
                             .content_type = "application/octet-stream",
                             .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf data, url;
    char extra[32] = "";
    int rc;

    nb_buf_init(&data, r->c->max_answer);
    if ((rc = cli_read_bytes(local, &data)) != CLI_OK) {
        nb_buf_free(&data);
        return rc;
    }
    if (mode != 0)
        snprintf(extra, sizeof(extra), "&mode=%04o", mode & 07777);
    files_url(&url, r->id, "", remote, extra);
    req.path = url.data;
    req.body = data.data ? data.data : "";
    req.body_len = data.len;
    if ((rc = client_call(r->c, &req, &a)) == CLI_OK && r->c->json)
        client_print_raw(&a);
    client_answer_free(&a);
    nb_buf_free(&url);
    nb_buf_free(&data);
    return rc;
}

/* The local directory, as one tar, extracted under remote (one request). */
static int put_archive(struct cp_run *r, const char *local, const char *remote)
{
    struct client_req req = {
        .method = "PUT", .content_type = "application/x-tar", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf tar, url;
    int rc;

    nb_buf_init(&tar, r->c->max_answer);
    if (tar_pack_dir(local, &tar, &r->failures) != 0) {
        nb_buf_free(&tar);
        return CLI_FAIL;
    }
    files_url(&url, r->id, "/archive", remote, NULL);
    req.path = url.data;
    req.body = tar.data ? tar.data : "";
    req.body_len = tar.len;
    if ((rc = client_call(r->c, &req, &a)) == CLI_OK && r->c->json)
        client_print_raw(&a);
    client_answer_free(&a);
    nb_buf_free(&url);
    nb_buf_free(&tar);
    return rc;
}

/* local (a file, or with -r a directory, as stat saw it) to remote. */
static int put_one(struct cp_run *r, const char *local, const char *remote, const struct stat *st)
{
    if (!S_ISDIR(st->st_mode))
        return put_file(r, local, remote, (unsigned)st->st_mode & 0777);
    if (!r->recursive) {
        fprintf(stderr, "nanobox: %s is a directory: copy it with cp -r\n", local);
        return CLI_FAIL;
    }
    return put_archive(r, local, remote);
}

static int write_local(const char *local, const struct nb_buf *b)
{
    FILE *f = strcmp(local, "-") ? fopen(local, "we") : stdout;

    if (f == NULL || (b->len > 0 && fwrite(b->data, 1, b->len, f) != b->len) ||
        (f != stdout ? fclose(f) : fflush(f)) != 0) {
        fprintf(stderr, "nanobox: cannot write %s: %s\n", local, strerror(errno));
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* remote (a file) to local; a directory is get_archive's. */
static int get_file(struct cp_run *r, const char *remote, const char *local)
{
    struct client_req req = {.method = "GET", .raw_answer = 1, .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf url;
    int rc;

    files_url(&url, r->id, "", remote, NULL);
    req.path = url.data;
    rc = client_call(r->c, &req, &a);
    nb_buf_free(&url);
    if (rc == CLI_OK && is_listing(a.json)) {
        /* a directory answers its JSON listing, not bytes */
        fprintf(stderr, "nanobox: %s:%s is a directory: copy it with cp -r\n", r->id, remote);
        rc = CLI_FAIL;
    } else if (rc == CLI_OK) {
        rc = write_local(local, &a.body);
    }
    client_answer_free(&a);
    return rc;
}

/* With -r: remote as one tar (one request), extracted into local (made if
 * missing), or to stdout as it is for "-". CP_NOT_DIR when remote is no
 * directory (the caller copies the file), else CLI_OK or CLI_FAIL. */
#define CP_NOT_DIR (-2)
static int get_archive(struct cp_run *r, const char *remote, const char *local)
{
    struct client_req req = {
        .method = "GET", .raw_answer = 1, .keep_errors = 1, .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf url;
    int rc;

    files_url(&url, r->id, "/archive", remote, NULL);
    req.path = url.data;
    rc = client_call(r->c, &req, &a);
    nb_buf_free(&url);
    if (a.status == 409) { /* not a directory: a file, copied as one */
        client_answer_free(&a);
        return CP_NOT_DIR;
    }
    if (rc != CLI_OK || a.status >= 300) {
        rc = a.status >= 300 ? client_report(r->c, &a) : CLI_FAIL;
    } else if (!strcmp(local, "-")) {
        rc = write_local(local, &a.body);
    } else if (mkdir(local, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "nanobox: cannot create %s: %s\n", local, strerror(errno));
        rc = CLI_FAIL;
    } else {
        rc = tar_unpack(a.body.data ? a.body.data : "", a.body.len, local, &r->failures) == 0
                 ? CLI_OK
                 : CLI_FAIL;
    }
    client_answer_free(&a);
    return rc;
}

/* local to remote: into it under local's name if remote is a directory. */
static int cp_in(struct cp_run *r, const char *local, const char *remote, const char *dest_arg)
{
    struct stat st = {.st_mode = S_IFREG}; /* "-": stdin, a file */
    enum remote_kind k = R_NONE;
    char *joined = NULL;
    size_t n;
    int rc;

    if (strcmp(local, "-") != 0 && stat(local, &st) != 0) {
        fprintf(stderr, "nanobox: cannot read %s: %s\n", local, strerror(errno));
        return CLI_FAIL;
    }
    if (S_ISDIR(st.st_mode) && !r->recursive)
        return put_one(r, local, remote, &st); /* which says why not */
    /* a destination that is a directory takes the source's name, as in cp(1) */
    if (ends_with_slash(remote) || (k = remote_kind(r->c, r->id, remote)) == R_DIR) {
        last_name(local, &n);
        if (!strcmp(local, "-") || n == 0) {
            fprintf(stderr, "nanobox: %s is a directory: name the file to write in it\n", dest_arg);
            return CLI_FAIL;
        }
        remote = joined = join_name(remote, local);
    } else if (k == R_ERR) {
        return CLI_FAIL;
    }
    rc = put_one(r, local, remote, &st);
    free(joined);
    return rc;
}

int cmd_cp(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    int recursive = 0;
    const struct args_opt opts[] = {{"-r", ARG_FLAG, &recursive},
                                    {"-R", ARG_FLAG, &recursive},
                                    {"--recursive", ARG_FLAG, &recursive}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct cp_run run = {.c = c};
    char arg_id[37], other[37], id[37], *joined = NULL;
    const char *remote, *local, *ignored;
    struct stat st;
    int rc, src_remote, dst_remote;
    size_t n;

    if ((rc = args_parse(c, cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &pos)) !=
        ARGS_GO_ON)
        goto out;
    if (pos.n != 2) {
        rc = cli_usage_error(cmd, "give a SOURCE and a DESTINATION, one of them ID:PATH");
        goto out;
    }
    src_remote = split_remote(pos.v[0], arg_id, &remote);
    dst_remote = src_remote ? split_remote(pos.v[1], other, &ignored)
                            : split_remote(pos.v[1], arg_id, &remote);
    if (src_remote == dst_remote) {
        rc = cli_usage_error(cmd, "exactly one of SOURCE and DESTINATION must be ID:PATH");
        goto out;
    }
    local = dst_remote ? pos.v[0] : pos.v[1];
    if (dst_remote && !strcmp(local, "-") && ends_with_slash(remote)) {
        rc = cli_usage_error(cmd, "%s is a directory: name the file to write in it", pos.v[1]);
        goto out;
    }
    if ((rc = sandbox_resolve_id(c, cmd, arg_id, id)) != CLI_OK)
        goto out;
    run.id = id;
    run.recursive = recursive;
    if (dst_remote) {
        rc = cp_in(&run, local, remote, pos.v[1]);
    } else {
        /* into a local directory under the source's name */
        if (strcmp(local, "-") != 0 && stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
            last_name(remote, &n);
            if (n > 0)
                local = joined = join_name(local, remote);
        }
        rc = recursive ? get_archive(&run, remote, local) : CP_NOT_DIR;
        if (rc == CP_NOT_DIR)
            rc = get_file(&run, remote, local);
    }
    if (rc == CLI_OK && run.failures > 0)
        rc = CLI_FAIL;
out:
    free(joined);
    free(pos.v);
    return rc;
}

/* ------------------------------------------------------- ls, mkdir, mv, rm */

/* "ID PATH..." or "ID:PATH ...": the sandbox, resolved, and where its paths
 * start in pos (one past the ID, or the ID:PATH itself, path split off). */
static int files_target(struct client *c, const struct cli_cmd *cmd, struct args_pos *pos,
                        char id[37], int *first)
{
    const char *path;
    char arg_id[37];

    *first = 1;
    if (split_remote(pos->v[0], arg_id, &path)) {
        pos->v[0] += path - pos->v[0]; /* the PATH of ID:PATH */
        *first = 0;
        return sandbox_resolve_id(c, cmd, arg_id, id);
    }
    return sandbox_resolve_id(c, cmd, pos->v[0], id);
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(out_str(*(const yajl_val *)a, "name"), out_str(*(const yajl_val *)b, "name"));
}

int files_ls(struct client *c, const struct cli_cmd *cmd, struct args_pos *pos)
{
    static const char *const hdr[] = {"TYPE", "SIZE", "MODE", "MODIFIED", "NAME"};
    struct client_req req = {
        .method = "GET", .raw_answer = 1, .probe = 1, .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf url = {0};
    struct out_table t;
    yajl_val entries, *sorted;
    const char *path;
    char id[37];
    int rc, first;

    if (pos->n > 2 || (pos->n == 2 && strchr(pos->v[0], ':') != NULL))
        return cli_usage_error(cmd, "give an ID and at most one PATH");
    if ((rc = files_target(c, cmd, pos, id, &first)) != CLI_OK)
        return rc;
    path = first < pos->n && pos->v[first][0] != '\0' ? pos->v[first] : FILES_LS_DEFAULT;
    files_url(&url, id, "", path, NULL);
    req.path = url.data;
    if ((rc = client_call(c, &req, &a)) != CLI_OK)
        goto out;
    if (!is_listing(a.json)) {
        fprintf(stderr, "nanobox: %s:%s is a file: ls lists directories\n", id, path);
        rc = CLI_FAIL;
        goto out;
    }
    if (c->json) {
        client_print_raw(&a);
        goto out;
    }
    entries = out_get(a.json, "entries", yajl_t_array);
    sorted = nb_xcalloc(entries->u.array.len + 1, sizeof(*sorted));
    memcpy(sorted, entries->u.array.values, entries->u.array.len * sizeof(*sorted));
    qsort(sorted, entries->u.array.len, sizeof(*sorted), entry_cmp);
    out_table_init(&t, 5, hdr);
    for (size_t i = 0; i < entries->u.array.len; i++) {
        yajl_val e = sorted[i];
        char size[32], when[32], *name;
        const char *type = out_str(e, "type");
        out_size(size, sizeof(size), out_int(e, "size", 0));
        out_time(when, sizeof(when), out_int(e, "mtime", 0));
        name = nb_xmalloc(strlen(out_str(e, "name")) + 2);
        snprintf(name, strlen(out_str(e, "name")) + 2, "%s%s", out_str(e, "name"),
                 !strcmp(type, "dir") ? "/" : "");
        out_table_row(&t, (const char *const[]){type, size, out_str(e, "mode"), when, name});
        free(name);
    }
    out_table_print(&t, stdout);
    out_table_free(&t);
    free(sorted);
    if (out_bool(a.json, "truncated"))
        fprintf(stderr, "nanobox: the listing stops at the files API's limit of entries\n");
out:
    client_answer_free(&a);
    nb_buf_free(&url);
    return rc;
}

int cmd_mkdir(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    char id[37];
    int rc, first;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n < 2 && !(pos.n == 1 && strchr(pos.v[0], ':') != NULL)) {
        rc = cli_usage_error(cmd, "give an ID and the PATHs to create");
        goto out;
    }
    if ((rc = files_target(c, cmd, &pos, id, &first)) != CLI_OK)
        goto out;
    for (int i = first; rc == CLI_OK && i < pos.n; i++)
        rc = files_post(c, id, "/mkdir", "path", pos.v[i], NULL, NULL);
out:
    free(pos.v);
    return rc;
}

int cmd_mv(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    const char *to;
    char id[37], *joined = NULL;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 3) {
        rc = cli_usage_error(cmd, "give an ID, FROM and TO");
        goto out;
    }
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;
    /* into a directory under FROM's name, as mv(1) */
    to = pos.v[2];
    if (ends_with_slash(to) || remote_kind(c, id, to) == R_DIR)
        to = joined = join_name(to, pos.v[1]);
    rc = files_post(c, id, "/move", "from", pos.v[1], "to", to);
out:
    free(joined);
    free(pos.v);
    return rc;
}

int files_rm(struct client *c, const struct cli_cmd *cmd, struct args_pos *pos, int recursive)
{
    int rc = CLI_OK;

    for (int i = 0; rc == CLI_OK && i < pos->n; i++) {
        struct client_req req = {.method = "DELETE", .timeout = CLIENT_CALL_TIMEOUT};
        struct client_answer a = {0};
        struct nb_buf url;
        const char *path;
        char arg_id[37], id[37];

        split_remote(pos->v[i], arg_id, &path);
        if ((rc = sandbox_resolve_id(c, cmd, arg_id, id)) != CLI_OK)
            break;
        files_url(&url, id, "", path, recursive ? "&recursive=1" : "");
        req.path = url.data;
        if ((rc = client_call(c, &req, &a)) == CLI_OK && c->json) {
            /* 204, no body: --json gets what was done */
            yajl_gen g = nb_json_gen();
            char *s;
            yajl_gen_map_open(g);
            nb_json_kv_str(g, "sandboxId", id);
            nb_json_kv_str(g, "path", path);
            nb_json_kv_bool(g, "deleted", 1);
            yajl_gen_map_close(g);
            s = nb_json_gen_take(g);
            printf("%s\n", s);
            free(s);
        }
        client_answer_free(&a);
        nb_buf_free(&url);
    }
    return rc;
}

int files_is_remote(const char *arg)
{
    char id[37];
    const char *path;
    return split_remote(arg, id, &path);
}
