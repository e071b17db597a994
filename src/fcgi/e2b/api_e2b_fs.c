/*
 * api_e2b_fs.c - envd's filesystem.Filesystem service of the E2B facade
 * (docs/E2B.md), in Connect-RPC with JSON (unary calls), over the files
 * engine the native API uses (files.c): the agent stats, lists, creates,
 * moves and removes, with the sandbox user's rights.
 *
 *   Stat     {path}                   -> {entry: EntryInfo}
 *   ListDir  {path, depth}            -> {entries: [EntryInfo...]}
 *   MakeDir  {path}                   -> {entry} (already_exists if it is there)
 *   Move     {source, destination}    -> {entry} (the destination's)
 *   Remove   {path}                   -> {} (a directory with all it holds;
 *                                          a missing path is no error)
 *   WatchDir {path, recursive, includeEntry, allowNetworkMounts} (stream)
 *                                     -> start, filesystem {name, type, entry?}*,
 *                                          keepalive*; until the client leaves
 *                                          or its Connect-Timeout-Ms passes
 *   CreateWatcher {path, recursive}   -> {watcherId}
 *   GetWatcherEvents {watcherId}      -> {events: [{name, type}...]} since the last call
 *   RemoveWatcher {watcherId}         -> {}
 *
 * EntryInfo is protobuf-JSON: {name, type: FILE_TYPE_FILE|_DIRECTORY|
 * _SYMLINK, path (absolute), size (int64 as a string), mode (permission
 * bits; a symlink's: its target's), permissions ("-rw-r--r--", as Go
 * prints a FileMode), owner, group, modifiedTime (RFC 3339 to the
 * nanosecond), symlinkTarget? (a symlink's: its absolute path with every
 * link followed, as envd's filepath.EvalSymlinks; the link's own path
 * when that fails, as envd's), metadata? (a file's or directory's user.*
 * xattrs, envd >= 0.6.2)}. A relative path is in
 * the sandbox user's home (nanobox's workspace). Move crosses mounts
 * (the agent copies then deletes). The polling watcher calls
 * (CreateWatcher, GetWatcherEvents, RemoveWatcher: the Python SDK's
 * watch_dir) keep their watch in the sandbox's agent between requests.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "api_common.h"
#include "e2b_api.h"
#include "e2b_common.h"
#include "e2b_rpc.h"
#include "files.h"
#include "json.h"

/* The path member of a request, resolved as nb_files_path does (relative: E2B's home). */
static int body_path(struct nb_app *a, yajl_val body, const char *key, char *out, size_t outlen,
                     struct nb_apierr *ae)
{
    yajl_val v = e2b_rpc_member(body, key, NULL);
    if (v == NULL || !YAJL_IS_STRING(v)) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "%s must be a path (a string)", key);
        return -1;
    }
    if (e2b_path(&a->conf, nb_json_string(v), strlen(nb_json_string(v)), out, outlen, ae) != 0) {
        snprintf(ae->code, sizeof(ae->code), "invalid_argument");
        return -1;
    }
    return 0;
}

/* A files engine error as envd says it: the agent gone is the sandbox gone. */
static int fs_err(struct nb_apierr *ae)
{
    if (nb_err_is_down(ae->err))
        ae->err = NB_E_UPSTREAM;
    return NB_ERR;
}

/* Go's FileMode.String() of kind and mode: "drwxr-xr-x", "Lrwxrwxrwx", "-rw-r--r--". */
static void permissions(enum nb_file_kind kind, uint32_t mode, char *out)
{
    static const char rwx[] = "rwxrwxrwx";
    size_t n = 0;
    if (kind == NB_FILE_DIR)
        out[n++] = 'd';
    else if (kind == NB_FILE_SYMLINK)
        out[n++] = 'L';
    if (mode & 04000)
        out[n++] = 'u';
    if (mode & 02000)
        out[n++] = 'g';
    if (mode & 01000)
        out[n++] = 't';
    if (n == 0)
        out[n++] = '-';
    for (int i = 0; i < 9; i++)
        out[n++] = (mode & (0400u >> i)) ? rwx[i] : '-';
    out[n] = '\0';
}

