/*
 * docker.c - see docker.h.
 *
 * Answers are buffered into a capped nb_buf and parsed with yajl; the exec
 * stream alone is not buffered here but fed to the caller's demuxer as it
 * arrives, so output caps and streaming are the caller's business.
 */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "docker.h"
#include "json.h"
#include "log.h"
#include "metrics.h"

#define CONNECT_TIMEOUT_MS 2000L
#define CALL_TIMEOUT_MS 60000L /* container create/remove can be slow under load */

struct sink {
    struct nb_buf *buf;  /* buffered answer, or NULL */
    struct nb_demux *dm; /* or a demuxer for the exec stream */
    int overflow;
    int demux_failed;
    struct nb_buf *line; /* or lines (a build's JSON stream) to line_cb */
    nb_docker_line_fn line_cb;
    void *line_arg;
};

#define LINE_MAX_BYTES (64 * 1024) /* one line of a build's stream; longer ones are cut */

static void sink_lines(struct sink *s, const char *p, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        nb_buf_append_some(s->line, p, take);
        if (nl == NULL)
            return;
        if (s->line->len > 0)
            s->line_cb(s->line_arg, s->line->data, s->line->len);
        s->line->len = 0;
        p = nl + 1;
        n -= take + 1;
    }
}

static size_t sink_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct sink *s = userdata;
    size_t n = size * nmemb;
    if (s->line_cb != NULL) {
        sink_lines(s, ptr, n);
        return n;
    }
    if (s->dm != NULL) {
        if (nb_demux_feed(s->dm, ptr, n) != 0) {
            s->demux_failed = 1;
            return 0; /* abort the transfer */
        }
        return n;
    }
    if (s->buf == NULL)
        return n;
    if (nb_buf_append(s->buf, ptr, n) != NB_OK) {
        s->overflow = 1;
        return 0;
    }
    return n;
}

/* A request body that is not JSON text: bytes in memory or a file (tar). */
struct upload {
    const char *ctype;
    const void *mem;
    size_t len;
    FILE *file;
};

static size_t upload_read(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct upload *u = userdata;
    return fread(ptr, 1, size * nmemb, u->file);
}

int nb_docker_init(struct nb_docker *d, const char *socket_path, size_t max_response)
{
    memset(d, 0, sizeof(*d));
    d->ops = &nb_docker_curl_ops;
    snprintf(d->socket, sizeof(d->socket), "%s", socket_path);
    d->max_response = max_response;
    d->curl = curl_easy_init();
    return d->curl ? 0 : -1;
}

void nb_docker_cleanup(struct nb_docker *d)
{
    if (d->curl)
        curl_easy_cleanup(d->curl);
    d->curl = NULL;
}

static void derr_set(struct nb_derr *e, enum nb_derr_kind kind, long status, const char *msg)
{
    if (e == NULL)
        return;
    e->kind = kind;
    e->status = status;
    e->unsent = 0;
    snprintf(e->msg, sizeof(e->msg), "%.*s", (int)sizeof(e->msg) - 1, msg);
}

/* Docker's error answers are {"message": "..."}: keep the message. */
static void derr_from_answer(struct nb_derr *e, long status, const struct nb_buf *b)
{
    char err[64];
    yajl_val v = NULL;
    const char *path[] = {"message", NULL};
    yajl_val m;
    if (b->data && nb_json_parse(b->data, b->len, 16, &v, err, sizeof(err)) == 0 && v &&
        (m = yajl_tree_get(v, path, yajl_t_string)) != NULL)
        derr_set(e, NB_DERR_HTTP, status, nb_json_string(m));
    else
        derr_set(e, NB_DERR_HTTP, status, "Docker answered with an error");
    yajl_tree_free(v);
}

static int docker_send(struct nb_docker *d, const char *method, const char *path, const char *body,
                       struct upload *up, long timeout_ms, struct sink *sink, long *status,
                       struct nb_derr *e)
{
    CURL *c = d->curl;
    struct curl_slist *hdrs = NULL;
    char url[1024];
    CURLcode rc;

    if (c == NULL) {
        derr_set(e, NB_DERR_UNREACHABLE, 0, "Docker client not initialised");
        return -1;
    }
    snprintf(url, sizeof(url), "http://docker%s%s", NB_DOCKER_API, path);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->socket);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : CALL_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, sink);
    if (up != NULL) {
        char ct[128];
        snprintf(ct, sizeof(ct), "Content-Type: %s", up->ctype);
        hdrs = curl_slist_append(hdrs, ct);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        if (up->file != NULL) {
            curl_easy_setopt(c, CURLOPT_READFUNCTION, upload_read);
            curl_easy_setopt(c, CURLOPT_READDATA, up);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)up->len);
        } else {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, up->mem);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)up->len);
        }
    } else if (body != NULL) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else if (!strcmp(method, "POST")) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    }
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);

    rc = curl_easy_perform(c);
    curl_slist_free_all(hdrs);
    hdrs = NULL;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);

    if (rc == CURLE_OK)
        return 0;
    if (rc == CURLE_WRITE_ERROR && sink->overflow) {
        derr_set(e, NB_DERR_PROTO, *status, "Docker's answer was larger than docker_max_response");
        return -1;
    }
    if (rc == CURLE_WRITE_ERROR && sink->demux_failed) {
        derr_set(e, NB_DERR_PROTO, *status, "output stream stopped");
        return -1;
    }
    if (rc == CURLE_OPERATION_TIMEDOUT && *status != 0) {
        derr_set(e, NB_DERR_TIMEOUT, *status, "timed out");
        return -1;
    }
    if (rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_CONNECT || rc == CURLE_SEND_ERROR ||
        rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING) {
        char msg[512];
        snprintf(msg, sizeof(msg), "Docker is unreachable at %s: %s", d->socket,
                 curl_easy_strerror(rc));
        derr_set(e, NB_DERR_UNREACHABLE, 0, msg);
        if (e && rc == CURLE_COULDNT_CONNECT)
            e->unsent = 1;
        return -1;
    }
    {
        char msg[256];
        snprintf(msg, sizeof(msg), "Docker request failed: %s", curl_easy_strerror(rc));
        derr_set(e, NB_DERR_UNREACHABLE, 0, msg);
    }
    return -1;
}

