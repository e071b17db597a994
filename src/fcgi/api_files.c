/*
 * api_files.c - files as the sandbox sees them, through its agent:
 *
 *   PUT    /sandbox/{id}/files?path=P[&mode=0644]   raw body -> 201 info
 *   GET    /sandbox/{id}/files?path=P               raw bytes, or a JSON
 *                                                   listing for a directory
 *   DELETE /sandbox/{id}/files?path=P[&recursive=1] 204
 *   POST   /sandbox/{id}/files/mkdir  {path}        201
 *   POST   /sandbox/{id}/files/move   {from, to}    200
 *
 * The host never opens a path inside a sandbox: nanobox-init does, in the
 * sandbox's own mount namespace with the sandbox user's rights, so tmpfs
 * mounts are seen and a planted symlink can only lead elsewhere inside the
 * same sandbox. Paths are checked here first (relative ones are taken from
 * the workspace; NUL bytes, "." and ".." components and over-long paths
 * are refused with 400) and again by the agent.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "api.h"
#include "json.h"
#include "log.h"
#include "sandbox.h"

/* Most entries a directory listing answers (the rest: "truncated"). */
#define FILES_MAX_ENTRIES 10000
/* How long a small file operation may take in the agent. */
#define FILES_OP_TIMEOUT_MS 30000

/* Resolve raw[0..len) (absolute, or relative to the workspace) into out. */
static int files_path(const struct nb_conf *c, const char *raw, size_t len, char *out,
                      size_t outlen, struct nb_apierr *ae)
{
    size_t n;
    if (len == 0) {
        nb_apierr_set(ae, 400, "bad_path", "a path is required (?path=/workspace/file)");
        return -1;
    }
    if (memchr(raw, '\0', len) != NULL) {
        nb_apierr_set(ae, 400, "bad_path", "the path contains a NUL byte");
        return -1;
    }
    if (raw[0] == '/')
        n = (size_t)snprintf(out, outlen, "%.*s", (int)len, raw);
    else
        n = (size_t)snprintf(out, outlen, "%s/%.*s", c->workspace, (int)len, raw);
    if (n >= outlen || n > NBA_MAX_PATH) {
        nb_apierr_set(ae, 400, "bad_path", "the path is longer than %u bytes", NBA_MAX_PATH);
        return -1;
    }
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    if (!nba_path_ok(out, n)) {
        nb_apierr_set(ae, 400, "bad_path",
                      "the path must not contain \".\" or \"..\" components: \"%.200s\"", out);
        return -1;
    }
    return 0;
}

/* The ?path= of the request, resolved; -1 after answering. */
static int files_query_path(struct nb_app *a, struct nb_req *r, const char *key, char *out,
                            size_t outlen)
{
    struct nb_apierr ae;
    struct nb_buf q;
    int rc;
    nb_buf_init(&q, NB_QUERY_MAX);
    rc = nb_http_query_bytes(r, key, &q);
    if (rc == -1)
        nb_apierr_set(&ae, 400, "bad_path", "the query parameter \"%s\" is required", key);
    else if (rc == -2)
        nb_apierr_set(&ae, 400, "bad_path", "the path is too long");
    if (rc != 0 || files_path(&a->conf, q.data, q.len, out, outlen, &ae) != 0) {
        nb_buf_free(&q);
        nb_http_error(r, &ae);
        return -1;
    }
    nb_buf_free(&q);
    return 0;
}

/* A file's or entry's stat as the agent reports it. */
struct file_info {
    char name[256];
    char kind;
    uint64_t size, mtime;
    uint32_t mode;
};

static int info_parse(const unsigned char *body, uint32_t len, struct file_info *fi)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t l;
    int rc;
    memset(fi, 0, sizeof(*fi));
    fi->kind = NBA_KIND_OTHER;
    nba_fields_init(&it, body, len);
    while ((rc = nba_fields_next(&it, &tag, &v, &l)) == 1) {
        if (tag == NBA_T_KIND && l == 1)
            fi->kind = (char)v[0];
        else if (tag == NBA_T_CLOSE && l == 8)
            fi->size = nba_get_u64(v);
        else if (tag == NBA_T_MAXOUT && l == 4)
            fi->mode = nba_get_u32(v);
        else if (tag == NBA_T_MTIME && l == 8)
            fi->mtime = nba_get_u64(v);
        else if (tag == NBA_T_PATH)
            snprintf(fi->name, sizeof(fi->name), "%.*s", (int)(l < 255 ? l : 255), (const char *)v);
    }
    return rc;
}

