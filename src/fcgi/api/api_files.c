/*
 * api_files.c - the files routes, over the files engine (files.c):
 *
 *   PUT    /sandbox/{id}/files?path=P[&mode=0644]   raw body -> 201 info
 *   GET    /sandbox/{id}/files?path=P               raw bytes, or a JSON
 *                                                   listing for a directory
 *   DELETE /sandbox/{id}/files?path=P[&recursive=1] 204
 *   POST   /sandbox/{id}/files/mkdir  {path}        201
 *   POST   /sandbox/{id}/files/move   {from, to}    200
 *   GET    /sandbox/{id}/files/archive?path=DIR     a tar of DIR (tarstream.c)
 *   PUT    /sandbox/{id}/files/archive?path=DIR     tar body -> 200 {entries, bytes}
 *   GET    /sandbox/{id}/files/watch?path=DIR[&recursive=1]  NDJSON: start, changes,
 *                                                   keepalives, until the client leaves
 *
 * What is here is HTTP: the query and body fields, the body streamed into
 * the engine and a file's bytes streamed out of it, the JSON answers. The
 * host never opens a path inside a sandbox: nanobox-init does, in the
 * sandbox's own mount namespace with the sandbox user's rights, so tmpfs
 * mounts are seen and a planted symlink can only lead elsewhere inside the
 * same sandbox. Paths are checked by nb_files_path first (relative ones are
 * taken from the workspace; NUL bytes, "." and ".." components and
 * over-long paths are refused with 400) and again by the agent.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "files.h"
#include "exec.h"
#include "json.h"
#include "sandbox.h"
#include "tarstream.h"

/* The ?path= of the request, resolved; -1 with ae set. */
static int files_query_path(struct nb_app *a, struct nb_req *r, const char *key, char *out,
                            size_t outlen, struct nb_apierr *ae)
{
    struct nb_buf q;
    int rc;
    nb_buf_init(&q, NB_QUERY_MAX);
    rc = nb_http_query_bytes(r, key, &q);
    if (rc == -1)
        nb_apierr_set(ae, NB_E_INVALID, "bad_path", "the query parameter \"%s\" is required", key);
    else if (rc == -2)
        nb_apierr_set(ae, NB_E_INVALID, "bad_path", "the path is too long");
    if (rc == 0)
        rc = nb_files_path(&a->conf, q.data, q.len, out, outlen, ae);
    nb_buf_free(&q);
    return rc == 0 ? 0 : -1;
}

/* {type, size, mode, mtime, mtime_nsec, owner, group, target} keys of fi into an open map. */
static void info_json(yajl_gen g, const struct nb_file_info *fi)
{
    char mode[16];
    snprintf(mode, sizeof(mode), "%04o", (unsigned)(fi->mode & 07777));
    nb_json_kv_str(g, "type", nb_file_kind_name(fi->kind));
    nb_json_kv_int(g, "size", (long long)fi->size);
    nb_json_kv_str(g, "mode", mode);
    nb_json_kv_int(g, "mtime", (long long)fi->mtime);
    nb_json_kv_int(g, "mtime_nsec", (long long)fi->mtime_nsec);
    if (fi->owner[0] != '\0')
        nb_json_kv_str(g, "owner", fi->owner);
    if (fi->group[0] != '\0')
        nb_json_kv_str(g, "group", fi->group);
    if (fi->kind == NB_FILE_SYMLINK && fi->target[0] != '\0')
        nb_json_kv_str(g, "target", fi->target);
}

/*
 * A read as an answer: a directory becomes one JSON listing, a file's bytes
 * are streamed to the client as the agent sends them.
 */
struct files_get_ctx {
    struct nb_req *r;
    const char *path;
    yajl_gen g; /* the listing, for a directory */
};

static int get_info(void *arg, const struct nb_file_info *fi)
{
    struct files_get_ctx *x = arg;
    if (fi->kind == NB_FILE_DIR) {
        x->g = nb_json_gen();
        yajl_gen_map_open(x->g);
        nb_json_kv_str(x->g, "path", x->path);
        info_json(x->g, fi);
        nb_json_cstr(x->g, "entries");
        yajl_gen_array_open(x->g);
    } else {
        nb_http_stream_begin(x->r, 200, "application/octet-stream");
    }
    return 0;
}

