/*
 * api_e2b_data.c - the E2B facade's data plane without Connect-RPC
 * (docs/E2B.md), as E2B's SDKs send it: requests that name their sandbox
 * in the headers E2b-Sandbox-Id and E2b-Sandbox-Port (ra->id, ra->op) and
 * their call in the path (ra->arg).
 *
 *   envd (port 49983)
 *     GET  /files?path=P[&username=U]   the file's bytes, streamed
 *     POST /files[?path=P]              multipart/form-data, one part per
 *                                       file (field "file", filename = the
 *                                       path), or application/octet-stream
 *                                       (envd >= 0.5.7: one file, ?path=,
 *                                       gzip or not); X-Metadata-<key>
 *                                       headers: the files' user metadata
 *                                       (>= 0.6.2) -> [{name, type, path,
 *                                       metadata?}]
 *     either with &signature=S[&signature_expiration=T] instead of the
 *     access token: the SDK's files.downloadUrl/uploadUrl, for a client
 *     without the SDK (a browser, curl); without E2b-Sandbox-Id the
 *     signature names the sandbox (e2b_common.c)
 *   the code interpreter (port 49999)
 *     POST   /execute                   {code, context_id?, language?,
 *                                       env_vars?} -> NDJSON lines
 *     GET    /contexts, POST /contexts  [{id, language, cwd}], {id, ...}
 *     DELETE /contexts/{ctx}, POST /contexts/{ctx}/restart
 *
 * The same engines as the native API: files.c for /files (the bytes
 * stream through in both directions), code.c for /execute and /contexts
 * (its events translated into E2B's lines). Errors are E2B's shape
 * ({"code", "message"}, http.c), with the statuses its SDK maps: 404 a
 * missing file or context, 400 bad input, 502 a sandbox that is not
 * running.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <archive.h>
#include <archive_entry.h>

#include "code.h"
#include "api_common.h"
#include "e2b_api.h"
#include "e2b_common.h"
#include "e2b_sign.h"
#include "files.h"
#include "json.h"
#include "multipart.h"
#include "sandbox.h"

/* The ports E2B's SDKs name in E2b-Sandbox-Port. */
#define E2B_PORT_ENVD "49983"
#define E2B_PORT_CODE "49999"
/* Most files one upload writes. */
#define E2B_UPLOAD_MAX_PARTS 1000

/*
 * The sandbox of a data-plane request, running, into *slot: 0, or -1 with
 * ae set (404 when the request names the other port, 502 as E2B's proxy
 * says for a sandbox that is not running, 409 while paused unless it
 * resumes on its own). Every handler here goes through it. /files passes
 * fa: its token or its URL's signature opens it (*by_signature says which).
 */
static int data_sandbox(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        const char *port, const struct e2b_file_access *fa, int *by_signature,
                        struct nb_slot *slot, struct nb_apierr *ae)
{
    int rc;
    if (ra->op[0] != '\0' && strcmp(ra->op, port) != 0) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "%.100s is served on port %s, not %.16s",
                      ra->arg, port, ra->op);
        return -1;
    }
    if (!nb_sandbox_id_valid(ra->id) || nb_sandbox_get(a, ra->id, slot, ae) != 0) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "not_running", "sandbox \"%.64s\" is not running", ra->id);
        return -1;
    }
    /* the sandbox's access token: the one check for every handler of this file */
    rc = fa != NULL ? e2b_files_authorized(a, r, ra->id, fa, by_signature, ae)
                    : e2b_data_authorized(a, r, ra->id, ae);
    if (rc != 0)
        return -1;
    if (slot->state == NB_SLOT_PAUSED &&
        (nb_sandbox_awake(a, ra->id, ae) != 0 || nb_sandbox_get(a, ra->id, slot, ae) != 0))
        return -1;
    nb_sandbox_touch(a, ra->id); /* envd's calls: not idle (the idle pause) */
    return 0;
}

/*
 * The sandbox of a /files request, as data_sandbox, into fra (ra with the
 * sandbox's id): a request that names none (E2B_SANDBOX_URL's signed URL:
 * no E2b-Sandbox-Id, no host) is the one whose token signed its URL.
 */
static int files_sandbox(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         const struct e2b_file_access *fa, struct nb_route_args *fra,
                         int *by_signature, struct nb_slot *slot, struct nb_apierr *ae)
{
    *fra = *ra;
    if (ra->id[0] == '\0' && e2b_files_find(a, r, fa, fra->id, sizeof(fra->id), ae) != 0)
        return -1;
    return data_sandbox(a, r, fra, E2B_PORT_ENVD, fa, by_signature, slot, ae);
}

