/*
 * api_e2b_tpl.c - E2B's template API (docs/E2B.md, "Templates") over
 * nanobox's template builder (templates.h): the v3 build flow of E2B's
 * Template SDK and `e2b template build`. Nothing here builds: E2B's steps
 * become a Dockerfile and a build context for nb_template_submit, under
 * the key's own name, and E2B's answers are read off that template.
 *
 * An E2B template's templateID is its name (alias) among the key's
 * templates, its buildID a UUID of the same keyed hash as its image's
 * (nb_template_key): another key's name is another template, never found.
 * What E2B keeps between its calls is kept under
 * <sandbox_dir>/templates/e2b/:
 *   t-<key>          a template requested (POST /v3/templates), not yet built
 *   u-<okey>-<hash>  an upload of the owner's files (a tar, gzip'd or not),
 *                    by the content hash the SDK names it by
 * An upload link is this same service's URL, signed with the instance's
 * keyed hash (owner, name, hash, expiry): the SDK PUTs the files there
 * without its key.
 *
 * On a cluster (e2bflow.h) that state is the flow's home node's, the one
 * that took POST /v3/templates: its record in etcd names it, and a call of
 * the flow another node takes is relayed there (flow_route). The home
 * registers the build as a native one (its entry and recipe) and sends the
 * equivalent native build (POST /templates, the Dockerfile and context it
 * made) to every other node; a removal goes everywhere the same way.
 */
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_common.h"
#include "base64.h"
#include "cluster.h"
#include "e2b_api.h"
#include "e2b_common.h"
#include "e2bflow.h"
#include "json.h"
#include "registry.h"
#include "templates.h"

#define E2B_TPL_BASE "base"
#define E2B_TPL_CODE "code-interpreter-v1"
/* an upload link is good for this long */
#define E2B_UPLOAD_TTL 3600
/* files of one build's context, all uploads together */
#define E2B_FILES_MAX 1024
/* a key's kept uploads together: at most this many times template_context_max */
#define E2B_UPLOADS_KEPT 4
/* entries of one upload, directories included */
#define E2B_ENTRIES_MAX 4096
#define E2B_STEPS_MAX 256
#define E2B_HASH_LEN 64

/* ---- names, paths, ids ---- */

static const char *owner_of(struct nb_req *r)
{
    return nb_http_key(r)->name;
}

/* The path's segments (after the leading '/'): up to max, their count; -1 if more. */
static int split_path(const char *path, char seg[][128], int max)
{
    int n = 0;
    const char *p = path;
    while (*p == '/')
        p++;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (n == max || l == 0 || l >= 128)
            return -1;
        memcpy(seg[n], p, l);
        seg[n][l] = '\0';
        n++;
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

static int hash_ok(const char *h)
{
    return strlen(h) == E2B_HASH_LEN && strspn(h, "0123456789abcdef") == E2B_HASH_LEN;
}

static void e2b_dir(const struct nb_conf *c, char *out, size_t n)
{
    nb_template_work_path(c, "e2b", out, n);
}

static int ensure_dir(const struct nb_conf *c)
{
    char p[PATH_MAX];
    nb_template_work_path(c, "", p, sizeof(p));
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
        return -1;
    e2b_dir(c, p, sizeof(p));
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* e2b/t-<key>: the owner's template name requested, not built yet */
static void marker_path(const struct nb_conf *c, const char *owner, const char *name, char *out,
                        size_t n)
{
    char key[NB_TPL_KEY_LEN + 1], f[64];
    nb_template_key(c, owner, name, key);
    snprintf(f, sizeof(f), "e2b/t-%s", key);
    nb_template_work_path(c, f, out, n);
}

/* e2b/u-<okey>-<hash>: the owner's upload of hash */
static void upload_path(const struct nb_conf *c, const char *owner, const char *hash, char *out,
                        size_t n)
{
    char key[NB_TPL_KEY_LEN + 1], f[160];
    nb_template_key(c, owner, "", key);
    snprintf(f, sizeof(f), "e2b/u-%s-%s", key, hash);
    nb_template_work_path(c, f, out, n);
}

/* The build id of owner's name: its keyed hash as a UUID. */
static void build_id(const struct nb_conf *c, const char *owner, const char *name, char out[40])
{
    char k[NB_TPL_KEY_LEN + 1];
    nb_template_key(c, owner, name, k);
    snprintf(out, 40, "%.8s-%.4s-%.4s-%.4s-%.12s", k, k + 8, k + 12, k + 16, k + 20);
}

static int is_marked(const struct nb_conf *c, const char *owner, const char *name)
{
    char p[PATH_MAX];
    marker_path(c, owner, name, p, sizeof(p));
    return access(p, F_OK) == 0;
}

/* A name E2B gives nanobox's rules; E2B's "name:tag" tags are not kept. */
static int name_check(const char *name, struct nb_apierr *ae)
{
    if (strchr(name, ':') != NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_name",
                      "template tags (\"name:tag\") are not supported by nanobox: name it "
                      "without a tag");
        return -1;
    }
    if (!nb_template_name_ok(name)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_name",
                      "template name \"%.80s\" must match ^[a-z0-9][a-z0-9._-]{0,62}$", name);
        return -1;
    }
    return 0;
}

/*
 * Is name one of the key's own E2B templates (requested, or built, or a
 * snapshot)? The operator's images are not (their names are shared).
 */
static int own_template(struct nb_app *a, const char *owner, const char *name,
                        struct nb_template *t, int *built)
{
    char node[NB_NODE_NAME_MAX + 1];
    struct nb_apierr ae;
    int h;
    *built = 0;
    if (nb_template_name_ok(name) && nb_template_get(a, name, owner, t, &ae) == 0 &&
        strcmp(t->kind, "image") != 0) {
        *built = 1;
        return 1;
    }
    if (!nb_template_name_ok(name))
        return 0;
    /* a cluster's: requested on any node (its flow's record), whichever node asks */
    if (nb_e2bflow_on(a) && (h = nb_e2bflow_home(a, owner, name, node, sizeof(node), &ae)) >= 0)
        return h;
    return is_marked(&a->conf, owner, name);
}

/*
 * A call of owner's flow of id on a cluster: when its home (e2bflow.h) is
 * another node, r is sent there and its answer relayed: 1 answered; 0
 * serve it here (this node's flow, none, or a node's relay already); -1
 * with ae (503: etcd or the home node does not answer). The node is etcd's
 * word under the key's own name, never the client's.
 */