/*
 * Every call to dockerd goes through here: timed, and its failures counted
 * (metrics.h), by operation. A stream's own end (the command's timeout,
 * the caller stopping it) is the caller's business, not a Docker failure.
 * up: a body streamed from memory or a file (image import, build), or NULL.
 */
static int docker_do_up(struct nb_docker *d, const char *method, const char *path, const char *body,
                        struct upload *up, long timeout_ms, struct sink *sink, long *status,
                        struct nb_derr *e)
{
    struct nb_derr local = {0};
    int64_t t0 = nb_metrics_now_us();
    int rc, kind = -1;

    if (e == NULL)
        e = &local;
    rc = docker_send(d, method, path, body, up, timeout_ms, sink, status, e);
    if (rc != 0 && e->kind == NB_DERR_UNREACHABLE)
        kind = NB_MDE_UNREACHABLE;
    else if (rc != 0 && sink->dm == NULL)
        kind = e->kind == NB_DERR_TIMEOUT ? NB_MDE_TIMEOUT : NB_MDE_PROTO;
    else if (rc == 0 && *status >= 500)
        kind = NB_MDE_SERVER;
    nb_metrics_docker(nb_metrics_docker_op(method, path), nb_metrics_now_us() - t0, kind);
    return rc;
}

static int docker_do(struct nb_docker *d, const char *method, const char *path, const char *body,
                     long timeout_ms, struct sink *sink, long *status, struct nb_derr *e)
{
    return docker_do_up(d, method, path, body, NULL, timeout_ms, sink, status, e);
}

int nb_docker_request(struct nb_docker *d, const char *method, const char *path, const char *body,
                      long timeout_ms, long *status, struct nb_buf *resp, struct nb_derr *e)
{
    struct sink s = {resp, NULL, 0, 0, NULL, NULL, NULL};
    *status = 0;
    if (e)
        e->kind = NB_DERR_NONE;
    return docker_do(d, method, path, body, timeout_ms, &s, status, e);
}

/* A request whose success statuses are ok1/ok2; anything else fills e. */
static int docker_call(struct nb_docker *d, const char *method, const char *path, const char *body,
                       long ok1, long ok2, struct nb_buf *resp, struct nb_derr *e)
{
    struct nb_buf local;
    long status = 0;
    int rc;
    nb_buf_init(&local, d->max_response);
    if (resp == NULL)
        resp = &local;
    rc = nb_docker_request(d, method, path, body, 0, &status, resp, e);
    if (rc == 0 && status != ok1 && status != ok2) {
        derr_from_answer(e, status, resp);
        rc = -1;
    }
    nb_buf_free(&local);
    return rc;
}

static int curl_ping(struct nb_docker *d, struct nb_derr *e)
{
    struct nb_buf b;
    long status = 0;
    int rc;
    /* a health check must answer quickly even when dockerd hangs */
    nb_buf_init(&b, 4096);
    rc = nb_docker_request(d, "GET", "/_ping", NULL, 2000, &status, &b, e);
    if (rc == 0 && status != 200) {
        derr_from_answer(e, status, &b);
        rc = -1;
    }
    nb_buf_free(&b);
    return rc;
}

/* Copy the string at key "Id" of a JSON answer into id. */
static int answer_id(const struct nb_buf *b, char id[65], struct nb_derr *e)
{
    char err[64];
    yajl_val v = NULL, s;
    const char *path[] = {"Id", NULL};
    int rc = -1;
    if (b->data && nb_json_parse(b->data, b->len, 16, &v, err, sizeof(err)) == 0 && v &&
        (s = yajl_tree_get(v, path, yajl_t_string)) != NULL && strlen(nb_json_string(s)) <= 64) {
        snprintf(id, 65, "%s", nb_json_string(s));
        rc = 0;
    } else {
        derr_set(e, NB_DERR_PROTO, 0, "Docker's answer had no Id");
    }
    yajl_tree_free(v);
    return rc;
}

static int curl_create(struct nb_docker *d, const char *name, const char *config_json, char cid[65],
                       struct nb_derr *e)
{
    char path[256];
    struct nb_buf b;
    int rc;
    snprintf(path, sizeof(path), "/containers/create?name=%s", name);
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "POST", path, config_json, 201, 201, &b, e);
    if (rc == 0)
        rc = answer_id(&b, cid, e);
    nb_buf_free(&b);
    return rc;
}

static int curl_start(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s/start", id);
    return docker_call(d, "POST", path, NULL, 204, 304, NULL, e);
}

/*
 * One container removal at a time on this host, whichever nanobox process
 * (worker, reaper, refill child) or instance asks. Docker 20.10 before
 * 20.10.27 (Debian 12 ships 20.10.24) deadlocks when two containers of one
 * network leave it at once: the exit of one takes the network's lock and
 * then the controller's (getSvcRecords), while the endpoint delete of the
 * other, in libnetwork's watch loop, holds the controller's and waits for
 * the network's (moby/libnetwork#2649, fixed by #2679). Every sandbox is on
 * the one "none" network, so concurrent removals wedged dockerd for good,
 * seen at 16 parallel deletes of 1000 sandboxes (bench_density.py). The
 * price: a mass delete runs at Docker's one-at-a-time rate (1000 in 166 s
 * on 2 busy cores, against 75 s 16 at a time); a lone one waits for no one.
 * flock(2) locks belong to an open file description, so each process opens
 * its own (a forked child must not share its parent's, or the two would
 * not exclude each other). Without the file (not root, no /run/lock),
 * removals go ahead unlocked.
 */