/* ?username=: the default user, "user", or "root" (files are the sandbox user's either way). */
static int e2b_username(struct nb_req *r, struct nb_apierr *ae)
{
    char u[64];
    if (nb_http_query(r, "username", u, sizeof(u)) != 0 || u[0] == '\0' || !strcmp(u, "user") ||
        !strcmp(u, "root"))
        return 0;
    nb_apierr_set(ae, NB_E_INVALID, "bad_user", "no user \"%.32s\" in the sandbox (user, root)", u);
    return -1;
}

/* ---- GET /files ---- */

struct download {
    struct nb_req *r;
    int is_dir;
};

static int dl_info(void *arg, const struct nb_file_info *fi)
{
    struct download *d = arg;
    if (fi->kind == NB_FILE_DIR) {
        d->is_dir = 1;
        return 1; /* stop: envd reads files only */
    }
    nb_http_stream_begin(d->r, 200, "application/octet-stream");
    return 0;
}

static int dl_data(void *arg, const void *data, size_t len)
{
    struct download *d = arg;
    return nb_http_stream_bytes(d->r, data, len);
}

static int dl_entry(void *arg, const struct nb_file_info *e)
{
    (void)arg, (void)e;
    return 1;
}

/*
 * The ?path= as decoded (raw bytes: a NUL is refused by nb_files_path), into
 * q (empty when absent, as a signature takes it; *present says): 0, or -1
 * with ae set when it is too long.
 */
static int query_path_raw(struct nb_req *r, struct nb_buf *q, int *present, struct nb_apierr *ae)
{
    int rc = nb_http_query_bytes(r, "path", q);
    *present = rc == 0 && q->len > 0;
    if (rc == -2) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_path", "the path is too long");
        return -1;
    }
    if (rc != 0 || q->data == NULL) {
        nb_buf_reset(q);
        nb_buf_append(q, "", 0);
    }
    return 0;
}

/* The ?path= (q, present) resolved into out; absent: an error when required. */
static int query_path(struct nb_app *a, const struct nb_buf *q, int present, int required,
                      char *out, size_t outlen, struct nb_apierr *ae)
{
    if (!present && required) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_path", "the query parameter \"path\" is required");
        return -1;
    }
    return present ? e2b_path(&a->conf, q->data, q->len, out, outlen, ae) : 0;
}

int api_e2b_files_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1];
    struct download d = {r, 0};
    struct nb_files_sink sink = {dl_info, dl_data, dl_entry, &d, 0, 1};
    struct nb_route_args fra;
    struct nb_slot slot;
    struct nb_buf q;
    int present, by_signature, rc = NB_ERR;

    /* as envd: who may read first (the token, or the URL's signature of this path), then what */
    nb_buf_init(&q, NB_QUERY_MAX);
    if (query_path_raw(r, &q, &present, ae) == 0) {
        struct e2b_file_access fa = {E2B_SIGN_READ, q.data, q.len};
        if (files_sandbox(a, r, ra, &fa, &fra, &by_signature, &slot, ae) == 0 &&
            e2b_username(r, ae) == 0 &&
            query_path(a, &q, present, 1, path, sizeof(path), ae) == 0 &&
            nb_files_read(a, &slot, path, &sink, ae) == 0)
            rc = NB_OK;
    }
    nb_buf_free(&q);
    if (rc == NB_OK && d.is_dir) {
        nb_apierr_set(ae, NB_E_INVALID, "is_directory", "path '%.200s' is a directory", path);
        rc = NB_ERR;
    }
    return rc;
}

/* ---- POST /files ---- */

/* k more bytes of a file (max_file is cap): k, or -1 with *err set past the cap. */
static int held_to_cap(uint64_t *bytes, uint64_t cap, int k, int *failed, struct nb_apierr *err)
{
    *bytes += (uint64_t)k;
    if (*bytes > cap) {
        nb_apierr_set(err, NB_E_TOO_LARGE, "too_large",
                      "a file is larger than %llu bytes (max_file)", (unsigned long long)cap);
        *failed = 1;
        return -1;
    }
    return k;
}

/* One part's bytes as the files engine's source: within max_file, malformed input said. */
struct part_source {
    struct nb_mp *mp;
    uint64_t bytes, cap;
    int failed;
    struct nb_apierr err;
};

static int part_read(void *arg, void *buf, size_t n)
{
    struct part_source *s = arg;
    int k = nb_mp_read(s->mp, buf, n);
    if (k < 0) {
        nb_apierr_set(&s->err, NB_E_INVALID, "bad_multipart", "%s", s->mp->err);
        s->failed = 1;
        return -1;
    }
    return held_to_cap(&s->bytes, s->cap, k, &s->failed, &s->err);
}

static int body_read(void *arg, void *buf, size_t n)
{
    return nb_http_read_some(arg, buf, n);
}