static int flow_route(struct nb_app *a, struct nb_req *r, const char *owner, const char *id,
                      struct nb_apierr *ae)
{
    char node[NB_NODE_NAME_MAX + 1], what[160];
    int h;
    /* a node's relay goes no further (an upload, keyless, is not from_node:
     * its header alone says so), so two nodes never pass a call back and forth */
    if (!nb_e2bflow_on(a) || nb_http_from_node(r) ||
        nb_http_param(r, "HTTP_X_NANOBOX_CLUSTER") != NULL || !nb_template_name_ok(id))
        return 0;
    h = nb_e2bflow_home(a, owner, id, node, sizeof(node), ae);
    if (h <= 0)
        return h;
    if (!strcmp(node, a->conf.node_name))
        return 0;
    snprintf(what, sizeof(what), "template %.100s's build", id);
    return api_forward_node(a, r, node, what, ae);
}

/* One of the operator's images' template names ("nanobox", "nanobox-python")? */
static int conf_name(const struct nb_conf *c, const char *name)
{
    char n[NB_TPL_NAME_MAX + 1];
    for (unsigned i = 0; i < c->n_images; i++) {
        nb_template_conf_name(c->images[i], n, sizeof(n));
        if (!strcmp(n, name))
            return 1;
    }
    return 0;
}

static void not_found(struct nb_apierr *ae, const char *what, const char *id)
{
    nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "%s '%.100s' not found", what, id);
}

/* ---- POST /v3/templates ---- */

int api_e2b_tpl_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    const char *sp_name[] = {"name", NULL}, *sp_alias[] = {"alias", NULL};
    const char *sp_tags[] = {"tags", NULL};
    yajl_val body = NULL, v, tags;
    char p[PATH_MAX], bid[40];
    const char *name;
    yajl_gen g;
    int fd, rc = NB_ERR;
    (void)ra;
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    v = yajl_tree_get(body, sp_name, yajl_t_string);
    if (v == NULL)
        v = yajl_tree_get(body, sp_alias, yajl_t_string);
    if (v == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "name is required");
        goto out;
    }
    name = nb_json_string(v);
    if (name_check(name, ae) != 0)
        goto out;
    tags = yajl_tree_get(body, sp_tags, yajl_t_array);
    if (tags != NULL && tags->u.array.len > 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "template tags are not supported by nanobox: build without tags");
        goto out;
    }
    if (conf_name(c, name) || !strcmp(name, E2B_TPL_BASE) || !strcmp(name, E2B_TPL_CODE)) {
        nb_apierr_set(ae, NB_E_CONFLICT, "name_taken",
                      "'%.100s' is one of the operator's templates", name);
        goto out;
    }
    if (ensure_dir(c) != 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot keep the template: %s",
                      strerror(errno));
        goto out;
    }
    marker_path(c, owner_of(r), name, p, sizeof(p));
    fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot keep the template: %s",
                      strerror(errno));
        goto out;
    }
    close(fd);
    /* a cluster's: this node is the flow's home, wherever its next calls land */
    if (nb_e2bflow_claim(a, owner_of(r), name, ae) != 0)
        goto out;
    build_id(c, owner_of(r), name, bid);
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "templateID", name);
    nb_json_kv_str(g, "buildID", bid);
    nb_json_kv_bool(g, "public", 0);
    nb_json_cstr(g, "aliases");
    yajl_gen_array_open(g);
    nb_json_cstr(g, name);
    yajl_gen_array_close(g);
    nb_json_cstr(g, "names");
    yajl_gen_array_open(g);
    nb_json_cstr(g, name);
    yajl_gen_array_close(g);
    nb_json_cstr(g, "tags");
    yajl_gen_array_open(g);
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_http_json(r, 202, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

/* ---- the upload link: GET and PUT /templates/{id}/files/{hash} ---- */

static int files_path(const char *path, char *id, char *hash)
{
    char seg[5][128];
    if (split_path(path, seg, 5) != 4 || strcmp(seg[0], "templates") || strcmp(seg[2], "files"))
        return -1;
    memcpy(id, seg[1], strlen(seg[1]) + 1); /* each under 128 */
    memcpy(hash, seg[3], strlen(seg[3]) + 1);
    return 0;
}

/* The signature of an upload link: the instance's keyed hash of what it is for. */
static void upload_sig(const struct nb_conf *c, const char *owner, const char *id, const char *hash,
                       long long exp, char sig[NB_TPL_KEY_LEN + 1])
{
    char what[400];
    snprintf(what, sizeof(what), "e2b-upload/%s/%s/%lld", id, hash, exp);
    nb_template_key(c, owner, what, sig);
}

static int owner_urlsafe(const char *o)
{
    return o[0] != '\0' &&
           strspn(o, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
               strlen(o);
}

int api_e2b_tpl_file_link(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    const char *owner = owner_of(r);
    char id[128], hash[128], p[PATH_MAX], sig[NB_TPL_KEY_LEN + 1], url[1024], origin[340];
    struct nb_template t;
    long long exp = (long long)time(NULL) + E2B_UPLOAD_TTL;
    int built, fr;
    yajl_gen g;
    (void)ra;
    if (files_path(r->path, id, hash) == 0 && (fr = flow_route(a, r, owner, id, ae)) != 0)
        return fr > 0 ? NB_OK : NB_ERR;
    if (files_path(r->path, id, hash) != 0 || !own_template(a, owner, id, &t, &built)) {
        not_found(ae, "template", id);
        return NB_ERR;
    }
    if (!hash_ok(hash)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_hash", "a files hash is 64 hex digits");
        return NB_ERR;
    }
    if (!owner_urlsafe(owner) || nb_http_param(r, "HTTP_HOST") == NULL) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "no upload link for this key");
        return NB_ERR;
    }
    upload_path(c, owner, hash, p, sizeof(p));
    upload_sig(c, owner, id, hash, exp, sig);
    /* where the client reached us (through a node's relay: that node's client) */
    api_origin(r, origin, sizeof(origin));
    snprintf(url, sizeof(url), "%s/templates/%s/files/%s?owner=%s&expires=%lld&signature=%s",
             origin, id, hash, owner, exp, sig);
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_bool(g, "present", access(p, F_OK) == 0);
    nb_json_kv_str(g, "url", url);
    yajl_gen_map_close(g);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    return NB_OK;
}

