/*
 * volume.c - see volume.h. Docker keeps the list (the volumes and their
 * labels); the file systems live under volume_dir as <id>.img, mounted on
 * <id>/. A lock file there orders the changes: a create or removal holds
 * it alone, a sandbox's create shared while it mounts volumes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "json.h"
#include "log.h"
#include "rootdisk.h"
#include "snapshot.h"
#include "table.h"
#include "url.h"
#include "volreg.h"
#include "volume.h"

#define MiB (1024ULL * 1024ULL)

int nb_volume_name_valid(const char *name)
{
    size_t n = strlen(name);
    static const char more[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";
    if (n == 0 || n > NB_VOLUME_NAME_MAX || strchr(more, name[0]) == NULL || name[0] == '_' ||
        name[0] == '.' || name[0] == '-')
        return 0;
    return strspn(name, more) == n;
}

/* volume_dir, else "volumes" next to the state file. */
static void vol_dir(const struct nb_conf *c, char *out, size_t len)
{
    const char *slash;
    if (c->volume_dir[0]) {
        snprintf(out, len, "%s", c->volume_dir);
        return;
    }
    slash = strrchr(c->state_file, '/');
    if (slash == NULL)
        snprintf(out, len, "volumes");
    else
        snprintf(out, len, "%.*s/volumes", (int)(slash - c->state_file), c->state_file);
}

/* The lock of volume_dir (made if need be), taken as how (LOCK_SH, LOCK_EX); its fd or -1. */
static int vol_lock(const struct nb_conf *c, int how, struct nb_apierr *ae)
{
    char dir[NB_CONF_STR + 16], path[NB_CONF_STR + 32];
    int fd;
    vol_dir(c, dir, sizeof(dir));
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot make volume_dir %s: %s", dir,
                      strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/.lock", dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || flock(fd, how) != 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot lock %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

void nb_volume_release(int lock)
{
    if (lock >= 0)
        close(lock);
}

static void vol_files(const struct nb_conf *c, const char *id, char *img, char *dir, size_t len)
{
    char base[NB_CONF_STR + 16];
    vol_dir(c, base, sizeof(base));
    snprintf(img, len, "%s/%s.img", base, id);
    snprintf(dir, len, "%s/%s", base, id);
}

/* Docker's answer's "message", else the status. */
static void docker_msg(const struct nb_buf *b, long status, char *out, size_t len)
{
    const char *mp[] = {"message", NULL};
    char err[64];
    yajl_val v = NULL, m;
    if (b->len > 0 && nb_json_parse(b->data, b->len, 8, &v, err, sizeof(err)) == 0 &&
        (m = yajl_tree_get(v, mp, yajl_t_string)) != NULL)
        snprintf(out, len, "%s", nb_json_string(m));
    else
        snprintf(out, len, "status %ld", status);
    yajl_tree_free(v);
}

/* One call to dockerd: its status, or -1 with ae (Docker down). */
static long dock(struct nb_app *a, const char *method, const char *path, const char *body,
                 struct nb_buf *resp, const char *what, struct nb_apierr *ae)
{
    struct nb_derr de = {0};
    long status = 0;
    if (nb_docker_request(&a->docker, method, path, body, 30000, &status, resp, &de) != 0) {
        nb_apierr_docker(ae, &de, what);
        return -1;
    }
    return status;
}

static void one_volume(yajl_val v, struct nb_volume *out)
{
    const char *np[] = {"Name", NULL}, *lp[] = {"Labels", NULL};
    yajl_val labels = yajl_tree_get(v, lp, yajl_t_object), x;
    const char *k[] = {NULL, NULL};
    memset(out, 0, sizeof(*out));
    x = yajl_tree_get(v, np, yajl_t_string);
    snprintf(out->docker, sizeof(out->docker), "%s", x ? nb_json_string(x) : "");
    k[0] = "nanobox.volume";
    x = labels ? yajl_tree_get(labels, k, yajl_t_string) : NULL;
    snprintf(out->name, sizeof(out->name), "%s", x ? nb_json_string(x) : "");
    k[0] = "nanobox.volume_id";
    x = labels ? yajl_tree_get(labels, k, yajl_t_string) : NULL;
    snprintf(out->id, sizeof(out->id), "%s", x ? nb_json_string(x) : "");
    k[0] = "nanobox.size";
    x = labels ? yajl_tree_get(labels, k, yajl_t_string) : NULL;
    out->size = x ? strtoull(nb_json_string(x), NULL, 10) : 0;
    k[0] = "nanobox.owner";
    x = labels ? yajl_tree_get(labels, k, yajl_t_string) : NULL;
    snprintf(out->owner, sizeof(out->owner), "%s", x ? nb_json_string(x) : "");
    k[0] = "nanobox.created";
    x = labels ? yajl_tree_get(labels, k, yajl_t_string) : NULL;
    out->created = x ? strtoll(nb_json_string(x), NULL, 10) : 0;
}

int nb_volume_list(struct nb_app *a, const char *owner, struct nb_volume **out, size_t *n,
                   struct nb_apierr *ae)
{
    const char *vp[] = {"Volumes", NULL};
    char filter[256], err[64];
    struct nb_buf path, b;
    yajl_val v = NULL, vols;
    long status;
    int rc = -1;
    *out = NULL;
    *n = 0;
    if (owner != NULL)
        snprintf(filter, sizeof(filter),
                 "{\"label\":[\"nanobox.instance=%s\",\"nanobox.owner=%s\",\"nanobox.volume\"]}",
                 a->conf.instance, owner);
    else
        snprintf(filter, sizeof(filter), "{\"label\":[\"nanobox.instance=%s\",\"nanobox.volume\"]}",
                 a->conf.instance);
    nb_buf_init(&path, 1024);
    nb_buf_init(&b, a->docker.max_response);
    nb_buf_printf(&path, "/volumes?filters=");
    nb_url_escape(&path, filter);
    nb_buf_append(&path, "", 1);
    status = dock(a, "GET", path.data, NULL, &b, "list the volumes", ae);
    if (status < 0)
        goto out;
    if (status != 200 || nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "could not list the volumes (%ld)",
                      status);
        goto out;
    }
    vols = yajl_tree_get(v, vp, yajl_t_array);
    if (vols != NULL && vols->u.array.len > 0) {
        *out = nb_xcalloc(vols->u.array.len, sizeof(**out));
        for (size_t i = 0; i < vols->u.array.len; i++) {
            one_volume(vols->u.array.values[i], &(*out)[*n]);
            if ((*out)[*n].name[0] && (*out)[*n].id[0])
                (*n)++;
        }
    }
    rc = 0;
out:
    yajl_tree_free(v);
    nb_buf_free(&b);
    nb_buf_free(&path);
    return rc;
}

