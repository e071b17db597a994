/*
 * api_templates.c - the templates' routes (docs/API.md, Templates): build
 * one from a Dockerfile, read, list, follow its build log, remove. The
 * work is the templates engine's (templates.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "base64.h"
#include "e2bflow.h"
#include "json.h"
#include "registry.h"
#include "snapshot.h"
#include "templates.h"

#define MiB (1024ULL * 1024ULL)
#define FILES_MAX 1024 /* E2B_FILES_MAX: an E2B build is sent on to other nodes as this request */
#define LOG_POLL_US 200000

/* The public view of a template (the keys of docs/API.md). */
/* Whose templates r sees: a user key its own and the shared ones, an admin all (NULL). */
static const char *viewer(const struct nb_req *r)
{
    return nb_http_list_owner(r, NULL);
}

/*
 * Whose name a route's {name} is: the key's own (names are each key's,
 * templates.h), or for an admin with ?owner=NAME, NAME's.
 */
static const char *name_owner(struct nb_req *r, char *buf, size_t len)
{
    if (nb_http_key(r)->admin && nb_http_query(r, "owner", buf, len) == 0 && buf[0])
        return buf;
    return nb_http_key(r)->name;
}

static void template_json(yajl_gen g, const struct nb_template *t, int with_tail,
                          const struct nb_conf *c)
{
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", t->name);
    nb_json_kv_str(g, "status", t->status);
    nb_json_kv_str(g, "kind", t->kind);
    nb_json_kv_str(g, "image", t->image);
    nb_json_kv_str(g, "owner", t->owner); /* the key that built it; "": shared */
    nb_json_kv_int(g, "created_at", t->created_at);
    nb_json_kv_int(g, "size", t->size);
    nb_json_cstr(g, "digest");
    if (t->digest[0])
        nb_json_cstr(g, t->digest);
    else
        yajl_gen_null(g);
    nb_json_cstr(g, "error");
    if (t->error[0])
        nb_json_cstr(g, t->error);
    else
        yajl_gen_null(g);
    if (!strcmp(t->kind, "snapshot")) {
        nb_json_kv_str(g, "parent", t->parent);
        nb_json_kv_str(g, "parent_template", t->parent_tpl);
    }
    if (with_tail && !strcmp(t->status, "failed")) {
        /* the last lines of the build's output: what the failing step printed */
        char path[PATH_MAX], err[64];
        struct nb_buf tail;
        int fd;
        nb_buf_init(&tail, 4096);
        nb_template_log_path(c, t->owner, t->name, path, sizeof(path));
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char buf[16384];
            off_t end = lseek(fd, 0, SEEK_END);
            off_t from = end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
            ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
            char *line, *save = NULL;
            close(fd);
            buf[n > 0 ? n : 0] = '\0';
            for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                yajl_val v = NULL, s;
                const char *sp[] = {"stream", NULL};
                if (nb_json_parse(line, strlen(line), 4, &v, err, sizeof(err)) == 0 &&
                    (s = yajl_tree_get(v, sp, yajl_t_string)) != NULL) {
                    const char *txt = nb_json_string(s);
                    size_t tl = strlen(txt);
                    if (tail.len + tl > 4000 && tail.len > 0) {
                        /* keep the end: drop the oldest half */
                        size_t keep = tail.len / 2;
                        memmove(tail.data, tail.data + tail.len - keep, keep);
                        tail.len = keep;
                    }
                    nb_buf_append_some(&tail, txt, tl);
                }
                yajl_tree_free(v);
            }
        }
        nb_json_cstr(g, "log_tail");
        nb_json_str(g, tail.data ? tail.data : "", tail.len);
        nb_buf_free(&tail);
    }
    yajl_gen_map_close(g);
}

struct list_arg {
    yajl_gen g;
    const char *owner; /* an admin's ?owner=NAME: only NAME's; NULL all */
};