static const char *file_type(enum nb_file_kind kind)
{
    switch (kind) {
    case NB_FILE_DIR:
        return "FILE_TYPE_DIRECTORY";
    case NB_FILE_SYMLINK:
        return "FILE_TYPE_SYMLINK";
    case NB_FILE_REGULAR:
        return "FILE_TYPE_FILE";
    default:
        return "FILE_TYPE_UNSPECIFIED";
    }
}

/*
 * key: the mtime as protobuf's JSON gives a Timestamp (Go's protojson, as
 * envd answers): RFC 3339 in UTC with 0, 3, 6 or 9 digits of fraction,
 * as few as hold the nanoseconds.
 */
static void json_mtime(yajl_gen g, const char *key, const struct nb_file_info *fi)
{
    char buf[48];
    struct tm tm;
    time_t tt = (time_t)fi->mtime;
    uint32_t ns = fi->mtime_nsec;
    size_t n;

    gmtime_r(&tt, &tm);
    n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    if (ns == 0)
        snprintf(buf + n, sizeof(buf) - n, "Z");
    else if (ns % 1000000u == 0)
        snprintf(buf + n, sizeof(buf) - n, ".%03uZ", (unsigned)(ns / 1000000u));
    else if (ns % 1000u == 0)
        snprintf(buf + n, sizeof(buf) - n, ".%06uZ", (unsigned)(ns / 1000u));
    else
        snprintf(buf + n, sizeof(buf) - n, ".%09uZ", (unsigned)ns);
    nb_json_kv_str(g, key, buf);
}

/*
 * envd's mode: the permission bits alone (Go's FileMode.Perm()); for a
 * symlink those of what it leads to, 0 when it leads nowhere.
 */
static uint32_t entry_mode(const struct nb_file_info *fi)
{
    if (fi->kind == NB_FILE_SYMLINK)
        return fi->tmode & 0777;
    return fi->mode & 0777;
}

/* One EntryInfo of the file at path (its name: the last component). */
static void entry_json(yajl_gen g, const char *path, const struct nb_file_info *fi)
{
    const char *slash = strrchr(path, '/');
    char perm[16], size[24];
    snprintf(size, sizeof(size), "%llu", (unsigned long long)fi->size);
    permissions(fi->kind, fi->mode, perm);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", slash != NULL && slash[1] != '\0' ? slash + 1 : path);
    nb_json_kv_str(g, "type", file_type(fi->kind));
    nb_json_kv_str(g, "path", path);
    nb_json_kv_str(g, "size", size);
    nb_json_kv_int(g, "mode", entry_mode(fi));
    nb_json_kv_str(g, "permissions", perm);
    nb_json_kv_str(g, "owner", fi->owner);
    nb_json_kv_str(g, "group", fi->group);
    json_mtime(g, "modifiedTime", fi);
    if (fi->kind == NB_FILE_SYMLINK) /* envd's EvalSymlinks, else the link's own path */
        nb_json_kv_str(g, "symlinkTarget", fi->real[0] != '\0' ? fi->real : path);
    e2b_json_metadata(g, &fi->meta);
    yajl_gen_map_close(g);
}

/* {"entry": EntryInfo} of path, as Stat, MakeDir and Move answer. */
static int answer_entry(struct nb_app *a, struct nb_req *r, const struct nb_slot *slot,
                        const char *path, struct nb_apierr *ae)
{
    struct nb_file_info *fi = nb_xmalloc(sizeof(*fi));
    yajl_gen g;
    if (nb_files_stat(a, slot, path, fi, ae) != 0) {
        free(fi);
        return fs_err(ae);
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "entry");
    entry_json(g, path, fi);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    free(fi);
    return NB_OK;
}

/* The request's sandbox and message: 0, or -1 with ae set. */
static int fs_request(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_slot *slot, yajl_val *body, struct nb_apierr *ae)
{
    return e2b_rpc_request(a, r, 0, body, ae) != 0 || e2b_rpc_sandbox(a, r, ra, slot, ae) != 0 ? -1
                                                                                               : 0;
}

int api_e2b_fs_stat(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1];
    struct nb_slot slot;
    yajl_val body = NULL;
    int rc = NB_ERR;

    if (fs_request(a, r, ra, &slot, &body, ae) == 0 &&
        body_path(a, body, "path", path, sizeof(path), ae) == 0)
        rc = answer_entry(a, r, &slot, path, ae);
    yajl_tree_free(body);
    return rc;
}

/* ---- ListDir ---- */