static int not_found(struct nb_apierr *ae, const char *key)
{
    nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "no volume \"%.64s\"", key);
    return -1;
}

int nb_volume_get(struct nb_app *a, const char *owner, const char *key, struct nb_volume *out,
                  struct nb_apierr *ae)
{
    struct nb_volume *v;
    size_t n;
    int found = 0;
    if (nb_volume_list(a, owner, &v, &n, ae) != 0)
        return -1;
    for (size_t i = 0; i < n && !found; i++)
        if (!strcmp(v[i].name, key) || !strcmp(v[i].id, key)) {
            *out = v[i];
            found = 1;
        }
    free(v);
    return found ? 0 : not_found(ae, key);
}

static void new_id(char id[NB_VOLUME_ID_LEN + 1])
{
    unsigned char raw[NB_VOLUME_ID_LEN / 2];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        /* never expected: the clock's nanoseconds and the pid, unique enough in one instance */
        struct timespec ts;
        uint32_t x[2];
        clock_gettime(CLOCK_REALTIME, &ts);
        x[0] = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec;
        x[1] = (uint32_t)getpid() ^ (uint32_t)(ts.tv_sec >> 8);
        memcpy(raw, x, sizeof(raw));
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(id + 2 * i, 3, "%02x", raw[i]);
}