/*
 * A write the sandbox user may not make (files.write('/0/x'): / is
 * read-only, or root's): E2B's envd, running as root, would create the
 * parents and the file and chown them to the user; nanobox writes as the
 * user only (docs/E2B.md). Say so, after the agent's own words.
 */
static void refused_as_user(struct nb_apierr *ae)
{
    struct nb_apierr was = *ae;
    nb_apierr_set(ae, was.err, was.code,
                  "%.200s: nanobox writes files as the sandbox user, who may not write there "
                  "(E2B's envd writes as root)",
                  was.msg);
}

/* Write path from src (its failure in *src_failed, *src_err); its entry into g. */
static int upload_write(struct nb_app *a, const struct nb_slot *slot, const char *path,
                        const struct nb_file_meta *meta, nb_files_source_fn src, void *src_arg,
                        const int *src_failed, const struct nb_apierr *src_err, yajl_gen g,
                        struct nb_apierr *ae)
{
    struct nb_file_info *fi = nb_xmalloc(sizeof(*fi));
    const char *base = strrchr(path, '/');
    int have_info;

    if (nb_files_write_meta(a, slot, path, 0644, meta, NB_FILES_SIZE_UNKNOWN, src, src_arg, fi,
                            &have_info, ae) != 0) {
        if (*src_failed)
            *ae = *src_err;
        else if (ae->err == NB_E_FORBIDDEN)
            refused_as_user(ae);
        free(fi);
        return -1;
    }
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", base != NULL && base[1] != '\0' ? base + 1 : path);
    nb_json_kv_str(g, "type", "file");
    nb_json_kv_str(g, "path", path);
    if (have_info)
        e2b_json_metadata(g, &fi->meta);
    yajl_gen_map_close(g);
    free(fi);
    return 0;
}

/* Write the current part of mp to path; its entry into g. */
static int upload_part(struct nb_app *a, const struct nb_slot *slot, struct nb_mp *mp,
                       const char *path, const struct nb_file_meta *meta, yajl_gen g,
                       struct nb_apierr *ae)
{
    struct part_source src = {mp, 0, a->conf.max_file, 0, {0}};
    return upload_write(a, slot, path, meta, part_read, &src, &src.failed, &src.err, g, ae);
}

/* An application/octet-stream body's bytes (envd >= 0.5.7), within max_file. */
struct raw_source {
    struct nb_req *r;
    uint64_t bytes, cap;
    int failed;
    struct nb_apierr err;
};

static int raw_read(void *arg, void *buf, size_t n)
{
    struct raw_source *s = arg;
    int k = nb_http_read_some(s->r, buf, n);
    if (k < 0) {
        nb_apierr_set(&s->err, NB_E_INVALID, "short_body", "the body broke off");
        s->failed = 1;
        return -1;
    }
    return held_to_cap(&s->bytes, s->cap, k, &s->failed, &s->err);
}

/*
 * A gzip body (Content-Encoding: gzip, the SDK's write with gzip: true)
 * inflated as it comes, by libarchive's gzip filter; the bytes it gives
 * are held to max_file as a plain body's (raw), so a small bomb stops there.
 */
#define GZ_IN 65536
struct gz_source {
    struct raw_source *raw;
    struct archive *ar;
    int started;
    char in[GZ_IN];
};

static la_ssize_t gz_in(struct archive *ar, void *arg, const void **buf)
{
    struct gz_source *g = arg;
    int k = nb_http_read_some(g->raw->r, g->in, sizeof(g->in));
    (void)ar;
    if (k < 0) {
        nb_apierr_set(&g->raw->err, NB_E_INVALID, "short_body", "the body broke off");
        g->raw->failed = 1;
        return -1;
    }
    *buf = g->in;
    return k;
}

static int gz_read(void *arg, void *buf, size_t n)
{
    struct gz_source *g = arg;
    struct raw_source *s = g->raw;
    la_ssize_t k;
    if (!g->started) {
        struct archive_entry *e;
        if (archive_read_next_header(g->ar, &e) != ARCHIVE_OK ||
            archive_filter_code(g->ar, 0) != ARCHIVE_FILTER_GZIP)
            goto bad;
        g->started = 1;
    }
    k = archive_read_data(g->ar, buf, n);
    if (k < 0)
        goto bad;
    return held_to_cap(&s->bytes, s->cap, (int)k, &s->failed, &s->err);
bad:
    if (!s->failed)
        nb_apierr_set(&s->err, NB_E_INVALID, "bad_gzip",
                      "the body is not gzip (Content-Encoding: gzip)");
    s->failed = 1;
    return -1;
}

/*
 * The X-Metadata-<key>: <value> headers (envd >= 0.6.2) into m, each
 * key as FastCGI names its header (HTTP_X_METADATA_MY_KEY is "my-key"):
 * header names are case-insensitive, so keys come lowercase. Held to the
 * agent protocol's rules and caps (NBA_META_*): 400 past them.
 */