static int get_data(void *arg, const void *data, size_t len)
{
    struct files_get_ctx *x = arg;
    return nb_http_stream_bytes(x->r, data, len);
}

static int get_entry(void *arg, const struct nb_file_info *e)
{
    struct files_get_ctx *x = arg;
    yajl_gen_map_open(x->g);
    nb_json_kv_str(x->g, "name", e->name);
    info_json(x->g, e);
    yajl_gen_map_close(x->g);
    return 0;
}

/* GET .../files?path=: an error after the bytes began can only cut them short. */
int api_files_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1];
    struct nb_slot slot;
    struct files_get_ctx x = {r, path, NULL};
    struct nb_files_sink sink = {get_info, get_data, get_entry, &x, 0, 1};
    char depth[16], *end;
    int rc = NB_ERR;

    if (files_query_path(a, r, "path", path, sizeof(path), ae) != 0)
        return NB_ERR;
    if (nb_http_query(r, "depth", depth, sizeof(depth)) == 0) {
        unsigned long d = strtoul(depth, &end, 10);
        if (depth[0] < '1' || depth[0] > '9' || *end != '\0' || d > NB_FILES_MAX_DEPTH) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "depth must be 1 to %d",
                          NB_FILES_MAX_DEPTH);
            return NB_ERR;
        }
        sink.depth = (unsigned)d;
    }
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    if (nb_files_read(a, &slot, path, &sink, ae) == 0) {
        if (x.g != NULL) {
            yajl_gen_array_close(x.g);
            nb_json_kv_bool(x.g, "truncated", sink.truncated);
            yajl_gen_map_close(x.g);
            nb_http_json(r, 200, x.g);
        }
        rc = NB_OK;
    }
    if (x.g != NULL)
        yajl_gen_free(x.g);
    return rc;
}

/* Parse an octal mode (?mode=0755); -1 if junk or beyond 07777. */
static int parse_mode(const char *s, uint32_t *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 8);
    if (*s == '\0' || *end != '\0' || v > 07777)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* The request body as the files engine's source: read as it comes. */
static int put_source(void *arg, void *buf, size_t n)
{
    return nb_http_read_some(arg, buf, n);
}

/* PUT .../files?path=: the body streamed through, never held whole. */
int api_files_put(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    char path[NB_FILES_PATH_MAX + 1], mode_s[16];
    const char *cl = nb_http_param(r, "CONTENT_LENGTH");
    unsigned long long total = cl && *cl ? strtoull(cl, NULL, 10) : 0;
    uint32_t mode = 0644;
    struct nb_file_info fi;
    struct nb_slot slot;
    int have_info;
    yajl_gen g;

    if (files_query_path(a, r, "path", path, sizeof(path), ae) != 0)
        return NB_ERR;
    if (nb_http_query(r, "mode", mode_s, sizeof(mode_s)) == 0 && parse_mode(mode_s, &mode) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "mode must be octal permission bits such as 0644");
        return NB_ERR;
    }
    if (total > c->max_file) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                      "the file is %llu bytes; the limit is %zu (max_file)", total, c->max_file);
        return NB_ERR;
    }
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0 ||
        nb_files_write(a, &slot, path, mode, total, put_source, r, &fi, &have_info, ae) != 0)
        return NB_ERR;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "path", path);
    if (have_info)
        info_json(g, &fi);
    else
        nb_json_kv_int(g, "size", (long long)total);
    yajl_gen_map_close(g);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    return NB_OK;
}

static int is_true(const char *v)
{
    return !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes");
}

/* DELETE .../files?path=[&recursive=1] */
int api_files_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1], rec[16] = "";
    struct nb_slot slot;
    int recursive;

    if (files_query_path(a, r, "path", path, sizeof(path), ae) != 0)
        return NB_ERR;
    if (!strcmp(path, "/")) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_path", "refusing to delete /");
        return NB_ERR;
    }
    recursive = nb_http_query(r, "recursive", rec, sizeof(rec)) == 0 && is_true(rec);
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0 ||
        nb_files_delete(a, &slot, path, recursive, ae) != 0)
        return NB_ERR;
    nb_http_no_content(r);
    return NB_OK;
}