/*
 * A path of an uploaded tar: relative, no "." or ".." segment once a
 * leading "./" is gone ("" for the archive's "./" itself). 0, or -1.
 */
static int entry_path(const char *raw, const char **out)
{
    while (raw[0] == '.' && raw[1] == '/')
        raw += 2;
    *out = raw;
    if (raw[0] == '\0')
        return 0;
    if (raw[0] == '/')
        return -1;
    for (const char *s = raw; *s;) {
        const char *e = strchr(s, '/');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if ((l == 1 && s[0] == '.') || (l == 2 && s[0] == '.' && s[1] == '.'))
            return -1;
        if (!e)
            break;
        s = e + 1;
    }
    return 0;
}

typedef int (*tar_file_fn)(void *arg, const char *path, const void *data, size_t len);

/*
 * Walk an uploaded tar (gzip'd or not) in memory: every regular file to cb
 * (NULL: only checked). Directories pass; symlinks, hard links, devices,
 * a path out of the context, more than max bytes or E2B_FILES_MAX files
 * are refused (400 bad_upload, 413 too_large), nothing handed on after.
 */
static int tar_walk(const void *data, size_t len, size_t max, tar_file_fn cb, void *arg,
                    size_t *total, unsigned *count, struct nb_apierr *ae)
{
    struct archive *ar = archive_read_new();
    struct archive_entry *e;
    char *buf = NULL;
    int rc = -1, st;
    unsigned entries = 0;
    archive_read_support_filter_gzip(ar);
    archive_read_support_format_tar(ar);
    if (archive_read_open_memory(ar, data, len) != ARCHIVE_OK) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_upload", "the upload is not a tar archive: %.200s",
                      archive_error_string(ar) ? archive_error_string(ar) : "unreadable");
        goto out;
    }
    while ((st = archive_read_next_header(ar, &e)) == ARCHIVE_OK) {
        const char *raw = archive_entry_pathname(e), *path;
        /* directories too: a gzip'd stream of millions of headers is no context */
        if (++entries > E2B_ENTRIES_MAX) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_upload", "over %d entries in one upload",
                          E2B_ENTRIES_MAX);
            goto out;
        }
        la_int64_t size = archive_entry_size(e);
        mode_t type = archive_entry_filetype(e);
        if (raw == NULL || entry_path(raw, &path) != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_upload",
                          "upload entry \"%.200s\": an absolute path or a '..' segment leaves "
                          "the build context",
                          raw ? raw : "");
            goto out;
        }
        if (archive_entry_hardlink(e) != NULL || type == AE_IFLNK) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_upload",
                          "upload entry \"%.200s\" is a link: nanobox takes no links in a build "
                          "context (copy with resolveSymlinks: true)",
                          path);
            goto out;
        }
        if (type == AE_IFDIR)
            continue;
        if (type != AE_IFREG) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_upload",
                          "upload entry \"%.200s\" is not a file or a directory", path);
            goto out;
        }
        if (path[0] == '\0' || size < 0 || (size_t)size > max - *total) {
            nb_apierr_set(ae, size < 0 || path[0] == '\0' ? NB_E_INVALID : NB_E_TOO_LARGE,
                          size < 0 || path[0] == '\0' ? "bad_upload" : "too_large",
                          "upload entry \"%.200s\": over template_context_max (%zu bytes) "
                          "all files together",
                          path, max);
            goto out;
        }
        if (++*count > E2B_FILES_MAX) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_upload", "over %d files in one build",
                          E2B_FILES_MAX);
            goto out;
        }
        *total += (size_t)size;
        if (cb == NULL)
            continue;
        free(buf);
        buf = malloc(size > 0 ? (size_t)size : 1);
        if (buf == NULL || archive_read_data(ar, buf, (size_t)size) != (la_ssize_t)size) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_upload", "upload entry \"%.200s\" is cut short",
                          path);
            goto out;
        }
        if (cb(arg, path, buf, (size_t)size) != 0) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "out of memory");
            goto out;
        }
    }
    if (st != ARCHIVE_EOF) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_upload", "the upload is not a whole tar: %.200s",
                      archive_error_string(ar) ? archive_error_string(ar) : "unreadable");
        goto out;
    }
    rc = 0;
out:
    free(buf);
    archive_read_free(ar);
    return rc;
}

/* one of the owner's kept uploads */
struct kept {
    char name[256];
    time_t mtime;
    size_t size;
};

static int kept_older(const void *x, const void *y)
{
    const struct kept *a = x, *b = y;
    return a->mtime < b->mtime ? -1 : a->mtime > b->mtime;
}

/*
 * Room for an upload of len bytes among the owner's kept ones: they hold at
 * most E2B_UPLOADS_KEPT x template_context_max together; the oldest go
 * first (the SDK uploads again what it is told is not present).
 */
static void uploads_make_room(const struct nb_conf *c, const char *owner, size_t len)
{
    char dir[PATH_MAX], prefix[64], key[NB_TPL_KEY_LEN + 1];
    struct kept *k = NULL;
    size_t n = 0, cap = 0, total = 0, limit = E2B_UPLOADS_KEPT * c->template_context_max;
    struct dirent *de;
    DIR *d;
    e2b_dir(c, dir, sizeof(dir));
    nb_template_key(c, owner, "", key);
    snprintf(prefix, sizeof(prefix), "u-%s-", key);
    d = opendir(dir);
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (n == cap) {
            struct kept *nk = realloc(k, (cap = cap ? cap * 2 : 16) * sizeof(*k));
            if (nk == NULL)
                break;
            k = nk;
        }
        snprintf(k[n].name, sizeof(k[n].name), "%s", de->d_name);
        k[n].mtime = st.st_mtime;
        k[n].size = (size_t)st.st_size;
        total += k[n].size;
        n++;
    }
    if (k != NULL)
        qsort(k, n, sizeof(*k), kept_older);
    for (size_t i = 0; i < n && total + len > limit; i++)
        if (unlinkat(dirfd(d), k[i].name, 0) == 0)
            total -= k[i].size;
    closedir(d);
    free(k);
}