static const char *kind_name(char k)
{
    switch (k) {
    case NBA_KIND_FILE: return "file";
    case NBA_KIND_DIR: return "dir";
    case NBA_KIND_LINK: return "symlink";
    default: return "other";
    }
}

/* {type, size, mode, mtime} keys of fi into an open map. */
static void info_json(yajl_gen g, const struct file_info *fi)
{
    char mode[16];
    snprintf(mode, sizeof(mode), "%04o", (unsigned)(fi->mode & 07777));
    nb_json_kv_str(g, "type", kind_name(fi->kind));
    nb_json_kv_int(g, "size", (long long)fi->size);
    nb_json_kv_str(g, "mode", mode);
    nb_json_kv_int(g, "mtime", (long long)fi->mtime);
}

/* The sandbox, or -1 after answering. */
static int files_slot(struct nb_app *a, struct nb_req *r, const char *id, struct nb_slot *slot)
{
    struct nb_apierr ae;
    if (nb_sandbox_get(a, id, slot, &ae) != 0) {
        nb_http_error(r, &ae);
        return -1;
    }
    return 0;
}

/* The agent, or -1 after answering (503 without one: files need it). */
static int files_connect(struct nb_req *r, const struct nb_slot *slot, struct nb_agent *ag)
{
    struct nb_apierr ae;
    if (nb_agent_connect(slot, ag, &ae) != 0) {
        if (ae.status == 503)
            nb_apierr_set(&ae, 503, "agent_unavailable",
                          "this sandbox's agent (nanobox-init) does not answer; files need it");
        nb_http_error(r, &ae);
        return -1;
    }
    return 0;
}

static void files_get(struct nb_app *a, struct nb_req *r, const char *id)
{
    char path[NBA_MAX_PATH + 1];
    struct nb_slot slot;
    struct nb_agent ag;
    struct nb_apierr ae;
    struct nb_buf f;
    struct file_info fi;
    yajl_gen g = NULL;
    unsigned n_entries = 0;
    int truncated = 0, got_info = 0;

    if (files_query_path(a, r, "path", path, sizeof(path)) != 0 || files_slot(a, r, id, &slot) != 0 ||
        files_connect(r, &slot, &ag) != 0)
        return;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    nb_agent_queue(&ag, NBA_FREAD, f.data, f.len);
    nb_buf_free(&f);
    for (;;) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        int got = nb_agent_recv(&ag, FILES_OP_TIMEOUT_MS, &type, &body, &len, &ae);
        if (got == 0)
            nb_apierr_set(&ae, 504, "agent_timeout", "the sandbox's agent did not answer in time");
        if (got <= 0) {
            if (!r->answered)
                nb_http_error(r, &ae);
            else
                nb_warn("sandbox %s: reading %s broke off: %s", id, path, ae.msg);
            break;
        }
        if (type == NBA_ERROR) {
            nb_agent_error(body, len, "read the path", &ae);
            if (!r->answered)
                nb_http_error(r, &ae);
            break;
        }
        if (type == NBA_INFO && !got_info) {
            got_info = 1;
            info_parse(body, len, &fi);
            if (fi.kind == NBA_KIND_DIR) {
                g = nb_json_gen();
                yajl_gen_map_open(g);
                nb_json_kv_str(g, "path", path);
                info_json(g, &fi);
                nb_json_cstr(g, "entries");
                yajl_gen_array_open(g);
            } else {
                nb_http_stream_begin(r, 200, "application/octet-stream");
            }
        } else if (type == NBA_DATA && got_info && g == NULL) {
            if (nb_http_stream_bytes(r, body, len) != 0)
                break; /* the client left: closing the connection ends the read */
        } else if (type == NBA_DIRENT && g != NULL) {
            struct file_info e;
            if (n_entries >= FILES_MAX_ENTRIES) {
                truncated = 1;
                continue;
            }
            info_parse(body, len, &e);
            yajl_gen_map_open(g);
            nb_json_kv_str(g, "name", e.name);
            info_json(g, &e);
            yajl_gen_map_close(g);
            n_entries++;
        } else if (type == NBA_END) {
            if (g != NULL) {
                yajl_gen_array_close(g);
                nb_json_kv_bool(g, "truncated", truncated);
                yajl_gen_map_close(g);
                nb_http_json(r, 200, g);
            } else if (!got_info) {
                nb_http_fail(r, 502, "agent_error", "the sandbox's agent answered without the file");
            }
            break;
        }
    }
    if (g != NULL)
        yajl_gen_free(g);
    nb_agent_close(&ag);
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