#define REMOVE_LOCK "/run/lock/nanobox-docker-remove.lock"
static int remove_lock_fd = -1;
static pid_t remove_lock_pid;

static int remove_lock(void)
{
    if (remove_lock_fd >= 0 && remove_lock_pid != getpid()) {
        close(remove_lock_fd); /* the parent's: ours must be our own */
        remove_lock_fd = -1;
    }
    if (remove_lock_fd < 0) {
        remove_lock_fd = open(REMOVE_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        remove_lock_pid = getpid();
    }
    if (remove_lock_fd < 0)
        return -1;
    while (flock(remove_lock_fd, LOCK_EX) != 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

static void remove_unlock(int locked)
{
    if (locked == 0)
        flock(remove_lock_fd, LOCK_UN);
}

static int curl_remove(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    char path[256];
    int locked, rc;
    snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
    locked = remove_lock();
    rc = docker_call(d, "DELETE", path, NULL, 204, 404, NULL, e);
    remove_unlock(locked);
    if (rc == 0)
        return 0;
    /* "removal already in progress" is as good as done */
    if (e && e->kind == NB_DERR_HTTP && e->status == 409 && strstr(e->msg, "in progress"))
        return 0;
    return -1;
}

static int curl_volume_sweep(struct nb_docker *d, const char *instance, struct nb_derr *e)
{
    char path[512], filter[256], err[64];
    const char *volp[] = {"Volumes", NULL}, *namep[] = {"Name", NULL};
    struct nb_buf b;
    yajl_val v = NULL, vols;
    int rc, removed = 0;
    char *esc;

    /*
     * Docker's "dangling": no container, running or not, refers to it. Not
     * POST /volumes/prune: Docker 20.10 never prunes a volume with driver
     * options, and a /dev/pts volume has them. Both labels: a sandbox's
     * own volume, never one meant to outlive it.
     */
    snprintf(filter, sizeof(filter),
             "{\"dangling\":[\"true\"],\"label\":[\"nanobox.instance=%s\",\"nanobox.sandbox\"]}",
             instance);
    esc = curl_easy_escape(d->curl, filter, 0);
    if (esc == NULL) {
        derr_set(e, NB_DERR_PROTO, 0, "out of memory");
        return -1;
    }
    snprintf(path, sizeof(path), "/volumes?filters=%s", esc);
    curl_free(esc);
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "GET", path, NULL, 200, 200, &b, e);
    if (rc == 0 && nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) != 0) {
        derr_set(e, NB_DERR_PROTO, 0, "could not read the volume list");
        rc = -1;
    }
    vols = rc == 0 ? yajl_tree_get(v, volp, yajl_t_array) : NULL;
    for (size_t i = 0; vols && i < vols->u.array.len; i++) {
        yajl_val name = yajl_tree_get(vols->u.array.values[i], namep, yajl_t_string);
        const char *n = name ? nb_json_string(name) : "";
        if (!n[0] || strlen(n) > 128 || strspn(n, "0123456789abcdef") != strlen(n))
            continue; /* an anonymous volume's name: 64 hex digits */
        snprintf(path, sizeof(path), "/volumes/%s", n);
        /* 409: a container took it since the listing */
        if (docker_call(d, "DELETE", path, NULL, 204, 404, NULL, e) == 0)
            removed++;
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc == 0 ? removed : -1;
}

/* POST /containers/{id}/{what}; Docker's "is already paused" (409) / "is
 * not paused" (500 in Docker 20.10, 409 later) means the container is
 * already as asked. */
static int curl_freeze(struct nb_docker *d, const char *id, const char *what, const char *already,
                       struct nb_derr *e)
{
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s/%s", id, what);
    for (unsigned wait_ms = 50;; wait_ms *= 2) {
        if (docker_call(d, "POST", path, NULL, 204, 204, NULL, e) == 0)
            return 0;
        /*
         * runc gives up on a freeze whose tasks do not all stop within its
         * short poll (a loaded machine, a task in the middle of I/O), and
         * thaws them again: "unable to freeze". Another try usually takes.
         */
        if (wait_ms > 800 || e == NULL || e->kind != NB_DERR_HTTP || e->status != 500 ||
            strstr(e->msg, "unable to freeze") == NULL)
            break;
        usleep(wait_ms * 1000);
    }
    if (e && e->kind == NB_DERR_HTTP && (e->status == 409 || e->status == 500) &&
        strstr(e->msg, already)) {
        e->kind = NB_DERR_NONE;
        return 0;
    }
    return -1;
}

static int curl_pause(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    return curl_freeze(d, id, "pause", "already paused", e);
}

static int curl_unpause(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    return curl_freeze(d, id, "unpause", "not paused", e);
}

static int curl_inspect(struct nb_docker *d, const char *id, int *running, pid_t *pid,
                        struct nb_derr *e)
{
    char path[256], err[64];
    struct nb_buf b;
    yajl_val v = NULL, r, p;
    const char *rpath[] = {"State", "Running", NULL};
    const char *ppath[] = {"State", "Pid", NULL};
    int rc;
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "GET", path, NULL, 200, 200, &b, e);
    if (rc == 0) {
        if (nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) == 0 && v &&
            (r = yajl_tree_get(v, rpath, yajl_t_any)) != NULL &&
            (p = yajl_tree_get(v, ppath, yajl_t_number)) != NULL) {
            *running = YAJL_IS_TRUE(r);
            *pid = (pid_t)YAJL_GET_INTEGER(p);
        } else {
            derr_set(e, NB_DERR_PROTO, 0, "could not read container state");
            rc = -1;
        }
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc;
}

/* A label's value as a number: def when absent or not all digits (a '-' first allowed). */
static int64_t label_num(yajl_val lab, const char *key, int64_t def)
{
    const char *p[] = {key, NULL};
    yajl_val v = yajl_tree_get(lab, p, yajl_t_string);
    const char *s = v ? nb_json_string(v) : NULL;
    char *end;
    long long n;

    if (s == NULL || *s == '\0')
        return def;
    errno = 0;
    n = strtoll(s, &end, 10);
    return *end != '\0' || errno != 0 ? def : (int64_t)n;
}

/* A label's text into out (cut to outlen); untouched when absent. */
static void label_str(yajl_val lab, const char *key, char *out, size_t outlen)
{
    const char *p[] = {key, NULL};
    yajl_val v = yajl_tree_get(lab, p, yajl_t_string);

    if (v != NULL)
        snprintf(out, outlen, "%s", nb_json_string(v));
}

void nb_docker_ctr_labels(struct nb_docker_ctr *c, const void *labels)
{
    yajl_val lab = (yajl_val)(uintptr_t)labels;
    int64_t n;

    if (lab == NULL || !YAJL_IS_OBJECT(lab))
        return;
    label_str(lab, "nanobox.sandbox", c->sandbox, sizeof(c->sandbox));
    label_str(lab, "nanobox.owner", c->owner, sizeof(c->owner));
    label_str(lab, "nanobox.image", c->image, sizeof(c->image));
    label_str(lab, "nanobox.metadata", c->metadata, sizeof(c->metadata));
    c->expires = label_num(lab, "nanobox.expires", 0);
    c->created = label_num(lab, "nanobox.created", c->created);
    n = label_num(lab, "nanobox.slot", -1);
    c->slot = n >= 0 ? n : -1;
    n = label_num(lab, "nanobox.memory", 0);
    c->memory = n > 0 ? (uint64_t)n : 0;
    n = label_num(lab, "nanobox.nano_cpus", 0);
    c->nano_cpus = n > 0 ? (uint64_t)n : 0;
    n = label_num(lab, "nanobox.pids", 0);
    c->pids = n > 0 ? n : 0;
    {
        char net[16] = "", ot[16] = "";
        label_str(lab, "nanobox.network", net, sizeof(net));
        c->network_bridge = strcmp(net, "bridge") == 0;
        label_str(lab, "nanobox.on_timeout", ot, sizeof(ot));
        c->pause_on_timeout = strcmp(ot, "pause") == 0;
    }
    c->auto_resume = label_num(lab, "nanobox.auto_resume", 0) == 1;
    c->pooled = label_num(lab, "nanobox.pooled", 0) == 1;
    {
        char home[16] = "";
        label_str(lab, "nanobox.home", home, sizeof(home));
        c->e2b_home = strcmp(home, "e2b") == 0;
    }
    {
        char vols[8] = "";
        label_str(lab, "nanobox.volumes", vols, sizeof(vols));
        c->volumes = vols[0] != '\0';
    }
}

static int curl_list(struct nb_docker *d, const char *instance, nb_docker_ctr_fn cb, void *arg,
                     struct nb_derr *e)
{
    char path[512], filter[256], err[64];
    struct nb_buf b;
    yajl_val v = NULL;
    int rc, count = 0;
    CURL *c = d->curl;
    char *esc;

    snprintf(filter, sizeof(filter), "{\"label\":[\"nanobox.instance=%s\"]}", instance);
    esc = curl_easy_escape(c, filter, 0);
    if (esc == NULL) {
        derr_set(e, NB_DERR_PROTO, 0, "out of memory");
        return -1;
    }
    snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", esc);
    curl_free(esc);
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "GET", path, NULL, 200, 200, &b, e);
    if (rc == 0) {
        if (nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) != 0 || !YAJL_IS_ARRAY(v)) {
            derr_set(e, NB_DERR_PROTO, 0, "could not read the container list");
            rc = -1;
        }
    }
    for (size_t i = 0; rc == 0 && i < v->u.array.len; i++) {
        yajl_val item = v->u.array.values[i], id, st, lab, im, cr;
        const char *idp[] = {"Id", NULL}, *stp[] = {"State", NULL}, *labp[] = {"Labels", NULL};
        const char *imp[] = {"Image", NULL}, *crp[] = {"Created", NULL};
        struct nb_docker_ctr ctr;
        memset(&ctr, 0, sizeof(ctr));
        id = yajl_tree_get(item, idp, yajl_t_string);
        if (id == NULL || strlen(nb_json_string(id)) > 64)
            continue;
        snprintf(ctr.id, sizeof(ctr.id), "%s", nb_json_string(id));
        st = yajl_tree_get(item, stp, yajl_t_string);
        ctr.paused = st && !strcmp(nb_json_string(st), "paused");
        ctr.running = ctr.paused || (st && !strcmp(nb_json_string(st), "running"));
        ctr.slot = -1;
        im = yajl_tree_get(item, imp, yajl_t_string);
        if (im)
            snprintf(ctr.image, sizeof(ctr.image), "%s", nb_json_string(im));
        cr = yajl_tree_get(item, crp, yajl_t_number);
        if (cr && YAJL_IS_INTEGER(cr))
            ctr.created = YAJL_GET_INTEGER(cr);
        lab = yajl_tree_get(item, labp, yajl_t_object);
        if (lab)
            nb_docker_ctr_labels(&ctr, lab);
        cb(arg, &ctr);
        count++;
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc == 0 ? count : -1;
}