#define META_PARAM "HTTP_X_METADATA_"
static int upload_meta(const struct nb_req *r, struct nb_file_meta *m, struct nb_apierr *ae)
{
    m->n = 0;
    m->len = 0;
    for (char **e = r->envp; e != NULL && *e != NULL; e++) {
        char key[NBA_META_KEY_MAX + 1];
        const char *name = *e + strlen(META_PARAM), *eq;
        size_t klen;
        if (strncmp(*e, META_PARAM, strlen(META_PARAM)) != 0 || (eq = strchr(name, '=')) == NULL)
            continue;
        klen = (size_t)(eq - name);
        for (size_t i = 0; i < klen && i < NBA_META_KEY_MAX; i++)
            key[i] = name[i] == '_' ? '-' : (char)tolower((unsigned char)name[i]);
        if (klen > NBA_META_KEY_MAX ||
            nb_file_meta_add(m, key, klen, eq + 1, strlen(eq + 1)) != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                          "file metadata is at most %d entries, %d bytes of keys and values: a key "
                          "1 to %d token characters naming no xattr namespace (user., trusted., "
                          "security., system.), given once; a value at most %d printable ASCII "
                          "bytes (X-Metadata-%.*s)",
                          NBA_META_MAX, NBA_META_BYTES, NBA_META_KEY_MAX, NBA_META_VALUE_MAX,
                          (int)(klen < 64 ? klen : 64), key);
            return -1;
        }
    }
    return 0;
}

/* Is the body application/octet-stream (one file, its bytes: envd >= 0.5.7)? */
static int octet_stream(const struct nb_req *r)
{
    const char *ct = nb_http_param(r, "CONTENT_TYPE");
    size_t n = strlen("application/octet-stream");
    return ct != NULL && strncasecmp(ct, "application/octet-stream", n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* One file from an application/octet-stream body to ?path= (required). */
static int upload_raw(struct nb_app *a, struct nb_req *r, const struct nb_slot *slot,
                      const char *qpath, int has_qpath, const struct nb_file_meta *meta,
                      struct nb_apierr *ae)
{
    struct raw_source src = {r, 0, a->conf.max_file, 0, {0}};
    const char *ce = nb_http_param(r, "HTTP_CONTENT_ENCODING");
    struct gz_source *gz = NULL;
    yajl_gen g;
    int rc;

    if (!has_qpath) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_path",
                      "an application/octet-stream upload names its file in ?path=");
        return NB_ERR;
    }
    if (ce != NULL && ce[0] != '\0' && strcasecmp(ce, "identity") != 0) {
        if (strcasecmp(ce, "gzip") != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "unsupported_encoding",
                          "Content-Encoding %.40s is not supported (gzip or none)", ce);
            return NB_ERR;
        }
        gz = nb_xmalloc(sizeof(*gz));
        gz->raw = &src;
        gz->started = 0;
        gz->ar = archive_read_new();
        archive_read_support_filter_gzip(gz->ar);
        archive_read_support_format_raw(gz->ar);
        if (archive_read_open(gz->ar, gz, NULL, gz_in, NULL) != ARCHIVE_OK) {
            if (src.failed)
                *ae = src.err;
            else
                nb_apierr_set(ae, NB_E_INVALID, "bad_gzip",
                              "the body is not gzip (Content-Encoding: gzip)");
            archive_read_free(gz->ar);
            free(gz);
            return NB_ERR;
        }
    }
    g = nb_json_gen();
    yajl_gen_array_open(g);
    rc = gz != NULL
             ? upload_write(a, slot, qpath, meta, gz_read, gz, &src.failed, &src.err, g, ae)
             : upload_write(a, slot, qpath, meta, raw_read, &src, &src.failed, &src.err, g, ae);
    if (gz != NULL) {
        archive_read_free(gz->ar);
        free(gz);
    }
    if (rc != 0) {
        yajl_gen_free(g);
        return NB_ERR;
    }
    yajl_gen_array_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

/*
 * Each part named "file" is written, in order, to its filename (relative:
 * under E2B's home, /home/user), or to ?path= when it has
 * none; parents are created. Parts go through as they are read: a part
 * found malformed after others were written leaves those written. A
 * signed URL (files.uploadUrl) with a path writes that path and no other,
 * as envd does: its one part goes there, whatever its filename (curl -F
 * file=@x names it x), and a second part is refused.
 */