int api_e2b_tpl_file_put(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    char id[128], hash[128], owner[NB_KEY_NAME_MAX + 2], q[64], sig[NB_TPL_KEY_LEN + 1];
    char want[NB_TPL_KEY_LEN + 1], p[PATH_MAX], tmp[PATH_MAX + 16];
    struct nb_template t;
    long long exp;
    size_t total = 0;
    unsigned count = 0, diff = 0;
    int built, fd, fr;
    (void)ra;
    if (files_path(r->path, id, hash) != 0 || !hash_ok(hash) ||
        nb_http_query(r, "owner", owner, sizeof(owner)) != 0 || !owner_urlsafe(owner) ||
        nb_http_query(r, "expires", q, sizeof(q)) != 0 ||
        nb_http_query(r, "signature", sig, sizeof(sig)) != 0 || strlen(sig) != NB_TPL_KEY_LEN) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden", "not a signed upload link");
        return NB_ERR;
    }
    /* a cluster's: the link is signed by the flow's home, which checks it
     * (the owner named here only finds that node: another owner's is 403 there) */
    if (nb_e2bflow_on(a)) {
        if (nb_http_read_body(r, c->template_context_max, ae) != 0)
            return NB_ERR;
        if ((fr = flow_route(a, r, owner, id, ae)) != 0)
            return fr > 0 ? NB_OK : NB_ERR;
    }
    exp = strtoll(q, NULL, 10);
    upload_sig(c, owner, id, hash, exp, want);
    for (size_t i = 0; i < NB_TPL_KEY_LEN; i++)
        diff |= (unsigned)(want[i] ^ sig[i]);
    if (diff != 0 || exp < (long long)time(NULL)) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden",
                      diff ? "the upload link's signature is wrong" : "the upload link expired");
        return NB_ERR;
    }
    if (!own_template(a, owner, id, &t, &built)) {
        not_found(ae, "template", id);
        return NB_ERR;
    }
    if (r->body.data == NULL && nb_http_read_body(r, c->template_context_max, ae) != 0)
        return NB_ERR;
    if (tar_walk(r->body.data, r->body.len, c->template_context_max, NULL, NULL, &total, &count,
                 ae) != 0)
        return NB_ERR;
    if (ensure_dir(c) != 0)
        goto fail;
    uploads_make_room(c, owner, r->body.len);
    upload_path(c, owner, hash, p, sizeof(p));
    snprintf(tmp, sizeof(tmp), "%s.%d", p, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        goto fail;
    for (size_t off = 0; off < r->body.len;) {
        ssize_t w = write(fd, r->body.data + off, r->body.len - off);
        if (w <= 0) {
            close(fd);
            unlink(tmp);
            goto fail;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0 || rename(tmp, p) != 0) {
        unlink(tmp);
        goto fail;
    }
    nb_http_add_header(r, "Content-Length", "0");
    nb_http_body(r, 200, NULL, NULL, 0);
    return NB_OK;
fail:
    nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot keep the upload: %s", strerror(errno));
    return NB_ERR;
}

/* ---- POST /v2/templates/{id}/builds/{buildID}: the steps as a Dockerfile ---- */

struct ctx {
    struct nb_template_file files[E2B_FILES_MAX];
    char *paths[E2B_FILES_MAX];
    void *datas[E2B_FILES_MAX];
    size_t n;
    const char *hash; /* the upload being read */
};

static int ctx_add(void *arg, const char *path, const void *data, size_t len)
{
    struct ctx *x = arg;
    char *p, *d;
    if (x->n == E2B_FILES_MAX)
        return -1;
    p = malloc(strlen(path) + E2B_HASH_LEN + 8);
    d = malloc(len > 0 ? len : 1);
    if (p == NULL || d == NULL) {
        free(p);
        free(d);
        return -1;
    }
    sprintf(p, "e2b-%s/%s", x->hash, path);
    memcpy(d, data, len);
    x->paths[x->n] = p;
    x->datas[x->n] = d;
    x->files[x->n].path = p;
    x->files[x->n].data = d;
    x->files[x->n].len = len;
    x->n++;
    return 0;
}

static void ctx_free(struct ctx *x)
{
    for (size_t i = 0; i < x->n; i++) {
        free(x->paths[i]);
        free(x->datas[i]);
    }
}

/* s as a JSON string literal, Docker's exec form and COPY's JSON form read it so */
static int put_json_str(struct nb_buf *b, const char *s)
{
    yajl_gen g = nb_json_gen();
    const unsigned char *out;
    size_t len;
    int rc;
    nb_json_str(g, s, strlen(s));
    yajl_gen_get_buf(g, &out, &len);
    rc = nb_buf_append(b, out, len);
    yajl_gen_free(g);
    return rc;
}

/* One line's worth of text: no control characters (a newline would end the instruction). */
static int plain(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

static int user_ok(const char *u)
{
    return u[0] != '\0' && strlen(u) < 64 &&
           strspn(u, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:") ==
               strlen(u);
}

static int env_key_ok(const char *k)
{
    if (!((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z') || k[0] == '_'))
        return 0;
    return strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
           strlen(k);
}

/* ENV's value in double quotes: '"', '\\' and '$' escaped (no variable expands) */
static void put_env_value(struct nb_buf *b, const char *v)
{
    nb_buf_append(b, "\"", 1);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\' || *v == '$')
            nb_buf_append(b, "\\", 1);
        nb_buf_append(b, v, 1);
    }
    nb_buf_append(b, "\"", 1);
}

static yajl_val arg_at(yajl_val args, size_t i)
{
    if (args == NULL || !YAJL_IS_ARRAY(args) || i >= args->u.array.len ||
        !YAJL_IS_STRING(args->u.array.values[i]))
        return NULL;
    return args->u.array.values[i];
}

static int bad_step(struct nb_apierr *ae, size_t i, const char *why)
{
    nb_apierr_set(ae, NB_E_INVALID, "bad_step", "step %zu: %s", i + 1, why);
    return -1;
}

/* Has an upload of this hash been read into the context already? */
static int ctx_has_hash(char (*seen)[E2B_HASH_LEN + 1], size_t n, const char *h)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(seen[i], h))
            return 1;
    return 0;
}

/* The upload of hash into the context (once). */
static int ctx_read_upload(const struct nb_conf *c, const char *owner, const char *hash,
                           struct ctx *x, size_t *total, unsigned *count, struct nb_apierr *ae)
{
    char p[PATH_MAX];
    struct nb_buf b;
    int fd, rc;
    upload_path(c, owner, hash, p, sizeof(p));
    fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_step",
                      "the files of hash %s were not uploaded (GET the upload link first)", hash);
        return -1;
    }
    nb_buf_init(&b, c->template_context_max + 1);
    for (;;) {
        char chunk[65536];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n <= 0)
            break;
        if (nb_buf_append(&b, chunk, (size_t)n) != 0)
            break;
    }
    close(fd);
    x->hash = hash;
    rc = tar_walk(b.data ? b.data : "", b.len, c->template_context_max, ctx_add, x, total, count,
                  ae);
    nb_buf_free(&b);
    return rc;
}