static void files_put(struct nb_app *a, struct nb_req *r, const char *id)
{
    const struct nb_conf *c = &a->conf;
    char path[NBA_MAX_PATH + 1], mode_s[16];
    const char *cl = nb_http_param(r, "CONTENT_LENGTH");
    unsigned long long total = cl && *cl ? strtoull(cl, NULL, 10) : 0, sent = 0;
    uint32_t mode = 0644;
    struct nb_slot slot;
    struct nb_agent ag;
    struct nb_apierr ae;
    struct nb_buf f;
    char *chunk = NULL;
    int failed = 0;

    if (files_query_path(a, r, "path", path, sizeof(path)) != 0)
        return;
    if (nb_http_query(r, "mode", mode_s, sizeof(mode_s)) == 0 && parse_mode(mode_s, &mode) != 0) {
        nb_http_fail(r, 400, "bad_field", "mode must be octal permission bits such as 0644");
        return;
    }
    if (total > c->max_file) {
        nb_http_fail(r, 413, "too_large", "the file is %llu bytes; the limit is %zu (max_file)", total,
                     c->max_file);
        return;
    }
    if (files_slot(a, r, id, &slot) != 0 || files_connect(r, &slot, &ag) != 0)
        return;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    nb_agent_field_u32(&f, NBA_T_MAXOUT, mode);
    nb_agent_queue(&ag, NBA_FWRITE, f.data, f.len);
    nb_buf_free(&f);

    /* stream the body through: never more than one chunk held here */
    chunk = nb_xmalloc(NBA_CHUNK);
    while (sent < total && !failed) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        size_t want = total - sent < NBA_CHUNK ? (size_t)(total - sent) : NBA_CHUNK;
        int n = nb_http_read_some(r, chunk, want), got;
        if (n <= 0) {
            nb_http_fail(r, 400, "short_body", "the body ended after %llu of %llu bytes", sent, total);
            failed = 1;
            break;
        }
        sent += (unsigned long long)n;
        nb_agent_queue(&ag, NBA_DATA, chunk, (size_t)n);
        if (nb_agent_flush(&ag, FILES_OP_TIMEOUT_MS, &ae) != 0) {
            failed = 1;
        } else if ((got = nb_agent_poll_frame(&ag, &type, &body, &len, &ae)) != 0) {
            /* the agent only speaks early to refuse */
            if (got > 0 && type == NBA_ERROR)
                nb_agent_error(body, len, "write the file", &ae);
            else if (got > 0)
                nb_apierr_set(&ae, 502, "agent_error", "unexpected answer from the sandbox's agent");
            failed = 1;
        }
        if (failed)
            nb_http_error(r, &ae);
    }
    free(chunk);
    chunk = NULL;
    if (!failed) {
        struct file_info fi;
        int have_info = 0;
        nb_agent_queue(&ag, NBA_END, NULL, 0);
        for (;;) {
            uint8_t type;
            const unsigned char *body;
            uint32_t len;
            int got = nb_agent_recv(&ag, FILES_OP_TIMEOUT_MS, &type, &body, &len, &ae);
            if (got == 0)
                nb_apierr_set(&ae, 504, "agent_timeout", "the sandbox's agent did not answer in time");
            if (got <= 0) {
                nb_http_error(r, &ae);
                break;
            }
            if (type == NBA_ERROR) {
                nb_agent_error(body, len, "write the file", &ae);
                nb_http_error(r, &ae);
                break;
            }
            if (type == NBA_INFO) {
                info_parse(body, len, &fi);
                have_info = 1;
            } else if (type == NBA_END) {
                yajl_gen g = nb_json_gen();
                yajl_gen_map_open(g);
                nb_json_kv_str(g, "path", path);
                if (have_info)
                    info_json(g, &fi);
                else
                    nb_json_kv_int(g, "size", (long long)total);
                yajl_gen_map_close(g);
                nb_http_json(r, 201, g);
                yajl_gen_free(g);
                break;
            }
        }
    }
    /* a write that did not finish leaves nothing: the agent drops its temp file */
    nb_agent_close(&ag);
}

/* One small request whose answer is just "." (delete, mkdir, move). */
static int files_simple(struct nb_app *a, struct nb_req *r, const char *id, uint8_t req,
                        const struct nb_buf *fields, const char *what)
{
    struct nb_slot slot;
    struct nb_apierr ae;
    if (files_slot(a, r, id, &slot) != 0)
        return -1;
    if (nb_agent_call(&slot, req, fields, what, FILES_OP_TIMEOUT_MS, NULL, NULL, &ae) != 0) {
        if (ae.status == 503 && !strcmp(ae.code, "agent_unavailable"))
            nb_apierr_set(&ae, 503, "agent_unavailable",
                          "this sandbox's agent (nanobox-init) does not answer; files need it");
        nb_http_error(r, &ae);
        return -1;
    }
    return 0;
}