int nb_volume_quota(const struct nb_conf *c, const struct nb_key *key, size_t n, uint64_t held,
                    uint64_t size, struct nb_apierr *ae)
{
    unsigned max_count = key->max_volumes ? key->max_volumes : c->volume_max_count;
    uint64_t max_bytes = key->max_volume_bytes ? key->max_volume_bytes : c->volume_quota;
    const char *owner = key->name;

    if (max_count && n >= max_count) {
        nb_apierr_set(ae, NB_E_LIMIT, "quota", "quota %s=%u of key \"%s\" reached: %zu volumes",
                      key->max_volumes ? "max_volumes" : "volume_max_count", max_count, owner, n);
        return -1;
    }
    if (max_bytes && held + size > max_bytes) {
        nb_apierr_set(ae, NB_E_LIMIT, "quota",
                      "quota %s=%llu of key \"%s\": its volumes hold %llu bytes, %llu more asked",
                      key->max_volume_bytes ? "max_volume_bytes" : "volume_quota",
                      (unsigned long long)max_bytes, owner, (unsigned long long)held,
                      (unsigned long long)size);
        return -1;
    }
    return 0;
}

int nb_volume_create(struct nb_app *a, const struct nb_key *key, const char *name, uint64_t size,
                     struct nb_volume *out, struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    const char *owner = key->name;
    char img[NB_CONF_STR + 64], dir[NB_CONF_STR + 64], tmp[64], err[512];
    struct nb_volume *v;
    struct nb_buf b;
    uint64_t held = 0;
    size_t n;
    long status;
    yajl_gen g;
    char *body;
    int lock, rc = -1, claimed = 0;

    if (!nb_volume_name_valid(name)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_name",
                      "a volume's name is 1 to %d of A-Z, a-z, 0-9, _, . and -, the first a "
                      "letter or digit",
                      NB_VOLUME_NAME_MAX);
        return -1;
    }
    if (size == 0)
        size = c->volume_size_default;
    if (size < 16 * MiB || size > c->volume_size_max) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                      "a volume's size is 16m to %llu bytes (volume_size_max)",
                      (unsigned long long)c->volume_size_max);
        return -1;
    }
    if ((lock = vol_lock(c, LOCK_EX, ae)) < 0)
        return -1;
    if (nb_volume_list(a, owner, &v, &n, ae) != 0)
        goto unlock;
    for (size_t i = 0; i < n; i++) {
        held += v[i].size;
        if (!strcmp(v[i].name, name)) {
            free(v);
            nb_apierr_set(ae, NB_E_EXISTS, "exists", "volume \"%s\" exists", name);
            goto unlock;
        }
    }
    free(v);
    if (nb_volume_quota(c, key, n, held, size, ae) != 0)
        goto unlock;

    memset(out, 0, sizeof(*out));
    new_id(out->id);
    snprintf(out->name, sizeof(out->name), "%s", name);
    snprintf(out->docker, sizeof(out->docker), "nanobox-%s-vol-%s", c->instance, out->id);
    out->size = size / 4096 * 4096;
    out->created = (int64_t)time(NULL);
    snprintf(out->owner, sizeof(out->owner), "%s", owner);
    /* a cluster's: the name claimed for this node, under the quotas counted
     * over every node (volreg.h); taken back below if the make fails */
    if (nb_volreg_claim(a, key, out, n, held, nb_volume_quota, ae) != 0)
        goto unlock;
    claimed = 1;
    vol_files(c, out->id, img, dir, sizeof(img));
    if (nb_rootdisk_volume(NB_RDV_CREATE, img, dir, out->size, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "could not make the volume: %s", err);
        nb_rootdisk_volume(NB_RDV_REMOVE, img, dir, 0, err, sizeof(err));
        goto unlock;
    }

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Name", out->docker);
    nb_json_kv_str(g, "Driver", "local");
    nb_json_cstr(g, "DriverOpts");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "type", "none");
    nb_json_kv_str(g, "o", "bind");
    nb_json_kv_str(g, "device", dir);
    yajl_gen_map_close(g);
    /* not nanobox.sandbox: the sweep of unused sandbox volumes must never take it */
    nb_json_cstr(g, "Labels");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "nanobox.instance", c->instance);
    nb_json_kv_str(g, "nanobox.owner", owner);
    nb_json_kv_str(g, "nanobox.volume", name);
    nb_json_kv_str(g, "nanobox.volume_id", out->id);
    snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)out->size);
    nb_json_kv_str(g, "nanobox.size", tmp);
    snprintf(tmp, sizeof(tmp), "%lld", (long long)out->created);
    nb_json_kv_str(g, "nanobox.created", tmp);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    nb_buf_init(&b, 65536);
    status = dock(a, "POST", "/volumes/create", body, &b, "create the volume", ae);
    free(body);
    if (status >= 0 && status != 201 && status != 200) {
        docker_msg(&b, status, err, sizeof(err));
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "could not create the volume: %s", err);
    }
    nb_buf_free(&b);
    if (status != 201 && status != 200) {
        nb_rootdisk_volume(NB_RDV_REMOVE, img, dir, 0, err, sizeof(err));
        goto unlock;
    }
    nb_info("volume %s of %s created (%s, %llu bytes)", name, owner, out->id,
            (unsigned long long)out->size);
    rc = 0;