static void list_cb(void *arg, const struct nb_template *t)
{
    const struct list_arg *l = arg;
    if (l->owner == NULL || !strcmp(t->owner, l->owner))
        template_json(l->g, t, 0, NULL);
}

int api_templates_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    yajl_gen g = nb_json_gen();
    char want[NB_KEY_NAME_MAX + 2];
    struct list_arg l = {g, NULL};
    (void)ra;
    /* a user key lists its own and the shared ones; an admin all, or ?owner=NAME's own */
    if (nb_http_key(r)->admin && nb_http_query(r, "owner", want, sizeof(want)) == 0 && want[0])
        l.owner = want;
    yajl_gen_map_open(g);
    nb_json_cstr(g, "templates");
    yajl_gen_array_open(g);
    if (nb_template_list(a, viewer(r), list_cb, &l, ae) != 0) {
        yajl_gen_free(g);
        return NB_ERR;
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_template_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    char who[NB_KEY_NAME_MAX + 2];
    struct nb_template t;
    yajl_gen g;
    if (nb_template_get(a, ra->arg, name_owner(r, who, sizeof(who)), &t, ae) != 0)
        return NB_ERR;
    g = nb_json_gen();
    template_json(g, &t, 1, &a->conf);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

static int query_true(struct nb_req *r, const char *key)
{
    char v[16];
    return nb_http_query(r, key, v, sizeof(v)) == 0 &&
           (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
}

int api_template_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae)
{
    char who[NB_KEY_NAME_MAX + 2];
    const char *owner = name_owner(r, who, sizeof(who));
    struct nb_template t;
    struct nb_apierr gae;
    int snap, held;

    snap = nb_template_get(a, ra->arg, owner, &t, &gae) == 0 && !strcmp(t.kind, "snapshot");
    if (nb_template_delete(a, ra->arg, owner, query_true(r, "force"), ae) != 0) {
        /* a cluster's: a snapshot is its node's alone, so its removal goes there */
        if (ae->err == NB_E_NOT_FOUND &&
            (held = api_forward_template(a, r, owner, ra->arg, ae)) != 0)
            return held > 0 ? NB_OK : NB_ERR;
        return NB_ERR;
    }
    nb_http_audit(r, "template-delete", ra->arg);
    /* a cluster's: also a node that is away now drops it when it is back
     * (a snapshot's entry is its own node's to drop, whoever sent it on) */
    if (!nb_http_from_node(r) || snap)
        nb_registry_tpl_removed(a, nb_template_owner(owner), ra->arg);
    if (!nb_http_from_node(r))
        nb_e2bflow_drop(a, owner, ra->arg); /* an E2B build's flow, if it was one, ends */
    nb_http_no_content(r);
    if (!snap)
        api_fanout(a, r); /* a cluster's: gone from every node */
    return NB_OK;
}

int api_templates_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {
        {"name", NB_JT_STRING, NULL},  {"dockerfile", NB_JT_STRING, NULL},
        {"files", NB_JT_OBJECT, NULL}, {"memory", NB_JT_INT | NB_JT_STRING, NULL},
        {"cpus", NB_JT_NUMBER, NULL},
    };
    enum { F_NAME, F_DOCKERFILE, F_FILES, F_MEMORY, F_CPUS };
    struct nb_template_req rq;
    struct nb_registry_tpl reg;
    struct nb_template_file files[FILES_MAX];
    struct nb_buf data[FILES_MAX];
    struct nb_template t;
    size_t n_files = 0;
    char err[256];
    yajl_val body = NULL;
    yajl_gen g;
    int rc = NB_ERR;
    /* base64 of the whole context, and the JSON around it */
    size_t cap = c->max_body + c->template_context_max / 3 * 4 + 64 * 1024;

    (void)ra;
    memset(&rq, 0, sizeof(rq));
    memset(&reg, 0, sizeof(reg));
    if (api_read_json_cap(a, r, cap, &body, "bad_field", ae) != 0)
        return NB_ERR;
    if (nb_json_fields(body, f, sizeof(f) / sizeof(f[0]), err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (f[F_NAME].val == NULL || f[F_DOCKERFILE].val == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "name and dockerfile are required");
        goto out;
    }
    rq.name = nb_json_string(f[F_NAME].val);
    rq.owner = nb_http_key(r)->name; /* its owner, within that key's max_templates */
    /* a build another node sent on was judged there, over the whole cluster */
    rq.max_templates = nb_http_from_node(r) ? 0 : nb_http_key(r)->max_templates;
    rq.dockerfile = nb_json_string(f[F_DOCKERFILE].val);
    rq.dockerfile_len = strlen(rq.dockerfile);
    if (f[F_MEMORY].val) {
        uint64_t m;
        if (api_memory_value(f[F_MEMORY].val, &m) != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "memory must be bytes or a size like \"512m\"");
            goto out;
        }
        if (m < 6 * MiB || m > c->template_memory) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                          "memory of a build must be between 6m and %llu bytes (template_memory)",
                          (unsigned long long)c->template_memory);
            goto out;
        }
        rq.memory = m;
    }
    if (f[F_CPUS].val) {
        double cpus = nb_json_double(f[F_CPUS].val);
        if (!(cpus >= 0.01) || cpus * 1e9 > (double)c->template_nano_cpus + 0.5) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                          "cpus of a build must be between 0.01 and %g (template_cpus)",
                          (double)c->template_nano_cpus / 1e9);
            goto out;
        }
        rq.nano_cpus = (uint64_t)(cpus * 1e9 + 0.5);
    }
    if (f[F_FILES].val) {
        yajl_val o = f[F_FILES].val;
        if (o->u.object.len > FILES_MAX) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "files: at most %d entries", FILES_MAX);
            goto out;
        }
        for (size_t i = 0; i < o->u.object.len; i++) {
            yajl_val v = o->u.object.values[i];
            if (!YAJL_IS_STRING(v)) {
                nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                              "files: \"%.100s\" must be base64 text", o->u.object.keys[i]);
                goto out;
            }
            if (strlen(nb_json_string(v)) / 4 * 3 > c->template_context_max) {
                nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                              "files: \"%.100s\" is over template_context_max (%zu bytes)",
                              o->u.object.keys[i], c->template_context_max);
                goto out;
            }
            nb_buf_init(&data[n_files], c->template_context_max + 3);
            n_files++;
            if (nb_base64_decode(&data[n_files - 1], nb_json_string(v),
                                 strlen(nb_json_string(v))) != 0) {
                nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                              "files: \"%.100s\" is not valid base64", o->u.object.keys[i]);
                goto out;
            }
            files[i].path = o->u.object.keys[i];
            files[i].data = data[n_files - 1].data;
            files[i].len = data[n_files - 1].len;
        }
        rq.files = files;
        rq.n_files = n_files;
    }
    /* a cluster's: its entry in etcd first, where max_templates counts every node's */
    if (!nb_http_from_node(r) && nb_template_name_ok(rq.name) &&
        nb_registry_tpl_reserve(a, nb_template_owner(rq.owner), rq.name, rq.max_templates, &reg,
                                ae) != 0)
        goto out;
    if (nb_template_submit(a, &rq, &t, ae) != 0) {
        nb_registry_tpl_release(a, &reg);
        goto out;
    }
    nb_registry_tpl_commit(a, &reg, r->body.data, r->body.len);
    nb_http_audit(r, "template-build", rq.name);
    g = nb_json_gen();
    template_json(g, &t, 0, c);
    nb_http_json(r, 202, g);
    yajl_gen_free(g);
    /* a cluster's: built on every node, so that a create of it can go to any */
    api_fanout(a, r);
    rc = NB_OK;