int api_e2b_files_post(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    char boundary[NB_MP_BOUNDARY_MAX + 1], qpath[NB_FILES_PATH_MAX + 1];
    char path[NB_FILES_PATH_MAX + 1];
    struct nb_mp_part *part = NULL;
    struct nb_file_meta *meta = NULL;
    struct nb_route_args fra;
    struct nb_mp *mp = NULL;
    struct nb_slot slot;
    struct nb_buf q;
    unsigned n_parts = 0;
    yajl_gen g = NULL;
    int has_qpath, by_signature = 0, rc = NB_ERR;

    /* as envd: who may write first (the token, or the URL's signature of this path), then what */
    nb_buf_init(&q, NB_QUERY_MAX);
    if (query_path_raw(r, &q, &has_qpath, ae) == 0) {
        struct e2b_file_access fa = {E2B_SIGN_WRITE, q.data, q.len};
        if (files_sandbox(a, r, ra, &fa, &fra, &by_signature, &slot, ae) == 0 &&
            e2b_username(r, ae) == 0 &&
            query_path(a, &q, has_qpath, 0, qpath, sizeof(qpath), ae) == 0)
            rc = NB_OK;
    }
    nb_buf_free(&q);
    if (rc != NB_OK)
        return NB_ERR;
    rc = NB_ERR;
    meta = nb_xmalloc(sizeof(*meta));
    if (upload_meta(r, meta, ae) != 0)
        goto out;
    if (octet_stream(r)) {
        rc = upload_raw(a, r, &slot, qpath, has_qpath, meta, ae);
        goto out;
    }
    if (nb_mp_boundary(nb_http_param(r, "CONTENT_TYPE"), boundary, sizeof(boundary)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_multipart",
                      "the body must be multipart/form-data with a boundary: one part per file, "
                      "field \"file\", filename = the file's path (or application/octet-stream: "
                      "one file, ?path=)");
        goto out;
    }

    mp = nb_xmalloc(sizeof(*mp));
    part = nb_xmalloc(sizeof(*part));
    nb_mp_init(mp, boundary, body_read, r);
    g = nb_json_gen();
    yajl_gen_array_open(g);
    for (;;) {
        int k = nb_mp_next(mp, part);
        if (k < 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_multipart", "%s", mp->err);
            goto out;
        }
        if (k == 0)
            break;
        if (strcmp(part->name, "file") != 0)
            continue; /* another field: skipped, as envd does */
        if (++n_parts > E2B_UPLOAD_MAX_PARTS) {
            nb_apierr_set(ae, NB_E_INVALID, "too_many_files", "at most %d files in one upload",
                          E2B_UPLOAD_MAX_PARTS);
            goto out;
        }
        if (by_signature && has_qpath && n_parts > 1) {
            nb_apierr_set(ae, NB_E_INVALID, "too_many_files",
                          "a signed upload URL writes its one path: one part named \"file\"");
            goto out;
        }
        if (by_signature && has_qpath) {
            snprintf(path, sizeof(path), "%s", qpath); /* the path signed, not the filename */
        } else if (part->has_filename && part->filename_len > 0) {
            if (e2b_path(&a->conf, part->filename, part->filename_len, path, sizeof(path), ae) != 0)
                goto out;
        } else if (has_qpath) {
            snprintf(path, sizeof(path), "%s", qpath);
        } else {
            nb_apierr_set(
                ae, NB_E_INVALID, "bad_path",
                "part %u has no filename (the file's path) and there is no ?path=", n_parts);
            goto out;
        }
        if (upload_part(a, &slot, mp, path, meta, g, ae) != 0)
            goto out;
    }
    if (n_parts == 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_multipart", "the body has no part named \"file\"");
        goto out;
    }
    yajl_gen_array_close(g);
    nb_http_json(r, 200, g);
    rc = NB_OK;
out:
    if (g != NULL)
        yajl_gen_free(g);
    free(part);
    free(mp);
    free(meta);
    return rc;
}

/* ---- POST /execute ---- */

static yajl_val ev_get(yajl_val ev, const char *key, yajl_type t)
{
    const char *path[2] = {key, NULL};
    return yajl_tree_get(ev, path, t);
}

/*
 * E2B's result field of a MIME type (the code interpreter's names); NULL: it
 * goes to extra. A DataFrame's columns come from the bridge's display.py as
 * application/vnd.nanobox.data+json.
 */