/* ---- images ---- */

static void image_labels(yajl_val lab, struct nb_docker_image *im)
{
    static const struct {
        const char *key;
        size_t off, size;
    } strs[] = {
#define L(k, f) {k, offsetof(struct nb_docker_image, f), sizeof(((struct nb_docker_image *)0)->f)}
        L("nanobox.instance", instance),
        L("nanobox.template", name),
        L("nanobox.status", status),
        L("nanobox.kind", kind),
        L("nanobox.error", error),
        L("nanobox.parent", parent),
        L("nanobox.parent_template", parent_tpl),
        L("nanobox.owner", owner),
#undef L
    };
    if (!YAJL_IS_OBJECT(lab))
        return;
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        const char *p[] = {strs[i].key, NULL};
        yajl_val v = yajl_tree_get(lab, p, yajl_t_string);
        if (v)
            snprintf((char *)im + strs[i].off, strs[i].size, "%s", nb_json_string(v));
    }
    {
        const char *p[] = {"nanobox.created_at", NULL};
        yajl_val v = yajl_tree_get(lab, p, yajl_t_string);
        if (v)
            im->created_at = strtoll(nb_json_string(v), NULL, 10);
    }
}

/* Id, first RepoTag and Size of an image object (a listing's or an inspect's). */
static void image_common(yajl_val item, struct nb_docker_image *im)
{
    const char *idp[] = {"Id", NULL}, *tp[] = {"RepoTags", NULL}, *sp[] = {"Size", NULL};
    yajl_val id = yajl_tree_get(item, idp, yajl_t_string);
    yajl_val tags = yajl_tree_get(item, tp, yajl_t_array);
    yajl_val size = yajl_tree_get(item, sp, yajl_t_number);
    if (id)
        snprintf(im->id, sizeof(im->id), "%s", nb_json_string(id));
    if (tags && tags->u.array.len > 0 && YAJL_IS_STRING(tags->u.array.values[0]))
        snprintf(im->ref, sizeof(im->ref), "%s", nb_json_string(tags->u.array.values[0]));
    if (size)
        im->size = YAJL_GET_INTEGER(size);
}