out:
    for (size_t i = 0; i < n_files; i++)
        nb_buf_free(&data[i]);
    yajl_tree_free(body);
    return rc;
}

/* POST /sandbox/{id}/snapshot {name?}: 201 and the new template (kind "snapshot"). */
int api_sandbox_snapshot(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae)
{
    struct nb_jfield f[] = {{"name", NB_JT_STRING, NULL}};
    struct nb_template t;
    char err[256];
    yajl_val body = NULL;
    yajl_gen g;
    int rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (nb_json_fields(body, f, 1, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (nb_snapshot_take(a, ra->id, f[0].val ? nb_json_string(f[0].val) : NULL,
                         nb_http_key(r)->name, nb_http_key(r)->max_templates, &t, ae) != 0)
        goto out;
    g = nb_json_gen();
    template_json(g, &t, 0, &a->conf);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

/* The log's last line, {"status", "error"?}, for a build whose builder has not written it yet. */
static void final_line(struct nb_req *r, const struct nb_template *t)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "status", t->status);
    if (t->error[0])
        nb_json_kv_str(g, "error", t->error);
    yajl_gen_map_close(g);
    nb_http_stream_line(r, g);
    yajl_gen_free(g);
}

/*
 * The log as NDJSON: each line as the builder wrote it ({"stream"},
 * {"error"}, and last {"status"}). With ?follow=1 the answer stays open
 * until that last line, or until the template stops building. Docker tags
 * a build's image before the builder writes its last line: a reader that
 * sees the build ended without it gets the line from the template's state.
 */
int api_template_logs(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    char who[NB_KEY_NAME_MAX + 2];
    struct nb_template t;
    char path[PATH_MAX], buf[8192];
    struct nb_buf line;
    int follow = query_true(r, "follow"), fd = -1, wfd = -1, final = 0, gone = 0, ended = 0;
    unsigned idle = 0;
    time_t deadline = time(NULL) + a->conf.template_timeout + 60;
    const char *owner = name_owner(r, who, sizeof(who));

    if (nb_template_get(a, ra->arg, owner, &t, ae) != 0)
        return NB_ERR;
    nb_template_log_path(&a->conf, t.owner, t.name, path, sizeof(path));
    nb_http_stream_begin(r, 200, "application/x-ndjson");
    if (!strcmp(t.kind, "image"))
        return NB_OK; /* the operator's images: built elsewhere, no log */
    nb_buf_init(&line, 256 * 1024);
    if (follow)
        wfd = nb_template_log_watch(&a->conf); /* a new line wakes us, not the next poll */
    while (!final && !gone) {
        ssize_t n = 0;
        if (fd < 0)
            fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            n = read(fd, buf, sizeof(buf));
        for (ssize_t i = 0; i < n && !final && !gone; i++) {
            char err[64];
            yajl_val v = NULL;
            const char *stp[] = {"status", NULL};
            yajl_gen g;
            if (buf[i] != '\n') {
                nb_buf_append_some(&line, buf + i, 1);
                continue;
            }
            if (nb_json_parse(line.data ? line.data : "", line.len, 8, &v, err, sizeof(err)) == 0 &&
                v) {
                g = nb_json_gen();
                nb_json_tree(g, v);
                gone = nb_http_stream_line(r, g) != 0; /* the client left */
                yajl_gen_free(g);
                final = yajl_tree_get(v, stp, yajl_t_string) != NULL; /* the build's end */
            }
            yajl_tree_free(v);
            line.len = 0;
        }
        if (n > 0)
            continue;
        if (!follow || ended || time(NULL) > deadline)
            break;
        /* nothing new: still building? If not, one more read for its last lines */
        if (++idle % 5 == 0 && (nb_template_get(a, ra->arg, owner, &t, ae) != 0 ||
                                strcmp(t.status, "building") != 0)) {
            ended = 1;
            continue;
        }
        nb_template_wait(wfd, LOG_POLL_US);
    }
    if (fd >= 0)
        close(fd);
    if (wfd >= 0)
        close(wfd);
    nb_buf_free(&line);
    if (!final && !gone && nb_template_get(a, ra->arg, owner, &t, ae) == 0 &&
        strcmp(t.status, "building") != 0)
        final_line(r, &t);
    return NB_OK;
}