static const char *mime_field(const char *mime)
{
    static const char *const map[][2] = {
        {"text/plain", "text"},
        {"text/html", "html"},
        {"text/markdown", "markdown"},
        {"image/svg+xml", "svg"},
        {"image/png", "png"},
        {"image/jpeg", "jpeg"},
        {"application/pdf", "pdf"},
        {"text/latex", "latex"},
        {"application/json", "json"},
        {"application/javascript", "javascript"},
        {"e2b/data", "data"},
        {"e2b/chart", "chart"},
        {"application/vnd.nanobox.data+json", "data"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcmp(mime, map[i][0]))
            return map[i][1];
    return NULL;
}

/* Was field written for one of the first n MIME types of data (or is it chart, and there is one)? */
static int field_taken(yajl_val data, size_t n, const char *field, int has_chart)
{
    if (has_chart && !strcmp(field, "chart"))
        return 1;
    for (size_t i = 0; i < n; i++) {
        const char *f = mime_field(YAJL_GET_OBJECT(data)->keys[i]);
        if (f != NULL && !strcmp(f, field))
            return 1;
    }
    return 0;
}

/*
 * A result event's data {mime: value} as E2B's line: each MIME type a field
 * of its own; the event's chart (a figure's, next to its PNG) as "chart".
 * A field two MIME types map to is the first one's.
 */
static void result_line(yajl_gen g, yajl_val ev)
{
    yajl_val data = ev_get(ev, "data", yajl_t_object),
             main = ev_get(ev, "is_main_result", yajl_t_any),
             chart = ev_get(ev, "chart", yajl_t_object);
    size_t n = data != NULL ? YAJL_GET_OBJECT(data)->len : 0, extra = 0;

    yajl_gen_map_open(g);
    nb_json_kv_str(g, "type", "result");
    if (chart != NULL) {
        nb_json_cstr(g, "chart");
        nb_json_tree(g, chart);
    }
    for (size_t i = 0; i < n; i++) {
        const char *mime = YAJL_GET_OBJECT(data)->keys[i], *field = mime_field(mime);
        yajl_val v = YAJL_GET_OBJECT(data)->values[i];
        if (field == NULL) {
            extra++;
            continue;
        }
        if (field_taken(data, i, field, chart != NULL))
            continue;
        if (!strcmp(field, "text") && YAJL_IS_STRING(v)) {
            /* as E2B: a string's repr without its quotes ('abc' -> abc) */
            const char *t = nb_json_string(v);
            size_t len = strlen(t);
            nb_json_cstr(g, "text");
            if (len >= 2 && t[0] == '\'' && t[len - 1] == '\'')
                nb_json_str(g, t + 1, len - 2);
            else
                nb_json_str(g, t, len);
            continue;
        }
        nb_json_cstr(g, field);
        nb_json_tree(g, v);
    }
    if (extra > 0) {
        nb_json_cstr(g, "extra");
        yajl_gen_map_open(g);
        for (size_t i = 0; i < n; i++) {
            const char *mime = YAJL_GET_OBJECT(data)->keys[i];
            if (mime_field(mime) != NULL)
                continue;
            nb_json_cstr(g, mime);
            nb_json_tree(g, YAJL_GET_OBJECT(data)->values[i]);
        }
        yajl_gen_map_close(g);
    }
    nb_json_kv_bool(g, "is_main_result", main != NULL && YAJL_IS_TRUE(main));
    yajl_gen_map_close(g);
}

struct execute_sink {
    struct nb_req *r;
    yajl_gen g;
    int began, ended;
};

/* One event of the code engine as E2B's NDJSON line (or none). */
static int execute_event(void *ctx, yajl_val ev)
{
    struct execute_sink *k = ctx;
    yajl_val tv = ev_get(ev, "type", yajl_t_string);
    const char *type = tv != NULL ? nb_json_string(tv) : "";

    if (k->ended)
        return 0;
    if (!strcmp(type, "stdout") || !strcmp(type, "stderr") || !strcmp(type, "error")) {
        nb_json_tree(k->g,
                     ev); /* the same shape: {type, text} and {type, name, value, traceback} */
    } else if (!strcmp(type, "result")) {
        result_line(k->g, ev);
    } else if (!strcmp(type, "execution_count")) {
        yajl_val n = ev_get(ev, "execution_count", yajl_t_number);
        yajl_gen_map_open(k->g);
        nb_json_kv_str(k->g, "type", "number_of_executions");
        nb_json_cstr(k->g, "execution_count");
        if (n != NULL)
            nb_json_tree(k->g, n);
        else
            yajl_gen_null(k->g);
        yajl_gen_map_close(k->g);
    } else if (!strcmp(type, "end")) {
        k->ended = 1;
        yajl_gen_map_open(k->g);
        nb_json_kv_str(k->g, "type", "end_of_execution");
        yajl_gen_map_close(k->g);
    } else {
        return 0;
    }
    if (!k->began) {
        /* the status with the first line: errors before it keep theirs */
        nb_http_stream_begin(k->r, 200, "application/x-ndjson");
        k->began = 1;
    }
    return nb_http_stream_line(k->r, k->g) != 0 ? -1 : 0;
}

/* A default context's id is its language's name: the engine makes it on first use. */
static const char *default_context(const char *id)
{
    const char *lang = nb_code_language(id);
    return lang != NULL && !strcmp(lang, id) ? lang : NULL;
}

/* A context id: a default one's language into *language, else checked into *context. */
static int context_id(const char *id, const char **context, const char **language,
                      struct nb_apierr *ae)
{
    const char *dflt = default_context(id);
    if (dflt != NULL) {
        *language = dflt;
        return 0;
    }
    if (nb_route_ctx(id) != 0) {
        nb_apierr_set(ae, NB_E_NO_CONTEXT, "unknown_context", "no context '%.72s'", id);
        return -1;
    }
    *context = id;
    return 0;
}

int api_e2b_execute(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {
        {"code", NB_JT_STRING, NULL},
        {"context_id", NB_JT_STRING | NB_JT_NULL, NULL},
        {"language", NB_JT_STRING | NB_JT_NULL, NULL},
        {"env_vars", NB_JT_OBJECT | NB_JT_NULL, NULL},
    };
    enum { F_CODE, F_CONTEXT, F_LANGUAGE, F_ENV };
    struct execute_sink k = {r, NULL, 0, 0};
    struct nb_code_run rq = {0};
    const char *clang = NULL;
    struct nb_slot slot;
    yajl_val body = NULL;
    char **env = NULL, err[256];
    unsigned n_env = 0;
    int rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        goto out;
    if (nb_json_fields(body, f, sizeof(f) / sizeof(f[0]), err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (api_code_text(c, f[F_CODE].val, &rq.code, ae) != 0 ||
        api_code_language(f[F_LANGUAGE].val, NB_E_INVALID, &rq.language, ae) != 0 ||
        (f[F_CONTEXT].val != NULL &&
         context_id(nb_json_string(f[F_CONTEXT].val), &rq.context, &clang, ae) != 0) ||
        api_env_list(c, f[F_ENV].val, &env, &n_env, ae) != 0 ||
        data_sandbox(a, r, ra, E2B_PORT_CODE, NULL, NULL, &slot, ae) != 0)
        goto out;
    if (clang != NULL) {
        if (rq.language != NULL && strcmp(rq.language, clang) != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "language_mismatch", "context '%s' is %s, not %s",
                          clang, clang, rq.language);
            goto out;
        }
        rq.language = clang;
    }
    k.g = nb_json_gen();
    /* no timeout in E2B's request: the operator's longest; the client's abort ends it sooner */
    rq.timeout = c->exec_timeout_max;
    rq.env = env;
    rq.n_env = n_env;
    rq.on_event = execute_event;
    rq.ctx = &k;
    if (api_code_exec(a, r, &slot, &rq, ae) != 0)
        goto out;
    rc = NB_OK;
out:
    if (k.g != NULL)
        yajl_gen_free(k.g);
    api_env_free(env, n_env);
    yajl_tree_free(body);
    return rc;
}

/* ---- /contexts ---- */

/*
 * E2B's Context, {id, language, cwd}, of the engine's info. The default
 * contexts run in the workspace, which E2B's SDKs know as their home.
 */
static void context_json(yajl_gen g, const struct nb_conf *c, yajl_val info)
{
    static const char *const keys[] = {"id", "language", "cwd"};
    yajl_gen_map_open(g);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        yajl_val v = ev_get(info, keys[i], yajl_t_string);
        const char *s = v != NULL ? nb_json_string(v) : "";
        if (i == 2 && !strcmp(s, c->workspace))
            s = e2b_home(c);
        nb_json_kv_str(g, keys[i], s);
    }
    yajl_gen_map_close(g);
}

/* The engine's contexts, kept in the order it lists them (creation order). */
struct context_list {
    yajl_val *infos;
    size_t n;
};

static int list_keep(void *ctx, yajl_val info)
{
    struct context_list *l = ctx;
    l->infos = nb_xrealloc(l->infos, (l->n + 1) * sizeof(l->infos[0]));
    l->infos[l->n++] = info;
    return 1;
}

static const char *info_id(yajl_val info)
{
    yajl_val id = ev_get(info, "id", yajl_t_string);
    return id != NULL ? nb_json_string(id) : "";
}

/* A default context the engine has not started yet: it is made on first use. */
static void default_json(yajl_gen g, const struct nb_conf *c, const char *language)
{
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "id", language);
    nb_json_kv_str(g, "language", language);
    nb_json_kv_str(g, "cwd", e2b_home(c));
    yajl_gen_map_close(g);
}