static int is_true(const char *v)
{
    return !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes");
}

static void files_delete(struct nb_app *a, struct nb_req *r, const char *id)
{
    char path[NBA_MAX_PATH + 1], rec[16] = "";
    struct nb_buf f;
    if (files_query_path(a, r, "path", path, sizeof(path)) != 0)
        return;
    if (!strcmp(path, "/")) {
        nb_http_fail(r, 400, "bad_path", "refusing to delete /");
        return;
    }
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    if (nb_http_query(r, "recursive", rec, sizeof(rec)) == 0 && is_true(rec))
        nb_agent_field(&f, NBA_T_RECURSIVE, NULL, 0);
    if (files_simple(a, r, id, NBA_FDELETE, &f, "delete the path") == 0)
        nb_http_no_content(r);
    nb_buf_free(&f);
}

/* A path field of a JSON body, resolved; -1 after answering. */
static int body_path(struct nb_app *a, struct nb_req *r, yajl_val v, const char *name, char *out,
                     size_t outlen)
{
    struct nb_apierr ae;
    const char *s;
    if (v == NULL) {
        nb_http_fail(r, 400, "bad_field", "field \"%s\" (a path) is required", name);
        return -1;
    }
    s = nb_json_string(v);
    /* JSON strings may hold \u0000, which yajl hands over as a NUL: strlen stops there */
    if (files_path(&a->conf, s, strlen(s), out, outlen, &ae) != 0) {
        nb_http_error(r, &ae);
        return -1;
    }
    return 0;
}

/*
 * mkdir and move: a JSON body of path fields, one agent request, a JSON
 * answer naming the paths. names[i] goes to the agent as tags[i]; the
 * answer has "path" for the last one (and "from" for a move's first).
 */
struct files_json_op {
    const char *names[2];
    uint8_t tags[2];
    unsigned n;
    uint8_t req;
    const char *what;
    int status;
};

static const struct files_json_op files_mkdir_op = {
    {"path"}, {NBA_T_PATH}, 1, NBA_FMKDIR, "create the directory", 201};
static const struct files_json_op files_move_op = {
    {"from", "to"}, {NBA_T_PATH, NBA_T_DEST}, 2, NBA_FMOVE, "move the path", 200};

static void files_json(struct nb_app *a, struct nb_req *r, const char *id,
                       const struct files_json_op *op)
{
    struct nb_jfield f[2] = {{op->names[0], NB_JT_STRING, NULL}, {op->names[1], NB_JT_STRING, NULL}};
    char paths[2][NBA_MAX_PATH + 1], err[256];
    yajl_val body = NULL;
    struct nb_buf b;
    unsigned i;

    if (api_read_json_nul(a, r, &body, "bad_path") != 0)
        return;
    nb_buf_init(&b, NBA_MAX_BODY);
    if (nb_json_fields(body, f, op->n, err, sizeof(err)) != 0) {
        nb_http_fail(r, 400, "bad_field", "%s", err);
        goto out;
    }
    for (i = 0; i < op->n; i++) {
        if (body_path(a, r, f[i].val, op->names[i], paths[i], sizeof(paths[i])) != 0)
            goto out;
        nb_agent_field_str(&b, op->tags[i], paths[i]);
    }
    if (files_simple(a, r, id, op->req, &b, op->what) == 0) {
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        if (op->n == 2)
            nb_json_kv_str(g, "from", paths[0]);
        nb_json_kv_str(g, "path", paths[op->n - 1]);
        yajl_gen_map_close(g);
        nb_http_json(r, op->status, g);
        yajl_gen_free(g);
    }
out:
    nb_buf_free(&b);
    yajl_tree_free(body);
}

void api_files(struct nb_app *a, struct nb_req *r, const char *id, const char *op)
{
    const char *m = r->method;
    if (op[0] == '\0') {
        if (!strcmp(m, "GET"))
            files_get(a, r, id);
        else if (!strcmp(m, "PUT"))
            files_put(a, r, id);
        else if (!strcmp(m, "DELETE"))
            files_delete(a, r, id);
        else
            nb_http_fail(r, 405, "method_not_allowed", "%s is not allowed here; use GET, PUT, DELETE", m);
    } else if (!strcmp(op, "mkdir") || !strcmp(op, "move")) {
        if (strcmp(m, "POST") != 0)
            nb_http_fail(r, 405, "method_not_allowed", "%s is not allowed here; use POST", m);
        else
            files_json(a, r, id, op[1] == 'k' ? &files_mkdir_op : &files_move_op);
    } else {
        nb_http_fail(r, 404, "no_route", "no such route: %.200s", r->path);
    }
}