unlock:
    if (rc != 0 && claimed)
        nb_volreg_forget(a, owner, name);
    close(lock);
    return rc;
}

/* Does a pause image of a live sandbox of owner name the volume name in its NB_VOLUME_LABEL? */
struct held_arg {
    struct nb_app *a;
    const char *owner, *name;
    int held;
};

static void held_one(void *arg, const char *sid, const char *image_id, const void *labels)
{
    struct held_arg *h = arg;
    const char *op[] = {"nanobox.owner", NULL}, *vp[] = {NB_VOLUME_LABEL, NULL};
    yajl_val lab = (yajl_val)(uintptr_t)labels; /* the list's own, only read */
    yajl_val own = yajl_tree_get(lab, op, yajl_t_string);
    yajl_val vl = yajl_tree_get(lab, vp, yajl_t_string);
    struct nb_volume_mount m[NB_VOLUMES_PER_SANDBOX];
    const struct nb_slot *s;
    unsigned n = 0;
    int live;
    (void)image_id;
    if (h->held || own == NULL || vl == NULL || strcmp(nb_json_string(own), h->owner) != 0 ||
        nb_volume_label_parse(nb_json_string(vl), m, &n) != 0)
        return;
    nb_table_lock(&h->a->table);
    s = nb_table_find(&h->a->table, sid);
    live = s != NULL && s->state != NB_SLOT_DESTROYING;
    nb_table_unlock(&h->a->table);
    for (unsigned i = 0; live && i < n; i++)
        if (!strcmp(m[i].name, h->name))
            h->held = 1;
}

int nb_volume_delete(struct nb_app *a, const char *owner, const char *key, struct nb_apierr *ae)
{
    char img[NB_CONF_STR + 64], dir[NB_CONF_STR + 64], path[256], err[512];
    struct nb_volume v;
    struct nb_buf b;
    long status;
    int lock, rc = -1;
    if ((lock = vol_lock(&a->conf, LOCK_EX, ae)) < 0)
        return -1;
    if (nb_volume_get(a, owner, key, &v, ae) != 0)
        goto unlock;
    {
        /* a sandbox paused without its memory has no container, so Docker counts it out */
        struct held_arg h = {a, owner, v.name, 0};
        if (nb_snapshot_pause_images(a, held_one, &h) < 0) {
            nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error",
                          "could not list the paused sandboxes' images");
            goto unlock;
        }
        if (h.held) {
            nb_apierr_set(ae, NB_E_CONFLICT, "in_use",
                          "volume \"%s\" is mounted by a paused sandbox: destroy it first", v.name);
            goto unlock;
        }
    }
    snprintf(path, sizeof(path), "/volumes/%s", v.docker);
    nb_buf_init(&b, 65536);
    status = dock(a, "DELETE", path, NULL, &b, "remove the volume", ae);
    if (status == 409) {
        nb_apierr_set(ae, NB_E_CONFLICT, "in_use",
                      "volume \"%s\" is mounted by a sandbox: destroy it first", v.name);
    } else if (status >= 0 && status != 204 && status != 404) {
        docker_msg(&b, status, err, sizeof(err));
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "could not remove the volume: %s", err);
    }
    nb_buf_free(&b);
    if (status != 204 && status != 404)
        goto unlock;
    vol_files(&a->conf, v.id, img, dir, sizeof(img));
    if (nb_rootdisk_volume(NB_RDV_REMOVE, img, dir, 0, err, sizeof(err)) != 0)
        nb_warn("volume %s (%s): %s", v.name, v.id, err); /* gone for the API all the same */
    nb_info("volume %s of %s removed (%s)", v.name, owner, v.id);
    nb_volreg_forget(a, owner, v.name);
    rc = 0;
unlock:
    close(lock);
    return rc;
}