/*
 * GET /contexts: every context, the default python and javascript ones
 * first (as E2B's server makes them at its start), then the others in the
 * order they were made: the last one listed is the newest.
 */
int api_e2b_contexts_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae)
{
    static const char *const first[] = {"python", "javascript"};
    struct context_list l = {NULL, 0};
    struct nb_slot slot;
    yajl_gen g;
    int rc = NB_ERR;

    if (data_sandbox(a, r, ra, E2B_PORT_CODE, NULL, NULL, &slot, ae) != 0 ||
        nb_code_contexts(&slot, list_keep, &l, ae) != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_array_open(g);
    for (size_t k = 0; k < sizeof(first) / sizeof(first[0]); k++) {
        size_t i;
        for (i = 0; i < l.n && strcmp(info_id(l.infos[i]), first[k]) != 0; i++)
            ;
        if (i < l.n)
            context_json(g, &a->conf, l.infos[i]);
        else
            default_json(g, &a->conf, first[k]);
    }
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(info_id(l.infos[i]), "python") != 0 &&
            strcmp(info_id(l.infos[i]), "javascript") != 0)
            context_json(g, &a->conf, l.infos[i]);
    yajl_gen_array_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    for (size_t i = 0; i < l.n; i++)
        yajl_tree_free(l.infos[i]);
    free(l.infos);
    return rc;
}