/* A listing's entry, kept until all are in and sorted. */
struct fs_entry {
    char *rel; /* below the directory listed */
    struct nb_file_info *fi;
};

struct fs_list {
    const char *dir;
    int not_dir;
    struct fs_entry *v;
    size_t n, cap;
};

static int list_info(void *arg, const struct nb_file_info *fi)
{
    struct fs_list *l = arg;
    if (fi->kind != NB_FILE_DIR) {
        l->not_dir = 1;
        return 1; /* stop: a file's bytes are not wanted */
    }
    return 0;
}

static int list_data(void *arg, const void *data, size_t len)
{
    (void)arg;
    (void)data;
    (void)len;
    return 1;
}

static int list_entry(void *arg, const struct nb_file_info *e)
{
    struct fs_list *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = nb_xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n].rel = nb_xstrdup(e->name);
    l->v[l->n].fi = nb_xmalloc(sizeof(*e));
    memcpy(l->v[l->n].fi, e, sizeof(*e));
    l->n++;
    return 0;
}

/* Walk order, as envd's (Go's WalkDir): a directory's own entries right after it. */
static int rel_cmp(const void *x, const void *y)
{
    const unsigned char *p = (const unsigned char *)((const struct fs_entry *)x)->rel;
    const unsigned char *q = (const unsigned char *)((const struct fs_entry *)y)->rel;
    for (; *p != '\0' && *p == *q; p++, q++)
        ;
    return (*p == '/' ? 1 : *p) - (*q == '/' ? 1 : *q);
}

int api_e2b_fs_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1], *full = NULL;
    struct fs_list l = {path, 0, NULL, 0, 0};
    struct nb_files_sink sink = {list_info, list_data, list_entry, &l, 0, 1};
    struct nb_slot slot;
    yajl_val body = NULL, depth;
    yajl_gen g;
    int rc = NB_ERR;

    if (fs_request(a, r, ra, &slot, &body, ae) != 0 ||
        body_path(a, body, "path", path, sizeof(path), ae) != 0)
        goto out;
    /* uint32 in protobuf-JSON: a number or a string of digits; 0 (absent) lists one level */
    depth = e2b_rpc_member(body, "depth", NULL);
    if (depth != NULL) {
        const char *ds = YAJL_IS_STRING(depth) ? nb_json_string(depth) : NULL;
        long long d = YAJL_IS_INTEGER(depth) ? YAJL_GET_INTEGER(depth) : -1;
        if (ds != NULL && ds[0] != '\0' && strspn(ds, "0123456789") == strlen(ds) &&
            strlen(ds) <= 10)
            d = strtoll(ds, NULL, 10);
        if (d < 0 || d > 0xffffffffLL) {
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                          "depth must be a level count (1 or more)");
            goto out;
        }
        sink.depth = d > NB_FILES_MAX_DEPTH ? NB_FILES_MAX_DEPTH : (unsigned)(d < 1 ? 1 : d);
    }
    if (nb_files_read(a, &slot, path, &sink, ae) != 0) {
        fs_err(ae);
        goto out;
    }
    if (l.not_dir) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "path %.200s is not a directory", path);
        goto out;
    }
    qsort(l.v, l.n, sizeof(*l.v), rel_cmp);
    full = nb_xmalloc(2 * NB_FILES_PATH_MAX + 2);
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "entries");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < l.n; i++) {
        snprintf(full, 2 * NB_FILES_PATH_MAX + 2, "%s%s%s", path, strcmp(path, "/") ? "/" : "",
                 l.v[i].rel);
        entry_json(g, full, l.v[i].fi);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].rel);
        free(l.v[i].fi);
    }
    free(l.v);
    free(full);
    yajl_tree_free(body);
    return rc;
}

/* ---- MakeDir, Move, Remove ---- */

int api_e2b_fs_mkdir(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1];
    struct nb_file_info *fi = nb_xmalloc(sizeof(*fi));
    struct nb_slot slot;
    yajl_val body = NULL;
    int rc = NB_ERR;

    if (fs_request(a, r, ra, &slot, &body, ae) != 0 ||
        body_path(a, body, "path", path, sizeof(path), ae) != 0)
        goto out;
    /* envd says whether it was there: makeDir() is false then */
    if (nb_files_stat(a, &slot, path, fi, ae) == 0) {
        if (fi->kind == NB_FILE_DIR)
            nb_apierr_set(ae, NB_E_CONFLICT, "already_exists", "directory %.200s already exists",
                          path);
        else
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                          "path %.200s already exists and is not a directory", path);
        goto out;
    }
    if (ae->err != NB_E_NOT_FOUND) {
        fs_err(ae);
        goto out;
    }
    if (nb_files_mkdir(a, &slot, path, ae) != 0) {
        fs_err(ae);
        goto out;
    }
    rc = answer_entry(a, r, &slot, path, ae);