/* The base image's FROM line: 403 for an image the operator does not allow. */
static int put_from(struct nb_app *a, const char *owner, yajl_val body, struct nb_buf *df,
                    struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    const char *sp_img[] = {"fromImage", NULL}, *sp_tpl[] = {"fromTemplate", NULL};
    const char *sp_reg[] = {"fromImageRegistry", NULL};
    yajl_val img = yajl_tree_get(body, sp_img, yajl_t_string);
    yajl_val tpl = yajl_tree_get(body, sp_tpl, yajl_t_string);
    yajl_val reg = yajl_tree_get(body, sp_reg, yajl_t_any);
    struct nb_template t;
    if (reg != NULL && !YAJL_IS_NULL(reg)) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "from_forbidden",
                      "registry credentials (fromImage with credentials, fromAWSRegistry, "
                      "fromGCPRegistry) are not supported: nanobox pulls no image; build "
                      "fromImage('%.100s') or fromTemplate('base')",
                      c->images[0]);
        return -1;
    }
    if (tpl != NULL) {
        const char *name = nb_json_string(tpl);
        struct nb_apierr e2;
        if (!strcmp(name, E2B_TPL_BASE))
            return nb_buf_printf(df, "FROM %s\n", c->images[0]);
        if (!strcmp(name, E2B_TPL_CODE))
            return nb_buf_printf(df, "FROM %s\n", c->code_image);
        if (!nb_template_name_ok(name) || nb_template_get(a, name, owner, &t, &e2) != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_template",
                          "fromTemplate('%.100s'): no such template of this key's (or 'base', "
                          "'code-interpreter-v1')",
                          name);
            return -1;
        }
        /* the builder writes the key's own template's name as its image */
        return nb_buf_printf(df, "FROM %s\n", !strcmp(t.kind, "image") ? t.image : t.name);
    }
    if (img == NULL)
        return nb_buf_printf(df, "FROM %s\n", c->images[0]);
    if (!plain(nb_json_string(img)) || strchr(nb_json_string(img), ' ') != NULL ||
        !nb_template_from_allowed(c, nb_json_string(img))) {
        struct nb_buf allowed;
        nb_buf_init(&allowed, 1024);
        for (unsigned i = 0; i < c->n_images; i++)
            nb_buf_printf(&allowed, "%s'%s'", i ? ", " : "", c->images[i]);
        nb_apierr_set(ae, NB_E_FORBIDDEN, "from_forbidden",
                      "base image '%.100s' is not allowed here: nanobox reaches no registry; "
                      "build from the operator's images (%.300s) or fromTemplate('base')",
                      nb_json_string(img), allowed.data ? allowed.data : "");
        nb_buf_free(&allowed);
        return -1;
    }
    return nb_buf_printf(df, "FROM %s\n", nb_json_string(img));
}

/* E2B's steps (RUN, COPY, ENV, WORKDIR, USER) as Dockerfile lines, their files into x. */
static int put_steps(const struct nb_conf *c, const char *owner, yajl_val steps, struct nb_buf *df,
                     struct ctx *x, struct nb_apierr *ae)
{
    const char *sp_type[] = {"type", NULL}, *sp_args[] = {"args", NULL};
    const char *sp_hash[] = {"filesHash", NULL};
    char seen[E2B_STEPS_MAX][E2B_HASH_LEN + 1], user[64] = "root";
    size_t n_seen = 0, total = 0;
    unsigned count = 0;
    if (steps == NULL)
        return 0;
    if (steps->u.array.len > E2B_STEPS_MAX) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_step", "at most %d steps", E2B_STEPS_MAX);
        return -1;
    }
    for (size_t i = 0; i < steps->u.array.len; i++) {
        yajl_val s = steps->u.array.values[i];
        yajl_val tv = yajl_tree_get(s, sp_type, yajl_t_string);
        yajl_val args = yajl_tree_get(s, sp_args, yajl_t_array);
        const char *type = nb_json_string(tv), *a0 = nb_json_string(arg_at(args, 0));
        const char *a1 = nb_json_string(arg_at(args, 1));
        if (tv == NULL || arg_at(args, 0) == NULL)
            return bad_step(ae, i, "a step has a type and string args");
        if (!strcmp(type, "RUN")) {
            int as = a1[0] != '\0';
            if (as && !user_ok(a1))
                return bad_step(ae, i, "not a user name");
            if (as)
                nb_buf_printf(df, "USER %s\n", a1);
            nb_buf_printf(df, "RUN [\"/bin/sh\", \"-c\", ");
            put_json_str(df, a0);
            nb_buf_printf(df, "]\n");
            if (as)
                nb_buf_printf(df, "USER %s\n", user);
        } else if (!strcmp(type, "COPY")) {
            const char *hash = nb_json_string(yajl_tree_get(s, sp_hash, yajl_t_string));
            const char *mode = nb_json_string(arg_at(args, 3));
            const char *src = a0;
            char from[600];
            if (!hash_ok(hash))
                return bad_step(ae, i, "COPY without a filesHash");
            if (a1[0] == '\0' || !plain(a1) || !plain(src))
                return bad_step(ae, i, "COPY needs a source and a destination");
            {
                const char *rel;
                char tmp[512];
                snprintf(tmp, sizeof(tmp), "%s", src);
                if (!strcmp(src, ".") || !strcmp(src, "./"))
                    tmp[0] = '\0'; /* the whole upload */
                if (strlen(src) >= sizeof(tmp) - 1 || entry_path(tmp, &rel) != 0)
                    return bad_step(ae, i, "COPY's source leaves the build context");
                snprintf(from, sizeof(from), "e2b-%s/%s", hash, rel[0] ? rel : ".");
            }
            if (mode[0] != '\0' && (strlen(mode) > 4 || strspn(mode, "01234567") != strlen(mode)))
                return bad_step(ae, i, "COPY's mode is octal digits");
            if (!ctx_has_hash(seen, n_seen, hash)) {
                if (ctx_read_upload(c, owner, hash, x, &total, &count, ae) != 0)
                    return -1;
                snprintf(seen[n_seen++], E2B_HASH_LEN + 1, "%s", hash);
            }
            nb_buf_printf(df, "COPY ");
            if (arg_at(args, 2) != NULL && nb_json_string(arg_at(args, 2))[0] != '\0') {
                const char *owner_u = nb_json_string(arg_at(args, 2));
                if (!user_ok(owner_u))
                    return bad_step(ae, i, "not a user name");
                nb_buf_printf(df, "--chown=%s ", owner_u);
            }
            nb_buf_printf(df, "[");
            put_json_str(df, from);
            nb_buf_printf(df, ", ");
            put_json_str(df, a1);
            nb_buf_printf(df, "]\n");
            if (mode[0] != '\0') {
                nb_buf_printf(df, "USER root\nRUN [\"chmod\", \"-R\", \"%s\", ", mode);
                put_json_str(df, a1);
                nb_buf_printf(df, "]\nUSER %s\n", user);
            }
        } else if (!strcmp(type, "ENV")) {
            if (args->u.array.len % 2 != 0)
                return bad_step(ae, i, "ENV takes names and values in pairs");
            nb_buf_printf(df, "ENV");
            for (size_t k = 0; k + 1 < args->u.array.len; k += 2) {
                const char *key = nb_json_string(arg_at(args, k));
                yajl_val vv = arg_at(args, k + 1);
                if (!env_key_ok(key) || vv == NULL || !plain(nb_json_string(vv)))
                    return bad_step(ae, i,
                                    "ENV: a name is [A-Za-z_][A-Za-z0-9_]*, its value "
                                    "one line");
                nb_buf_printf(df, " %s=", key);
                put_env_value(df, nb_json_string(vv));
            }
            nb_buf_printf(df, "\n");
        } else if (!strcmp(type, "WORKDIR")) {
            if (!plain(a0) || a0[0] == '\0')
                return bad_step(ae, i, "WORKDIR takes one path on one line");
            nb_buf_printf(df, "WORKDIR %s\n", a0);
        } else if (!strcmp(type, "USER")) {
            if (!user_ok(a0))
                return bad_step(ae, i, "not a user name");
            snprintf(user, sizeof(user), "%s", a0);
            nb_buf_printf(df, "USER %s\n", a0);
        } else {
            char why[128];
            snprintf(why, sizeof(why), "step type '%.40s' is not supported by nanobox", type);
            return bad_step(ae, i, why);
        }
    }
    return 0;
}