/* A path field of a JSON body, resolved; -1 with ae set. */
static int body_path(struct nb_app *a, yajl_val v, const char *name, char *out, size_t outlen,
                     struct nb_apierr *ae)
{
    const char *s;
    if (v == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "field \"%s\" (a path) is required", name);
        return -1;
    }
    s = nb_json_string(v);
    /* JSON strings may hold \u0000, which yajl hands over as a NUL: strlen stops there */
    return nb_files_path(&a->conf, s, strlen(s), out, outlen, ae);
}

/*
 * mkdir and move: a JSON body of path fields, one engine call, a JSON
 * answer naming the paths ("path" for the last one, "from" for a move's
 * first).
 */
struct files_json_op {
    const char *names[2];
    unsigned n;
    int status;
};

static const struct files_json_op files_mkdir_op = {{"path"}, 1, 201};
static const struct files_json_op files_move_op = {{"from", "to"}, 2, 200};

static int files_json(struct nb_app *a, struct nb_req *r, const char *id,
                      const struct files_json_op *op, struct nb_apierr *ae)
{
    struct nb_jfield f[2] = {{op->names[0], NB_JT_STRING, NULL},
                             {op->names[1], NB_JT_STRING, NULL}};
    char paths[2][NB_FILES_PATH_MAX + 1], err[256];
    struct nb_slot slot;
    yajl_val body = NULL;
    yajl_gen g;
    unsigned i;
    int rc = NB_ERR;

    if (api_read_json_nul(a, r, &body, "bad_path", ae) != 0)
        return NB_ERR;
    if (nb_json_fields(body, f, op->n, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    for (i = 0; i < op->n; i++)
        if (body_path(a, f[i].val, op->names[i], paths[i], sizeof(paths[i]), ae) != 0)
            goto out;
    if (nb_sandbox_get(a, id, &slot, ae) != 0)
        goto out;
    if ((op->n == 2 ? nb_files_move(a, &slot, paths[0], paths[1], ae)
                    : nb_files_mkdir(a, &slot, paths[0], ae)) != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (op->n == 2)
        nb_json_kv_str(g, "from", paths[0]);
    nb_json_kv_str(g, "path", paths[op->n - 1]);
    yajl_gen_map_close(g);
    nb_http_json(r, op->status, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

/* POST .../files/mkdir {path} */
int api_files_mkdir(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    return files_json(a, r, ra->id, &files_mkdir_op, ae);
}

/* POST .../files/move {from, to} */
int api_files_move(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    return files_json(a, r, ra->id, &files_move_op, ae);
}

/* GET .../files/archive?path=DIR: the directory's tar, streamed as the
 * sandbox's tar writes it; an error once it began can only cut it short. */
struct archive_get_ctx {
    struct nb_req *r;
    const char *path;
};

static int archive_begin(void *arg, uint64_t size)
{
    struct archive_get_ctx *x = arg;
    const char *base = strrchr(x->path, '/');
    char disp[300], name[256];
    size_t n = 0;

    (void)size;
    /* the download's name: the directory's, in characters safe in a header */
    for (base = base ? base + 1 : x->path; *base && n < sizeof(name) - 5; base++)
        name[n++] = (isalnum((unsigned char)*base) || strchr("._-", *base)) ? *base : '_';
    name[n] = '\0';
    snprintf(disp, sizeof(disp), "attachment; filename=\"%s.tar\"", n ? name : "root");
    nb_http_add_header(x->r, "Content-Disposition", disp);
    nb_http_stream_begin(x->r, 200, "application/x-tar");
    return 0;
}

static int archive_data(void *arg, const void *data, size_t len)
{
    struct archive_get_ctx *x = arg;
    return nb_http_stream_bytes(x->r, data, len);
}

int api_files_archive_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1];
    struct nb_slot slot;
    struct archive_get_ctx x = {r, path};
    struct nb_tar_sink sink = {archive_begin, archive_data, &x};

    if (files_query_path(a, r, "path", path, sizeof(path), ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0 ||
        nb_tar_read(a, &slot, path, nb_http_client_fd(r), &sink, ae) != 0)
        return NB_ERR;
    return NB_OK;
}

/* PUT .../files/archive?path=DIR: the tar body, checked whole, then
 * extracted under DIR by the sandbox's tar. */
int api_files_archive_put(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    char path[NB_FILES_PATH_MAX + 1];
    const char *cl = nb_http_param(r, "CONTENT_LENGTH");
    unsigned long long total = cl && *cl ? strtoull(cl, NULL, 10) : 0;
    struct nb_tar_stats st;
    struct nb_slot slot;
    yajl_gen g;

    if (files_query_path(a, r, "path", path, sizeof(path), ae) != 0)
        return NB_ERR;
    if (total > c->max_file) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                      "the tar is %llu bytes; the limit is %zu (max_file)", total, c->max_file);
        return NB_ERR;
    }
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0 || nb_http_read_body(r, c->max_file, ae) != 0 ||
        nb_tar_extract(a, &slot, path, r->body.data, r->body.len, nb_http_client_fd(r), &st, ae) !=
            0)
        return NB_ERR;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "path", path);
    nb_json_kv_int(g, "entries", (long long)st.entries);
    nb_json_kv_int(g, "bytes", (long long)st.bytes);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

/* GET .../files/watch?path=DIR[&recursive=1]: the directory's changes as
 * NDJSON until the client leaves (which ends the agent's watch). */
struct watch_stream {
    struct nb_req *r;
    const char *path;
    int recursive;
    yajl_gen g;
};

static int watch_line(struct watch_stream *w)
{
    return nb_http_stream_line(w->r, w->g) != 0 ? -1 : 0;
}

static int watch_start(void *arg, unsigned dirs)
{
    struct watch_stream *w = arg;
    nb_http_stream_begin(w->r, 200, "application/x-ndjson");
    yajl_gen_map_open(w->g);
    nb_json_kv_str(w->g, "type", "start");
    nb_json_kv_str(w->g, "path", w->path);
    nb_json_kv_bool(w->g, "recursive", w->recursive);
    nb_json_kv_int(w->g, "dirs", dirs);
    yajl_gen_map_close(w->g);
    return watch_line(w);
}

static int watch_change(void *arg, enum nb_watch_event ev, const char *name)
{
    struct watch_stream *w = arg;
    yajl_gen_map_open(w->g);
    nb_json_kv_str(w->g, "type", nb_watch_event_name(ev));
    if (ev != NB_WATCH_OVERFLOW)
        nb_json_kv_str(w->g, "name", name);
    yajl_gen_map_close(w->g);
    return watch_line(w);
}

static int watch_idle(void *arg)
{
    struct watch_stream *w = arg;
    yajl_gen_map_open(w->g);
    nb_json_kv_str(w->g, "type", "keepalive");
    yajl_gen_map_close(w->g);
    return watch_line(w);
}

int api_files_watch(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1], rec[8];
    struct nb_slot slot;
    struct watch_stream w = {r, path, 0, NULL};
    struct nb_files_watch_sink sink = {watch_start, watch_change, watch_idle, &w, -1, 0, 0};
    int rc;

    if (files_query_path(a, r, "path", path, sizeof(path), ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    w.recursive = nb_http_query(r, "recursive", rec, sizeof(rec)) == 0 && is_true(rec);
    sink.client_fd = nb_http_client_fd(r);
    sink.idle_ms = NB_EXEC_IDLE_MS;
    w.g = nb_json_gen();
    rc = nb_files_watch(a, &slot, path, w.recursive, a->conf.files_watch_max_dirs, &sink, ae);
    if (rc == 0 && sink.gone) {
        yajl_gen_map_open(w.g);
        nb_json_kv_str(w.g, "type", "end");
        nb_json_kv_str(w.g, "reason", "the watched directory was removed");
        yajl_gen_map_close(w.g);
        watch_line(&w);
    }
    yajl_gen_free(w.g);
    return rc == 0 ? NB_OK : NB_ERR;
}