out:
    free(fi);
    yajl_tree_free(body);
    return rc;
}

int api_e2b_fs_move(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    char from[NB_FILES_PATH_MAX + 1], to[NB_FILES_PATH_MAX + 1];
    struct nb_slot slot;
    yajl_val body = NULL;
    int rc = NB_ERR;

    if (fs_request(a, r, ra, &slot, &body, ae) != 0 ||
        body_path(a, body, "source", from, sizeof(from), ae) != 0 ||
        body_path(a, body, "destination", to, sizeof(to), ae) != 0)
        goto out;
    if (nb_files_move(a, &slot, from, to, ae) != 0) {
        fs_err(ae);
        goto out;
    }
    rc = answer_entry(a, r, &slot, to, ae);
out:
    yajl_tree_free(body);
    return rc;
}

int api_e2b_fs_remove(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1];
    struct nb_slot slot;
    yajl_val body = NULL;
    int rc = NB_ERR;

    if (fs_request(a, r, ra, &slot, &body, ae) != 0 ||
        body_path(a, body, "path", path, sizeof(path), ae) != 0)
        goto out;
    /* as envd's RemoveAll: a directory goes with everything in it, a missing path is fine */
    if (nb_files_delete(a, &slot, path, 1, ae) != 0 && ae->err != NB_E_NOT_FOUND) {
        fs_err(ae);
        goto out;
    }
    nb_http_body(r, 200, "application/json", "{}", 2);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

/* ---- WatchDir ---- */

#define WATCH_TICK_MS 1000
#define WATCH_KEEPALIVE_S 50
#define WATCH_KEEPALIVE_MAX_S 600

struct fs_watch {
    struct nb_req *r;
    int64_t deadline; /* monotonic ms; 0: none */
    int64_t keepalive_ms, last_sent;
    int deadline_hit, stopping;
    /* include_entry (envd >= 0.6.3): each event's EntryInfo, stat'ed as it comes */
    int include_entry;
    struct nb_app *a;
    const struct nb_slot *slot;
    const char *dir;
};

/* One WatchDirResponse, {"<kind>": {...}} as built in g, in its envelope; -1: the client left. */
static int watch_send(struct fs_watch *w, yajl_gen g)
{
    w->last_sent = nb_clock_mono_ms();
    return e2b_rpc_stream_send(w->r, g);
}

static int watch_send_empty(struct fs_watch *w, const char *kind)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, kind);
    yajl_gen_map_open(g);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    return watch_send(w, g);
}

/* The deadline, and a worker asked to stop (SIGTERM stays pending while a request is served). */
static int watch_over(struct fs_watch *w)
{
    sigset_t pending;
    if (w->deadline > 0 && nb_clock_mono_ms() >= w->deadline) {
        w->deadline_hit = 1;
        return 1;
    }
    if (sigpending(&pending) == 0 &&
        (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1)) {
        w->stopping = 1;
        return 1;
    }
    return 0;
}

static int watch_started(void *arg, unsigned dirs)
{
    struct fs_watch *w = arg;
    (void)dirs;
    nb_http_stream_begin(w->r, 200, NB_RPC_STREAM_CTYPE);
    return watch_send_empty(w, "start");
}

/*
 * The entry of an event's name under w's directory into g, when w asks
 * for entries; one gone by now (removed, renamed away) has none, as in
 * envd. The stat is the agent's, with the sandbox user's rights.
 */
static void watch_entry_json(const struct fs_watch *w, yajl_gen g, const char *name)
{
    char *full;
    struct nb_file_info *fi;
    struct nb_apierr ae = {0};
    int n;
    if (w == NULL || !w->include_entry)
        return;
    full = nb_xmalloc(NB_FILES_PATH_MAX + 1);
    fi = nb_xmalloc(sizeof(*fi));
    n = snprintf(full, NB_FILES_PATH_MAX + 1, "%s%s%s", w->dir, strcmp(w->dir, "/") ? "/" : "",
                 name);
    if (n > 0 && n <= NB_FILES_PATH_MAX && nb_files_stat(w->a, w->slot, full, fi, &ae) == 0) {
        nb_json_cstr(g, "entry");
        entry_json(g, full, fi);
    }
    free(fi);
    free(full);
}