static int build_path(const char *path, int v2, char *id, char *bid)
{
    char seg[6][128];
    int n = split_path(path, seg, 6);
    if (v2 ? (n != 5 || strcmp(seg[0], "v2") || strcmp(seg[1], "templates") ||
              strcmp(seg[3], "builds"))
           : (n != 5 || strcmp(seg[0], "templates") || strcmp(seg[2], "builds") ||
              strcmp(seg[4], "status")))
        return -1;
    memcpy(id, seg[v2 ? 2 : 1], strlen(seg[v2 ? 2 : 1]) + 1); /* each under 128 */
    memcpy(bid, seg[v2 ? 4 : 3], strlen(seg[v2 ? 4 : 3]) + 1);
    return 0;
}

/* templateID and buildID of the path: the key's own, else 404. */
static int own_build(struct nb_app *a, struct nb_req *r, int v2, char *id, struct nb_template *t,
                     int *built, struct nb_apierr *ae)
{
    char bid[128], want[40];
    if (build_path(r->path, v2, id, bid) != 0 || !own_template(a, owner_of(r), id, t, built)) {
        not_found(ae, "template", id);
        return -1;
    }
    build_id(&a->conf, owner_of(r), id, want);
    if (strcmp(bid, want) != 0) {
        not_found(ae, "build", bid);
        return -1;
    }
    return 0;
}

/*
 * The native build equivalent of an E2B one (POST /templates' body: name,
 * dockerfile, files in base64): what the other nodes build and the recipe
 * a node that joins later builds. 0, or -1 (out of memory).
 */
static int native_body(const char *name, const struct nb_buf *df, const struct ctx *x,
                       struct nb_buf *out)
{
    const unsigned char *js;
    size_t len;
    int rc = 0;
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", name);
    nb_json_cstr(g, "dockerfile");
    nb_json_str(g, df->data ? df->data : "", df->len);
    nb_json_cstr(g, "files");
    yajl_gen_map_open(g);
    for (size_t i = 0; i < x->n && rc == 0; i++) {
        struct nb_buf b64;
        nb_buf_init(&b64, x->files[i].len / 3 * 4 + 8);
        rc = nb_base64_encode(&b64, x->files[i].data, x->files[i].len);
        nb_json_cstr(g, x->files[i].path);
        nb_json_str(g, b64.data ? b64.data : "", b64.len);
        nb_buf_free(&b64);
    }
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    yajl_gen_get_buf(g, &js, &len);
    nb_buf_init(out, len + 1);
    if (rc == 0)
        rc = nb_buf_append(out, js, len);
    yajl_gen_free(g);
    return rc == 0 ? 0 : -1;
}

/* A native request of the flow's home, to every other node of the cluster (api_fanout_req). */
static void send_on(struct nb_app *a, struct nb_req *r, const char *method, const char *path,
                    const char *query, const struct nb_buf *body)
{
    struct api_fwd_req q = {method, path, query, "application/json", NULL, 0};
    if (body != NULL) {
        q.body = body->data;
        q.body_len = body->len;
    }
    api_fanout_req(a, r, &q);
}