static int curl_image_inspect(struct nb_docker *d, const char *ref, struct nb_docker_image *im,
                              struct nb_derr *e)
{
    char path[512], err[64];
    struct nb_buf b;
    yajl_val v = NULL;
    const char *lp[] = {"Config", "Labels", NULL};
    int rc;
    memset(im, 0, sizeof(*im));
    snprintf(path, sizeof(path), "/images/%s/json", ref);
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "GET", path, NULL, 200, 200, &b, e);
    if (rc == 0) {
        if (nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) == 0 && YAJL_IS_OBJECT(v)) {
            image_common(v, im);
            image_labels(yajl_tree_get(v, lp, yajl_t_object), im);
        } else {
            derr_set(e, NB_DERR_PROTO, 0, "could not read the image");
            rc = -1;
        }
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc;
}

static int curl_image_list(struct nb_docker *d, const char *instance, nb_docker_image_fn cb,
                           void *arg, struct nb_derr *e)
{
    char path[768], filter[256], err[64];
    struct nb_buf b;
    yajl_val v = NULL;
    int rc, count = 0;
    char *esc;

    snprintf(filter, sizeof(filter), "{\"label\":[\"nanobox.instance=%s\",\"nanobox.template\"]}",
             instance);
    esc = curl_easy_escape(d->curl, filter, 0);
    if (esc == NULL) {
        derr_set(e, NB_DERR_PROTO, 0, "out of memory");
        return -1;
    }
    snprintf(path, sizeof(path), "/images/json?filters=%s", esc);
    curl_free(esc);
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "GET", path, NULL, 200, 200, &b, e);
    if (rc == 0 &&
        (nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) != 0 || !YAJL_IS_ARRAY(v))) {
        derr_set(e, NB_DERR_PROTO, 0, "could not read the image list");
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < v->u.array.len; i++) {
        const char *lp[] = {"Labels", NULL};
        struct nb_docker_image im;
        memset(&im, 0, sizeof(im));
        image_common(v->u.array.values[i], &im);
        image_labels(yajl_tree_get(v->u.array.values[i], lp, yajl_t_object), &im);
        cb(arg, &im);
        count++;
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc == 0 ? count : -1;
}

static int curl_image_remove(struct nb_docker *d, const char *ref, int force, struct nb_derr *e)
{
    char path[512];
    snprintf(path, sizeof(path), "/images/%s?force=%d", ref, force ? 1 : 0);
    return docker_call(d, "DELETE", path, NULL, 200, 404, NULL, e);
}

/* The stream of a pull, import or build answers errors in a 200: {"error": ...}. */
static int stream_error(const struct nb_buf *b, struct nb_derr *e)
{
    const char *p = b->data ? strstr(b->data, "\"error\"") : NULL;
    char err[64];
    yajl_val v = NULL, m;
    const char *mp[] = {"error", NULL};
    const char *start;
    if (p == NULL)
        return 0;
    start = p;
    while (start > b->data && start[-1] != '\n')
        start--;
    {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - start) : strlen(start);
        if (nb_json_parse(start, n, 16, &v, err, sizeof(err)) == 0 &&
            (m = yajl_tree_get(v, mp, yajl_t_string)) != NULL)
            derr_set(e, NB_DERR_HTTP, 500, nb_json_string(m));
        else
            derr_set(e, NB_DERR_HTTP, 500, "Docker reported an error");
    }
    yajl_tree_free(v);
    return -1;
}