/* A FilesystemEvent {name, type, entry?} into g; 0, or -1 for an overflow (envd has no such
 * event). w: the watch that asks for entries, or NULL. */
static int fs_event_json(yajl_gen g, enum nb_watch_event ev, const char *name,
                         const struct fs_watch *w)
{
    static const char *const types[] = {"EVENT_TYPE_CREATE", "EVENT_TYPE_WRITE",
                                        "EVENT_TYPE_REMOVE", "EVENT_TYPE_RENAME",
                                        "EVENT_TYPE_CHMOD"};
    if ((unsigned)ev >= sizeof(types) / sizeof(types[0]))
        return -1;
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", name);
    nb_json_kv_str(g, "type", types[ev]);
    if (ev != NB_WATCH_REMOVE)
        watch_entry_json(w, g, name);
    yajl_gen_map_close(g);
    return 0;
}

static int watch_fs_event(void *arg, enum nb_watch_event ev, const char *name)
{
    struct fs_watch *w = arg;
    yajl_gen g;
    if (watch_over(w))
        return 1;
    if (ev == NB_WATCH_OVERFLOW)
        return 0;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "filesystem");
    fs_event_json(g, ev, name, w);
    yajl_gen_map_close(g);
    return watch_send(w, g);
}

static int watch_tick(void *arg)
{
    struct fs_watch *w = arg;
    if (watch_over(w))
        return 1;
    if (nb_clock_mono_ms() - w->last_sent >= w->keepalive_ms)
        return watch_send_empty(w, "keepalive");
    return 0;
}

int api_e2b_fs_watch(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1];
    const char *ka = nb_http_param(r, "HTTP_KEEPALIVE_PING_INTERVAL");
    long secs = ka != NULL ? strtol(ka, NULL, 10) : WATCH_KEEPALIVE_S;
    struct fs_watch w = {r, 0, 0, 0, 0, 0, 0, a, NULL, NULL};
    struct nb_files_watch_sink sink = {
        watch_started, watch_fs_event, watch_tick, &w, -1, WATCH_TICK_MS, 0};
    struct nb_slot slot;
    yajl_val body = NULL, rec, inc;
    int64_t timeout_ms;
    int rc = NB_ERR;

    if (e2b_rpc_request(a, r, 1, &body, ae) != 0 || e2b_rpc_sandbox(a, r, ra, &slot, ae) != 0 ||
        body_path(a, body, "path", path, sizeof(path), ae) != 0)
        goto out;
    if (nb_rpc_timeout_ms(nb_http_param(r, "HTTP_CONNECT_TIMEOUT_MS"), &timeout_ms) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "Connect-Timeout-Ms must be 1 to 10 digits");
        goto out;
    }
    rec = e2b_rpc_member(body, "recursive", NULL);
    /* allowNetworkMounts (envd >= 0.6.4) needs nothing: any directory the user may read is
     * watched (docs/E2B.md) */
    inc = e2b_rpc_member(body, "includeEntry", "include_entry");
    w.include_entry = inc != NULL && YAJL_IS_TRUE(inc);
    w.slot = &slot;
    w.dir = path;
    w.deadline = timeout_ms > 0 ? nb_clock_mono_ms() + timeout_ms : 0;
    w.keepalive_ms = (secs < 1 || secs > WATCH_KEEPALIVE_MAX_S ? WATCH_KEEPALIVE_S : secs) * 1000L;
    sink.client_fd = nb_http_client_fd(r);
    if (nb_files_watch(a, &slot, path, rec != NULL && YAJL_IS_TRUE(rec),
                       a->conf.files_watch_max_dirs, &sink, ae) != 0) {
        /* before the stream began: envd's codes (a file is invalid_argument) */
        if (ae->err == NB_E_CONFLICT)
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "path %.200s is not a directory",
                          path);
        else if (ae->err == NB_E_LIMIT)
            snprintf(ae->code, sizeof(ae->code), "resource_exhausted");
        fs_err(ae);
        goto out;
    }
    if (w.deadline_hit) {
        nb_apierr_set(ae, NB_E_TIMEOUT, "deadline_exceeded",
                      "the watch of %.200s passed its Connect-Timeout-Ms", path);
    } else if (w.stopping) {
        nb_apierr_set(ae, NB_E_UNAVAILABLE, "unavailable",
                      "nanobox-fcgi is stopping: this watch ends");
    } else {
        if (sink.gone)
            nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "the watched directory %.200s went away",
                          path);
        rc = sink.gone ? NB_ERR : NB_OK;
        if (!sink.gone) {
            struct nb_buf b;
            nb_buf_init(&b, 64);
            nb_rpc_end_stream(&b, NULL, NULL);
            nb_http_stream_bytes(r, b.data, b.len);
            nb_buf_free(&b);
        }
    }