int api_e2b_tpl_build(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    const char *sp_steps[] = {"steps", NULL}, *sp_start[] = {"startCmd", NULL};
    const char *sp_ready[] = {"readyCmd", NULL};
    const char *owner = owner_of(r);
    char id[128];
    struct nb_template t;
    struct nb_template_req rq;
    struct nb_buf df;
    struct nb_registry_tpl reg;
    struct nb_buf native;
    struct ctx *x;
    yajl_val body = NULL, steps, v;
    char bid[128], path[300];
    int built, rc = NB_ERR, cluster = nb_e2bflow_on(a), fr;
    (void)ra;
    memset(&reg, 0, sizeof(reg));
    nb_buf_init(&native, 1);
    /* a cluster's: the build is its flow's home's (its uploads, its build id) */
    if (build_path(r->path, 1, id, bid) == 0 && (fr = flow_route(a, r, owner, id, ae)) != 0)
        return fr > 0 ? NB_OK : NB_ERR;
    if (own_build(a, r, 1, id, &t, &built, ae) != 0)
        return NB_ERR;
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    x = calloc(1, sizeof(*x));
    nb_buf_init(&df, 1024 * 1024);
    if (x == NULL) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "out of memory");
        goto out;
    }
    if (((v = yajl_tree_get(body, sp_start, yajl_t_string)) && nb_json_string(v)[0]) ||
        ((v = yajl_tree_get(body, sp_ready, yajl_t_string)) && nb_json_string(v)[0])) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "startCmd and readyCmd are not supported by nanobox: a sandbox starts "
                      "its own agent; run the command after Sandbox.create");
        goto out;
    }
    steps = yajl_tree_get(body, sp_steps, yajl_t_any);
    if (steps != NULL && !YAJL_IS_ARRAY(steps) && !YAJL_IS_NULL(steps)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "steps is an array");
        goto out;
    }
    if (put_from(a, owner, body, &df, ae) != 0 ||
        put_steps(c, owner, YAJL_IS_ARRAY(steps) ? steps : NULL, &df, x, ae) != 0)
        goto out;
    if (df.len >= df.cap) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large", "the steps are too long");
        goto out;
    }
    if (built && !strcmp(t.status, "building")) {
        nb_apierr_set(ae, NB_E_CONFLICT, "conflict", "template '%.100s' is building", id);
        goto out;
    }
    /* a cluster's: the build as a native one, its entry (max_templates over
     * every node) and its recipe in etcd, as POST /templates has them */
    if (cluster) {
        if (native_body(id, &df, x, &native) != 0) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "out of memory");
            goto out;
        }
        if (nb_registry_tpl_reserve(a, nb_template_owner(owner), id, nb_http_key(r)->max_templates,
                                    &reg, ae) != 0)
            goto out;
    }
    /* a rebuild of the key's template: the old one goes (its sandboxes keep running) */
    snprintf(path, sizeof(path), "/templates/%s", id);
    if (built && nb_template_delete(a, id, owner, 1, ae) != 0) {
        nb_registry_tpl_release(a, &reg);
        goto out;
    }
    if (cluster) /* the other nodes' copies too, before the new build reaches them */
        send_on(a, r, "DELETE", path, "force=1", NULL);
    memset(&rq, 0, sizeof(rq));
    rq.name = id;
    rq.owner = owner;
    rq.max_templates = nb_http_key(r)->max_templates;
    rq.dockerfile = df.data;
    rq.dockerfile_len = df.len;
    rq.files = x->files;
    rq.n_files = x->n;
    if (nb_template_submit(a, &rq, &t, ae) != 0) {
        nb_registry_tpl_release(a, &reg);
        goto out;
    }
    if (cluster) {
        nb_registry_tpl_commit(a, &reg, native.data, native.len);
        send_on(a, r, "POST", "/templates", "", &native);
    }
    /* openapi-fetch (the SDK's client) reads a body unless Content-Length says 0 */
    nb_http_add_header(r, "Content-Length", "0");
    nb_http_body(r, 202, NULL, NULL, 0);
    rc = NB_OK;
out:
    if (x != NULL) {
        ctx_free(x);
        free(x);
    }
    nb_buf_free(&df);
    nb_buf_free(&native);
    yajl_tree_free(body);
    return rc;
}

/* ---- GET /templates/{id}/builds/{buildID}/status ---- */

struct logs {
    yajl_gen g;
    long long skip;
    int with_level; /* logEntries, else logs (plain strings) */
};

/* The build log's lines (NDJSON: stream, error) from skip on. */
static void put_logs(const struct nb_conf *c, const char *owner, const char *name, long long skip,
                     int entries, yajl_gen g)
{
    char path[PATH_MAX], err[64], *line = NULL;
    size_t cap = 0;
    long long k = 0;
    int64_t now = (int64_t)time(NULL);
    FILE *f;
    nb_template_log_path(c, owner, name, path, sizeof(path));
    f = fopen(path, "re");
    if (f == NULL)
        return;
    while (getline(&line, &cap, f) > 0) {
        const char *sp_s[] = {"stream", NULL}, *sp_e[] = {"error", NULL};
        yajl_val v = NULL, s, e;
        if (nb_json_parse(line, strlen(line), 4, &v, err, sizeof(err)) != 0) {
            yajl_tree_free(v);
            continue;
        }
        s = yajl_tree_get(v, sp_s, yajl_t_string);
        e = yajl_tree_get(v, sp_e, yajl_t_string);
        if ((s != NULL || e != NULL) && k++ >= skip) {
            const char *msg = nb_json_string(s ? s : e);
            size_t l = strlen(msg);
            while (l > 0 && (msg[l - 1] == '\n' || msg[l - 1] == '\r'))
                l--;
            if (entries) {
                yajl_gen_map_open(g);
                e2b_json_time(g, "timestamp", now);
                nb_json_kv_str(g, "level", s ? "info" : "error");
                nb_json_cstr(g, "message");
                nb_json_str(g, msg, l);
                yajl_gen_map_close(g);
            } else {
                nb_json_str(g, msg, l);
            }
        }
        yajl_tree_free(v);
    }
    free(line);
    fclose(f);
}

int api_e2b_tpl_status(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    char id[128], bid[128], q[32];
    struct nb_template t;
    const char *status = "waiting";
    long long skip = 0;
    int built, fr;
    yajl_gen g;
    (void)ra;
    /* a cluster's: the build's state and log are its flow's home's */
    if (build_path(r->path, 0, id, bid) == 0 && (fr = flow_route(a, r, owner_of(r), id, ae)) != 0)
        return fr > 0 ? NB_OK : NB_ERR;
    if (own_build(a, r, 0, id, &t, &built, ae) != 0)
        return NB_ERR;
    if (nb_http_query(r, "logsOffset", q, sizeof(q)) == 0)
        skip = strtoll(q, NULL, 10);
    if (skip < 0)
        skip = 0;
    if (built)
        status = !strcmp(t.status, "ready")    ? "ready"
                 : !strcmp(t.status, "failed") ? "error"
                                               : "building";
    build_id(&a->conf, owner_of(r), id, bid);
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "templateID", id);
    nb_json_kv_str(g, "buildID", bid);
    nb_json_kv_str(g, "status", status);
    nb_json_cstr(g, "logs");
    yajl_gen_array_open(g);
    if (built)
        put_logs(&a->conf, owner_of(r), id, skip, 0, g);
    yajl_gen_array_close(g);
    nb_json_cstr(g, "logEntries");
    yajl_gen_array_open(g);
    if (built)
        put_logs(&a->conf, owner_of(r), id, skip, 1, g);
    yajl_gen_array_close(g);
    if (built && !strcmp(t.status, "failed")) {
        nb_json_cstr(g, "reason");
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "message", t.error[0] ? t.error : "the build failed");
        nb_json_cstr(g, "logEntries");
        yajl_gen_array_open(g);
        yajl_gen_array_close(g);
        yajl_gen_map_close(g);
    }
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