static int curl_image_import(struct nb_docker *d, const char *ref, const char *const *labels,
                             const void *tar, size_t tar_len, char id[80], struct nb_derr *e)
{
    struct nb_buf path, b;
    struct upload up = {"application/x-tar", tar, tar_len, NULL};
    struct sink s = {NULL, NULL, 0, 0, NULL, NULL, NULL};
    const char *colon = strrchr(ref, ':');
    long status = 0;
    int rc;
    char *esc;
    struct nb_docker_image im;

    nb_buf_init(&path, 16384);
    nb_buf_init(&b, d->max_response);
    s.buf = &b;
    if (colon == NULL) {
        derr_set(e, NB_DERR_PROTO, 0, "an image name needs a tag");
        return -1;
    }
    nb_buf_printf(&path, "/images/create?fromSrc=-&repo=%.*s&tag=%s", (int)(colon - ref), ref,
                  colon + 1);
    for (size_t i = 0; labels && labels[i]; i++) {
        /* LABEL "k=v" with the value's quote, backslash and $ escaped */
        struct nb_buf ch;
        const char *eq = strchr(labels[i], '=');
        nb_buf_init(&ch, 4096);
        if (eq == NULL)
            continue;
        nb_buf_printf(&ch, "LABEL %.*s=\"", (int)(eq - labels[i]), labels[i]);
        for (const char *c = eq + 1; *c; c++) {
            if (*c == '"' || *c == '\\' || *c == '$')
                nb_buf_append(&ch, "\\", 1);
            nb_buf_append(&ch, *c == '\n' ? " " : c, 1);
        }
        nb_buf_append(&ch, "\"", 1);
        esc = curl_easy_escape(d->curl, ch.data, (int)ch.len);
        nb_buf_free(&ch);
        if (esc == NULL) {
            nb_buf_free(&path);
            nb_buf_free(&b);
            derr_set(e, NB_DERR_PROTO, 0, "out of memory");
            return -1;
        }
        nb_buf_printf(&path, "&changes=%s", esc);
        curl_free(esc);
    }
    if (e)
        e->kind = NB_DERR_NONE;
    rc = docker_do_up(d, "POST", path.data, NULL, &up, 0, &s, &status, e);
    if (rc == 0 && status != 200) {
        derr_from_answer(e, status, &b);
        rc = -1;
    }
    if (rc == 0)
        rc = stream_error(&b, e);
    nb_buf_free(&path);
    nb_buf_free(&b);
    if (rc == 0 && id != NULL) {
        rc = curl_image_inspect(d, ref, &im, e);
        snprintf(id, 80, "%s", im.id);
    }
    return rc;
}

static int curl_build(struct nb_docker *d, const struct nb_docker_build *bd, nb_docker_line_fn cb,
                      void *arg, struct nb_derr *e)
{
    struct nb_buf path, line;
    struct upload up = {"application/x-tar", NULL, 0, NULL};
    struct sink s = {NULL, NULL, 0, 0, NULL, cb, arg};
    long status = 0;
    int rc;
    char *esc_t, *esc_l;

    up.file = fopen(bd->context, "rbe");
    if (up.file == NULL) {
        derr_set(e, NB_DERR_PROTO, 0, "cannot open the build context");
        return -1;
    }
    fseek(up.file, 0, SEEK_END);
    up.len = (size_t)ftell(up.file);
    rewind(up.file);
    esc_t = curl_easy_escape(d->curl, bd->tag, 0);
    esc_l = bd->labels_json ? curl_easy_escape(d->curl, bd->labels_json, 0) : NULL;
    nb_buf_init(&path, 65536);
    nb_buf_init(&line, LINE_MAX_BYTES);
    s.line = &line;
    nb_buf_printf(&path, "/build?t=%s&networkmode=%s&rm=1&forcerm=1", esc_t ? esc_t : "",
                  bd->network);
    /* Docker 20.10's builder makes a step (a container, a commit) of each of these labels */
    if (esc_l)
        nb_buf_printf(&path, "&labels=%s", esc_l);
    if (bd->memory > 0)
        nb_buf_printf(&path, "&memory=%llu&memswap=%llu", (unsigned long long)bd->memory,
                      (unsigned long long)bd->memory);
    if (bd->nano_cpus > 0)
        nb_buf_printf(&path, "&cpuperiod=100000&cpuquota=%llu",
                      (unsigned long long)(bd->nano_cpus / 10000));
    if (bd->fsize > 0) /* [{"Name":"fsize","Soft":N,"Hard":N}], escaped */
        nb_buf_printf(&path,
                      "&ulimits=%%5B%%7B%%22Name%%22%%3A%%22fsize%%22%%2C%%22Soft%%22%%3A%llu%%2C"
                      "%%22Hard%%22%%3A%llu%%7D%%5D",
                      (unsigned long long)bd->fsize, (unsigned long long)bd->fsize);
    curl_free(esc_t);
    curl_free(esc_l);
    if (e)
        e->kind = NB_DERR_NONE;
    rc = docker_do_up(d, "POST", path.data, NULL, &up, bd->timeout_ms, &s, &status, e);
    if (rc == 0 && status != 200) {
        /* an error answer came through the line sink: its message is Docker's */
        derr_set(e, NB_DERR_HTTP, status, "Docker refused the build");
        rc = -1;
    }
    if (line.len > 0)
        cb(arg, line.data, line.len);
    fclose(up.file);
    nb_buf_free(&path);
    nb_buf_free(&line);
    return rc;
}

const struct nb_docker_ops nb_docker_curl_ops = {
    .ping = curl_ping,
    .create = curl_create,
    .start = curl_start,
    .remove = curl_remove,
    .inspect = curl_inspect,
    .list = curl_list,
    .pause = curl_pause,
    .unpause = curl_unpause,
    .image_inspect = curl_image_inspect,
    .image_list = curl_image_list,
    .image_remove = curl_image_remove,
    .image_import = curl_image_import,
    .build = curl_build,
    .volume_sweep = curl_volume_sweep,
};

/* ---- the container calls, through the ops table (docker.h) ---- */

int nb_docker_ping(struct nb_docker *d, struct nb_derr *e)
{
    return d->ops->ping(d, e);
}

int nb_docker_create(struct nb_docker *d, const char *name, const char *config_json, char cid[65],
                     struct nb_derr *e)
{
    return d->ops->create(d, name, config_json, cid, e);
}

int nb_docker_start(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    return d->ops->start(d, id, e);
}

int nb_docker_remove(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    return d->ops->remove(d, id, e);
}