/* Is path p under (or equal to) the directory d? */
static int under(const char *p, const char *d)
{
    size_t n = strlen(d);
    return !strncmp(p, d, n) && (p[n] == '\0' || p[n] == '/' || (n == 1 && d[0] == '/'));
}

int nb_volume_path_valid(const char *path, const char *ws, char *err, size_t errlen)
{
    static const char *const denied[] = {
        "/proc", "/sys",   "/dev",   "/etc",    "/.nanobox", "/usr", "/bin",     "/sbin",
        "/lib",  "/lib32", "/lib64", "/libx32", "/boot",     "/run", "/var/run", NULL};
    size_t n = strlen(path);
    if (path[0] != '/' || n < 2 || n > NB_VOLUME_PATH_MAX) {
        snprintf(err, errlen, "a volume's path is absolute, 2 to %d bytes, and not /",
                 NB_VOLUME_PATH_MAX);
        return -1;
    }
    for (const char *p = path; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == ':' || *p == ',' || *p == '\\') {
            snprintf(err, errlen, "a volume's path has no control characters, ':', ',' or '\\'");
            return -1;
        }
    for (const char *c = path; *c;) {
        const char *e = strchr(c + 1, '/');
        size_t cl = e ? (size_t)(e - c - 1) : strlen(c + 1);
        if (cl == 0 || (cl == 1 && c[1] == '.') || (cl == 2 && c[1] == '.' && c[2] == '.')) {
            snprintf(err, errlen, "a volume's path has no empty, \".\" or \"..\" component");
            return -1;
        }
        if (e == NULL)
            break;
        c = e;
    }
    for (size_t i = 0; denied[i] != NULL; i++)
        if (under(path, denied[i])) {
            snprintf(err, errlen, "a volume cannot be mounted over %s", denied[i]);
            return -1;
        }
    if (!strcmp(path, "/tmp") || !strcmp(path, ws) || under(ws, path)) {
        snprintf(err, errlen, "a volume cannot be mounted over /tmp or the workspace %s", ws);
        return -1;
    }
    if (under(path, "/home") && !under(path, ws)) {
        snprintf(err, errlen, "under /home, a volume goes inside the workspace %s", ws);
        return -1;
    }
    return 0;
}

int nb_volume_prepare(struct nb_app *a, const char *owner, const char *ws,
                      struct nb_volume_mount *m, unsigned n, int *lock, struct nb_apierr *ae)
{
    char err[512], img[NB_CONF_STR + 64], dir[NB_CONF_STR + 64];
    *lock = -1;
    if (n > NB_VOLUMES_PER_SANDBOX) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range", "at most %d volumes in a sandbox",
                      NB_VOLUMES_PER_SANDBOX);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        if (nb_volume_path_valid(m[i].path, ws, err, sizeof(err)) != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_path", "volume path \"%.200s\": %s", m[i].path,
                          err);
            return -1;
        }
        for (unsigned j = 0; j < i; j++)
            if (under(m[i].path, m[j].path) || under(m[j].path, m[i].path)) {
                nb_apierr_set(ae, NB_E_INVALID, "bad_path",
                              "volume paths \"%.100s\" and \"%.100s\" overlap", m[j].path,
                              m[i].path);
                return -1;
            }
    }
    if (n == 0)
        return 0;
    if ((*lock = vol_lock(&a->conf, LOCK_SH, ae)) < 0)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        struct nb_volume v;
        if (nb_volume_get(a, owner, m[i].name, &v, ae) != 0)
            goto fail;
        vol_files(&a->conf, v.id, img, dir, sizeof(img));
        if (nb_rootdisk_volume(NB_RDV_MOUNT, img, dir, 0, err, sizeof(err)) != 0) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "could not mount volume \"%s\": %s",
                          v.name, err);
            goto fail;
        }
        snprintf(m[i].docker, sizeof(m[i].docker), "%s", v.docker);
    }
    return 0;
fail:
    nb_volume_release(*lock);
    *lock = -1;
    return -1;
}