static int keep_first(void *ctx, yajl_val info)
{
    yajl_val *kept = ctx;
    if (*kept != NULL)
        return 0;
    *kept = info;
    return 1;
}

/* POST /contexts {language?, cwd?}: a new context, ready to run. */
int api_e2b_contexts_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                            struct nb_apierr *ae)
{
    struct nb_jfield f[] = {
        {"language", NB_JT_STRING | NB_JT_NULL, NULL},
        {"cwd", NB_JT_STRING | NB_JT_NULL, NULL},
    };
    const char *language = "python", *cwd = NULL;
    struct nb_slot slot;
    yajl_val body = NULL, info = NULL;
    char err[256];
    int rc = NB_ERR;
    yajl_gen g;

    if (api_read_json(a, r, &body, ae) != 0)
        goto out;
    if (nb_json_fields(body, f, sizeof(f) / sizeof(f[0]), err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (api_code_language(f[0].val, NB_E_INVALID, &language, ae) != 0)
        goto out;
    if (f[1].val != NULL) {
        cwd = nb_json_string(f[1].val);
        if (cwd[0] != '/' || strlen(cwd) > 1024) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "cwd must be an absolute path inside the sandbox");
            goto out;
        }
    }
    if (data_sandbox(a, r, ra, E2B_PORT_CODE, NULL, NULL, &slot, ae) != 0 ||
        nb_code_create(&slot, language, cwd != NULL ? cwd : e2b_home(&a->conf), NULL, 0, keep_first,
                       &info, ae) != 0)
        goto out;
    if (info == NULL) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "bad_gateway",
                      "the sandbox's code bridge sent bad data: no context in its answer");
        goto out;
    }
    g = nb_json_gen();
    context_json(g, &a->conf, info);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(info);
    yajl_tree_free(body);
    return rc;
}

/* The {ctx} of /contexts/{ctx}[/restart] (ra->arg is the path): 0, or 404. */
static int path_context(const struct nb_route_args *ra, char *out, size_t outlen,
                        struct nb_apierr *ae)
{
    const char *id = ra->arg + strlen("/contexts/");
    size_t n = strcspn(id, "/");
    snprintf(out, outlen, "%.*s", (int)n, id);
    if (n >= outlen || nb_route_ctx(out) != 0) {
        nb_apierr_set(ae, NB_E_NO_CONTEXT, "unknown_context", "no context '%.72s'", out);
        return -1;
    }
    return 0;
}

/* DELETE /contexts/{ctx}: its kernel stops. */
int api_e2b_context_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                           struct nb_apierr *ae)
{
    char id[NB_ROUTE_CTX_MAX + 1];
    struct nb_slot slot;
    if (path_context(ra, id, sizeof(id), ae) != 0 ||
        data_sandbox(a, r, ra, E2B_PORT_CODE, NULL, NULL, &slot, ae) != 0 ||
        nb_code_delete(&slot, id, ae) != 0)
        return NB_ERR;
    nb_http_no_content(r);
    return NB_OK;
}

/* POST /contexts/{ctx}/restart: its state is gone (a default one never started has none). */
int api_e2b_context_restart(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                            struct nb_apierr *ae)
{
    char id[NB_ROUTE_CTX_MAX + 1];
    struct nb_slot slot;
    yajl_val info = NULL;
    int rc;

    if (path_context(ra, id, sizeof(id), ae) != 0 ||
        data_sandbox(a, r, ra, E2B_PORT_CODE, NULL, NULL, &slot, ae) != 0)
        return NB_ERR;
    rc = nb_code_restart(&slot, id, keep_first, &info, ae);
    yajl_tree_free(info);
    if (rc != 0 &&
        !((ae->err == NB_E_NOT_FOUND || ae->err == NB_E_NO_CONTEXT) && default_context(id) != NULL))
        return NB_ERR;
    nb_http_no_content(r);
    return NB_OK;
}