int nb_docker_volume_sweep(struct nb_docker *d, const char *instance, struct nb_derr *e)
{
    return d->ops->volume_sweep ? d->ops->volume_sweep(d, instance, e) : 0;
}

int nb_docker_inspect(struct nb_docker *d, const char *id, int *running, pid_t *pid,
                      struct nb_derr *e)
{
    return d->ops->inspect(d, id, running, pid, e);
}

int nb_docker_pause(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    return d->ops->pause(d, id, e);
}

int nb_docker_unpause(struct nb_docker *d, const char *id, struct nb_derr *e)
{
    return d->ops->unpause(d, id, e);
}

int nb_docker_list(struct nb_docker *d, const char *instance, nb_docker_ctr_fn cb, void *arg,
                   struct nb_derr *e)
{
    return d->ops->list(d, instance, cb, arg, e);
}

int nb_docker_image_inspect(struct nb_docker *d, const char *ref, struct nb_docker_image *im,
                            struct nb_derr *e)
{
    return d->ops->image_inspect(d, ref, im, e);
}

int nb_docker_image_list(struct nb_docker *d, const char *instance, nb_docker_image_fn cb,
                         void *arg, struct nb_derr *e)
{
    return d->ops->image_list(d, instance, cb, arg, e);
}

int nb_docker_image_remove(struct nb_docker *d, const char *ref, int force, struct nb_derr *e)
{
    return d->ops->image_remove(d, ref, force, e);
}

int nb_docker_image_import(struct nb_docker *d, const char *ref, const char *const *labels,
                           const void *tar, size_t tar_len, char id[80], struct nb_derr *e)
{
    return d->ops->image_import(d, ref, labels, tar, tar_len, id, e);
}

int nb_docker_build(struct nb_docker *d, const struct nb_docker_build *b, nb_docker_line_fn cb,
                    void *arg, struct nb_derr *e)
{
    return d->ops->build(d, b, cb, arg, e);
}

int nb_docker_rw_layer(struct nb_docker *d, const char *id, int with_size, char *upper,
                       size_t upperlen, int64_t *size_rw, struct nb_derr *e)
{
    char path[256], err[64];
    struct nb_buf b;
    yajl_val v = NULL, u, sz;
    const char *upath[] = {"GraphDriver", "Data", "UpperDir", NULL};
    const char *spath[] = {"SizeRw", NULL};
    int rc;

    if (upperlen)
        upper[0] = '\0';
    *size_rw = -1;
    snprintf(path, sizeof(path), "/containers/%s/json%s", id, with_size ? "?size=1" : "");
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "GET", path, NULL, 200, 200, &b, e);
    if (rc == 0) {
        if (nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) == 0 && v) {
            u = yajl_tree_get(v, upath, yajl_t_string);
            if (u && strlen(nb_json_string(u)) < upperlen)
                snprintf(upper, upperlen, "%s", nb_json_string(u));
            sz = yajl_tree_get(v, spath, yajl_t_number);
            if (sz && YAJL_IS_INTEGER(sz))
                *size_rw = YAJL_GET_INTEGER(sz);
        } else {
            derr_set(e, NB_DERR_PROTO, 0, "could not read the container");
            rc = -1;
        }
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc;
}

/* ---- events: dockerd itself ---- */

struct events_sink {
    nb_docker_event_fn cb;
    void *arg;
};

/* One line of the event stream: an event of ours, to the caller. */
static void event_line(void *arg, const char *line, size_t len)
{
    struct events_sink *es = arg;
    struct nb_docker_event ev;
    char err[64];
    yajl_val v = NULL, act, id, sb, t;
    const char *actp[] = {"Action", NULL}, *idp[] = {"Actor", "ID", NULL};
    const char *sbp[] = {"Actor", "Attributes", "nanobox.sandbox", NULL}, *tp[] = {"time", NULL};

    if (nb_json_parse(line, len, 16, &v, err, sizeof(err)) != 0 || v == NULL)
        return;
    act = yajl_tree_get(v, actp, yajl_t_string);
    id = yajl_tree_get(v, idp, yajl_t_string);
    sb = yajl_tree_get(v, sbp, yajl_t_string);
    t = yajl_tree_get(v, tp, yajl_t_number);
    memset(&ev, 0, sizeof(ev));
    if (act && id && strlen(nb_json_string(act)) < sizeof(ev.action) &&
        strlen(nb_json_string(id)) < sizeof(ev.id)) {
        snprintf(ev.action, sizeof(ev.action), "%s", nb_json_string(act));
        snprintf(ev.id, sizeof(ev.id), "%s", nb_json_string(id));
        if (sb && strlen(nb_json_string(sb)) < sizeof(ev.sandbox))
            snprintf(ev.sandbox, sizeof(ev.sandbox), "%s", nb_json_string(sb));
        ev.time = t && YAJL_IS_INTEGER(t) ? YAJL_GET_INTEGER(t) : 0;
        es->cb(es->arg, &ev);
    }
    yajl_tree_free(v);
}

int nb_docker_events(struct nb_docker *d, const char *instance, int64_t since, long max_ms,
                     nb_docker_event_fn cb, void *arg, struct nb_derr *e)
{
    char filter[256], path[512];
    struct events_sink es = {cb, arg};
    struct sink s = {NULL, NULL, 0, 0, NULL, event_line, &es};
    struct nb_buf line;
    long status = 0;
    char *esc;
    int rc;

    snprintf(filter, sizeof(filter),
             "{\"type\":[\"container\"],\"label\":[\"nanobox.instance=%s\"],"
             "\"event\":[\"die\",\"oom\",\"destroy\"]}",
             instance);
    esc = d->curl ? curl_easy_escape(d->curl, filter, 0) : NULL;
    if (esc == NULL) {
        derr_set(e, NB_DERR_PROTO, 0, "out of memory");
        return -1;
    }
    if (since > 0)
        snprintf(path, sizeof(path), "/events?since=%lld&filters=%s", (long long)since, esc);
    else
        snprintf(path, sizeof(path), "/events?filters=%s", esc);
    curl_free(esc);
    nb_buf_init(&line, LINE_MAX_BYTES);
    s.line = &line;
    /* not through docker_do: an hour-long stream is no call to time or count */
    rc = docker_send(d, "GET", path, NULL, NULL, max_ms, &s, &status, e);
    nb_buf_free(&line);
    if (rc != 0 && e && e->kind == NB_DERR_TIMEOUT && status == 200)
        return 0; /* its time is up: the caller reconnects */
    if (rc == 0 && status != 200) {
        derr_set(e, NB_DERR_HTTP, status, "Docker refused the event stream");
        return -1;
    }
    if (rc == 0) {
        /* dockerd closed it (going away) */
        derr_set(e, NB_DERR_UNREACHABLE, 0, "Docker closed the event stream");
        return -1;
    }
    return -1;
}