out:
    yajl_tree_free(body);
    return rc;
}

/* ---- CreateWatcher, GetWatcherEvents, RemoveWatcher ---- */

/* The request's watcherId (a string of digits, as CreateWatcher gave it). */
static int body_watcher(yajl_val body, uint32_t *id, struct nb_apierr *ae)
{
    yajl_val v = e2b_rpc_member(body, "watcherId", "watcher_id");
    const char *s = v != NULL && YAJL_IS_STRING(v) ? nb_json_string(v) : NULL;
    unsigned long long n;
    if (s == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "watcherId must be a string");
        return -1;
    }
    n = s[0] != '\0' && strlen(s) <= 10 && strspn(s, "0123456789") == strlen(s)
            ? strtoull(s, NULL, 10)
            : 0;
    if (n == 0 || n > 0xffffffffULL) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "watcher %.64s not found", s);
        return -1;
    }
    *id = (uint32_t)n;
    return 0;
}

int api_e2b_fs_watcher_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                              struct nb_apierr *ae)
{
    char path[NB_FILES_PATH_MAX + 1], id_s[16];
    struct nb_slot slot;
    yajl_val body = NULL, rec;
    uint32_t id;
    yajl_gen g;
    int rc = NB_ERR;

    if (fs_request(a, r, ra, &slot, &body, ae) != 0 ||
        body_path(a, body, "path", path, sizeof(path), ae) != 0)
        goto out;
    rec = e2b_rpc_member(body, "recursive", NULL);
    if (nb_files_watcher_create(a, &slot, path, rec != NULL && YAJL_IS_TRUE(rec),
                                a->conf.files_watch_max_dirs, &id, ae) != 0) {
        if (ae->err == NB_E_CONFLICT)
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "path %.200s is not a directory",
                          path);
        else if (ae->err == NB_E_LIMIT)
            snprintf(ae->code, sizeof(ae->code), "resource_exhausted");
        fs_err(ae);
        goto out;
    }
    snprintf(id_s, sizeof(id_s), "%u", id);
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "watcherId", id_s);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

static int watcher_event_json(void *arg, enum nb_watch_event ev, const char *name)
{
    fs_event_json(arg, ev, name, NULL);
    return 0;
}

int api_e2b_fs_watcher_events(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                              struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_val body = NULL;
    uint32_t id;
    yajl_gen g = NULL;
    int rc = NB_ERR;

    if (fs_request(a, r, ra, &slot, &body, ae) != 0 || body_watcher(body, &id, ae) != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "events");
    yajl_gen_array_open(g);
    if (nb_files_watcher_events(a, &slot, id, watcher_event_json, g, ae) != 0) {
        if (ae->err == NB_E_NOT_FOUND)
            nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "watcher %u not found", id);
        fs_err(ae);
        goto out;
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    rc = NB_OK;
out:
    if (g != NULL)
        yajl_gen_free(g);
    yajl_tree_free(body);
    return rc;
}

int api_e2b_fs_watcher_remove(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                              struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_val body = NULL;
    uint32_t id;
    int rc = NB_ERR;

    if (fs_request(a, r, ra, &slot, &body, ae) != 0 || body_watcher(body, &id, ae) != 0)
        goto out;
    if (nb_files_watcher_remove(a, &slot, id, ae) != 0) {
        if (ae->err == NB_E_NOT_FOUND)
            nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "watcher %u not found", id);
        fs_err(ae);
        goto out;
    }
    nb_http_body(r, 200, "application/json", "{}", 2);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}