/* ---- GET /templates/aliases/{alias} ---- */

int api_e2b_tpl_alias(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    char seg[4][128];
    struct nb_template t;
    int built, pub;
    yajl_gen g;
    (void)ra;
    if (split_path(r->path, seg, 4) != 3) {
        not_found(ae, "template alias", "");
        return NB_ERR;
    }
    pub = !strcmp(seg[2], E2B_TPL_BASE) || !strcmp(seg[2], E2B_TPL_CODE) ||
          conf_name(&a->conf, seg[2]);
    if (!pub && !own_template(a, owner_of(r), seg[2], &t, &built)) {
        not_found(ae, "template alias", seg[2]);
        return NB_ERR;
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "templateID", seg[2]);
    nb_json_kv_bool(g, "public", pub);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

/* ---- DELETE /templates/{id} ---- */

int api_e2b_tpl_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    char seg[3][128], p[PATH_MAX];
    const char *owner = owner_of(r);
    struct nb_template t;
    int built;
    (void)ra;
    if (split_path(r->path, seg, 3) != 2 || !own_template(a, owner, seg[1], &t, &built)) {
        if (split_path(r->path, seg, 3) == 2 &&
            (!strcmp(seg[1], E2B_TPL_BASE) || !strcmp(seg[1], E2B_TPL_CODE) ||
             conf_name(&a->conf, seg[1]))) {
            nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden",
                          "'%.100s' is one of the operator's templates", seg[1]);
            return NB_ERR;
        }
        /* a cluster's: another node's snapshot (deleteSnapshot) goes to its node */
        if (split_path(r->path, seg, 3) == 2) {
            int held = api_forward_template(a, r, owner, seg[1], ae);
            if (held != 0)
                return held > 0 ? NB_OK : NB_ERR;
        }
        not_found(ae, "template", split_path(r->path, seg, 3) == 2 ? seg[1] : "");
        return NB_ERR;
    }
    /* a rebuilt alias replaces a build while its sandboxes run on; a
     * snapshot (deleteSnapshot) waits for its sandboxes: 409 in_use */
    if (built && nb_template_delete(a, seg[1], owner, !strcmp(t.kind, "build"), ae) != 0)
        return NB_ERR;
    /* a snapshot's entry in the cluster's registry goes (max_templates counts it) */
    if (built && !strcmp(t.kind, "snapshot") && !nb_http_from_node(r))
        nb_registry_tpl_removed(a, nb_template_owner(owner), seg[1]);
    marker_path(&a->conf, owner, seg[1], p, sizeof(p));
    unlink(p);
    /* a cluster's: gone from every node, now or when one that is away is back,
     * as a native removal; its flow is over */
    if (nb_e2bflow_on(a) && !nb_http_from_node(r) && (!built || strcmp(t.kind, "snapshot"))) {
        char path[300];
        snprintf(path, sizeof(path), "/templates/%s", seg[1]);
        nb_registry_tpl_removed(a, nb_template_owner(owner), seg[1]);
        send_on(a, r, "DELETE", path, "force=1", NULL);
        nb_e2bflow_drop(a, owner, seg[1]);
    }
    nb_http_body(r, 204, NULL, NULL, 0);
    return NB_OK;
}

/* ---- GET /templates ---- */

struct list_arg {
    yajl_gen g;
    const struct nb_conf *c;
    const char *owner;
};

static void list_cb(void *arg, const struct nb_template *t)
{
    const struct list_arg *l = arg;
    char bid[40];
    int pub = !strcmp(t->kind, "image");
    const char *name = t->name;
    if (!pub && strcmp(t->owner, l->owner) != 0)
        return;
    if (pub && !strcmp(t->image, l->c->images[0]))
        name = E2B_TPL_BASE;
    else if (pub && !strcmp(t->image, l->c->code_image))
        name = E2B_TPL_CODE;
    build_id(l->c, l->owner, t->name, bid);
    yajl_gen_map_open(l->g);
    nb_json_kv_str(l->g, "templateID", name);
    nb_json_kv_str(l->g, "buildID", bid);
    nb_json_kv_bool(l->g, "public", pub);
    nb_json_cstr(l->g, "aliases");
    yajl_gen_array_open(l->g);
    nb_json_cstr(l->g, name);
    yajl_gen_array_close(l->g);
    nb_json_cstr(l->g, "names");
    yajl_gen_array_open(l->g);
    nb_json_cstr(l->g, name);
    yajl_gen_array_close(l->g);
    nb_json_kv_str(l->g, "buildStatus",
                   !strcmp(t->status, "ready")    ? "ready"
                   : !strcmp(t->status, "failed") ? "error"
                                                  : "building");
    nb_json_kv_int(l->g, "cpuCount", 1);
    nb_json_kv_int(l->g, "memoryMB", 512);
    nb_json_kv_int(l->g, "diskSizeMB", (long long)(t->size / (1024 * 1024)));
    nb_json_kv_str(l->g, "envdVersion", "0.5.6");
    e2b_json_time(l->g, "createdAt", t->created_at);
    e2b_json_time(l->g, "updatedAt", t->created_at);
    nb_json_cstr(l->g, "lastSpawnedAt");
    yajl_gen_null(l->g);
    nb_json_kv_int(l->g, "spawnCount", 0);
    nb_json_kv_int(l->g, "buildCount", 1);
    nb_json_cstr(l->g, "createdBy");
    yajl_gen_null(l->g);
    yajl_gen_map_close(l->g);
}

int api_e2b_tpl_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    yajl_gen g = nb_json_gen();
    struct list_arg l = {g, &a->conf, owner_of(r)};
    (void)ra;
    yajl_gen_array_open(g);
    if (nb_template_list(a, owner_of(r), list_cb, &l, ae) != 0) {
        yajl_gen_free(g);
        return NB_ERR;
    }
    yajl_gen_array_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}