/* ---- exec: dockerd itself ---- */

int nb_docker_put_archive(struct nb_docker *d, const char *id, const char *dir, const char *tarfile,
                          long timeout_ms, struct nb_derr *e)
{
    struct nb_buf path, b;
    struct upload up = {"application/x-tar", NULL, 0, NULL};
    struct sink s = {NULL, NULL, 0, 0, NULL, NULL, NULL};
    long status = 0;
    int rc;
    char *esc;

    up.file = fopen(tarfile, "rbe");
    if (up.file == NULL) {
        derr_set(e, NB_DERR_PROTO, 0, "cannot open the archive to upload");
        return -1;
    }
    fseek(up.file, 0, SEEK_END);
    up.len = (size_t)ftell(up.file);
    rewind(up.file);
    esc = curl_easy_escape(d->curl, dir, 0);
    nb_buf_init(&path, 4096);
    nb_buf_init(&b, d->max_response);
    s.buf = &b;
    nb_buf_printf(&path, "/containers/%s/archive?path=%s", id, esc ? esc : "/");
    curl_free(esc);
    if (e)
        e->kind = NB_DERR_NONE;
    rc = docker_do_up(d, "PUT", path.data, NULL, &up, timeout_ms, &s, &status, e);
    if (rc == 0 && status != 200) {
        derr_from_answer(e, status, &b);
        rc = -1;
    }
    fclose(up.file);
    nb_buf_free(&path);
    nb_buf_free(&b);
    return rc;
}

int nb_docker_commit(struct nb_docker *d, const char *id, const char *ref, const char *config_json,
                     long timeout_ms, struct nb_derr *e)
{
    struct nb_buf path, b;
    const char *colon = strrchr(ref, ':');
    long status = 0;
    int rc;

    if (colon == NULL) {
        derr_set(e, NB_DERR_PROTO, 0, "an image name needs a tag");
        return -1;
    }
    nb_buf_init(&path, 4096);
    nb_buf_init(&b, d->max_response);
    nb_buf_printf(&path, "/commit?container=%s&repo=%.*s&tag=%s", id, (int)(colon - ref), ref,
                  colon + 1);
    rc = nb_docker_request(d, "POST", path.data, config_json, timeout_ms, &status, &b, e);
    if (rc == 0 && status != 201) {
        derr_from_answer(e, status, &b);
        rc = -1;
    }
    nb_buf_free(&path);
    nb_buf_free(&b);
    return rc;
}

int nb_docker_exec_create(struct nb_docker *d, const char *cid, const char *config_json,
                          char exec_id[65], struct nb_derr *e)
{
    char path[256];
    struct nb_buf b;
    int rc;
    snprintf(path, sizeof(path), "/containers/%s/exec", cid);
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "POST", path, config_json, 201, 201, &b, e);
    if (rc == 0)
        rc = answer_id(&b, exec_id, e);
    nb_buf_free(&b);
    return rc;
}

int nb_docker_exec_start(struct nb_docker *d, const char *exec_id, long timeout_ms,
                         struct nb_demux *dm, struct nb_derr *e)
{
    char path[256];
    struct sink s = {NULL, dm, 0, 0, NULL, NULL, NULL};
    long status = 0;
    snprintf(path, sizeof(path), "/exec/%s/start", exec_id);
    if (e)
        e->kind = NB_DERR_NONE;
    if (docker_do(d, "POST", path, "{\"Detach\":false,\"Tty\":false}", timeout_ms, &s, &status,
                  e) != 0)
        return -1;
    if (status != 200) {
        derr_set(e, NB_DERR_HTTP, status, "Docker refused to start the command");
        return -1;
    }
    return 0;
}

int nb_docker_exec_inspect(struct nb_docker *d, const char *exec_id, int *running, int *exit_code,
                           pid_t *pid, struct nb_derr *e)
{
    char path[256], err[64];
    struct nb_buf b;
    yajl_val v = NULL, r, x, p;
    const char *rp[] = {"Running", NULL}, *xp[] = {"ExitCode", NULL}, *pp[] = {"Pid", NULL};
    int rc;
    snprintf(path, sizeof(path), "/exec/%s/json", exec_id);
    nb_buf_init(&b, d->max_response);
    rc = docker_call(d, "GET", path, NULL, 200, 200, &b, e);
    if (rc == 0) {
        if (nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) == 0 && v &&
            (r = yajl_tree_get(v, rp, yajl_t_any)) != NULL) {
            *running = YAJL_IS_TRUE(r);
            x = yajl_tree_get(v, xp, yajl_t_number);
            p = yajl_tree_get(v, pp, yajl_t_number);
            *exit_code = x ? (int)YAJL_GET_INTEGER(x) : -1;
            *pid = p ? (pid_t)YAJL_GET_INTEGER(p) : 0;
        } else {
            derr_set(e, NB_DERR_PROTO, 0, "could not read the command's state");
            rc = -1;
        }
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc;
}