int nb_volume_mounts_parse(yajl_val v, struct nb_volume_mount *m, unsigned *n, struct nb_apierr *ae)
{
    const char *np[] = {"name", NULL}, *pp[] = {"path", NULL};
    *n = 0;
    if (v == NULL || YAJL_IS_NULL(v))
        return 0;
    if (!YAJL_IS_ARRAY(v)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "volumes is a list of {\"name\": NAME, \"path\": PATH}");
        return -1;
    }
    if (v->u.array.len > NB_VOLUMES_PER_SANDBOX) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range", "at most %d volumes in a sandbox",
                      NB_VOLUMES_PER_SANDBOX);
        return -1;
    }
    for (size_t i = 0; i < v->u.array.len; i++) {
        yajl_val e = v->u.array.values[i];
        yajl_val name = YAJL_IS_OBJECT(e) ? yajl_tree_get(e, np, yajl_t_string) : NULL;
        yajl_val path = YAJL_IS_OBJECT(e) ? yajl_tree_get(e, pp, yajl_t_string) : NULL;
        if (name == NULL || path == NULL || YAJL_GET_OBJECT(e)->len != 2) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "each volume is {\"name\": NAME, \"path\": PATH}");
            return -1;
        }
        if (!nb_volume_name_valid(nb_json_string(name))) {
            nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "no volume \"%.64s\"",
                          nb_json_string(name));
            return -1;
        }
        if (strlen(nb_json_string(path)) > NB_VOLUME_PATH_MAX) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_path", "a volume's path is at most %d bytes",
                          NB_VOLUME_PATH_MAX);
            return -1;
        }
        memset(&m[*n], 0, sizeof(m[*n]));
        snprintf(m[*n].name, sizeof(m[*n].name), "%s", nb_json_string(name));
        snprintf(m[*n].path, sizeof(m[*n].path), "%s", nb_json_string(path));
        (*n)++;
    }
    return 0;
}

int nb_volume_prepare_json(struct nb_app *a, const char *owner, const char *ws, yajl_val v,
                           struct nb_volume_mount *m, unsigned *n, int *lock, struct nb_apierr *ae)
{
    *lock = -1;
    if (nb_volume_mounts_parse(v, m, n, ae) != 0)
        return -1;
    return nb_volume_prepare(a, owner, ws, m, *n, lock, ae);
}

void nb_volume_label(const struct nb_volume_mount *m, unsigned n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < n && used < len; i++) {
        int k = snprintf(out + used, len - used, "%s%s:%s", i ? "," : "", m[i].name, m[i].path);
        if (k < 0)
            break;
        used += (size_t)k;
    }
}

int nb_volume_label_parse(const char *label, struct nb_volume_mount *m, unsigned *n)
{
    const char *p = label;
    *n = 0;
    while (p != NULL && *p) {
        const char *colon = strchr(p, ':'), *end = strchr(p, ',');
        size_t nl, pl;
        if (end == NULL)
            end = p + strlen(p);
        if (colon == NULL || colon > end || *n >= NB_VOLUMES_PER_SANDBOX)
            return -1;
        nl = (size_t)(colon - p);
        pl = (size_t)(end - colon - 1);
        if (nl == 0 || nl > NB_VOLUME_NAME_MAX || pl == 0 || pl > NB_VOLUME_PATH_MAX)
            return -1;
        memset(&m[*n], 0, sizeof(m[*n]));
        memcpy(m[*n].name, p, nl);
        memcpy(m[*n].path, colon + 1, pl);
        if (!nb_volume_name_valid(m[*n].name))
            return -1;
        (*n)++;
        if (*end && end[1] == '\0')
            return -1; /* a trailing ',' */
        p = *end ? end + 1 : end;
    }
    return 0;
}

int nb_volume_mounts_of(struct nb_app *a, const char *inspect, struct nb_volume_mount *m,
                        unsigned *n, struct nb_apierr *ae)
{
    const char *lp[] = {"Config", "Labels", NB_VOLUME_LABEL, NULL};
    char err[64];
    struct nb_buf b;
    yajl_val v = NULL, l;
    long status;
    int rc = -1;
    *n = 0;
    nb_buf_init(&b, 4u << 20);
    status = dock(a, "GET", inspect, NULL, &b, "read the sandbox's volumes", ae);
    if (status < 0)
        goto out;
    if (status != 200 || nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error",
                      "could not read the sandbox's volumes (Docker answered %ld)", status);
        goto out;
    }
    l = yajl_tree_get(v, lp, yajl_t_string);
    if (l != NULL && nb_volume_label_parse(nb_json_string(l), m, n) != 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "the sandbox's volumes label is malformed");
        goto out;
    }
    rc = 0;
out:
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc;
}
