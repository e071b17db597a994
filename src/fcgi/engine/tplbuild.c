/*
 * tplbuild.c - a builder's body (nb_template_build_job): one queued job
 * through Docker's POST /build, its output into the build log, the name
 * moved to the image built or the record failed. The builder is a child
 * of the reaper (tplqueue.c); the unit tests call the body directly.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buildcap.h"
#include "json.h"
#include "log.h"
#include "network.h"
#include "tplpriv.h"

/* ---- the builder ---- */

struct build_log {
    int fd;
    size_t written;
    int truncated;
    char error[512];
    struct nb_buildcap *cap; /* told of the containers and images the build makes */
    int fsize_hit;           /* a step said a file hit RLIMIT_FSIZE (template_disk_max) */
};

static void log_line(struct build_log *bl, const char *key, const char *text)
{
    yajl_gen g;
    const unsigned char *buf;
    size_t len;
    if (bl->fd < 0 || bl->truncated)
        return;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (bl->written + strlen(text) + 32 > NB_TPL_LOG_MAX) {
        nb_json_kv_str(g, "stream", "[nanobox: the log is over its cap; the rest is not kept]\n");
        bl->truncated = 1;
    } else {
        nb_json_kv_str(g, key, text);
    }
    yajl_gen_map_close(g);
    yajl_gen_get_buf(g, &buf, &len);
    if (write(bl->fd, buf, len) == (ssize_t)len && write(bl->fd, "\n", 1) == 1)
        bl->written += len + 1;
    yajl_gen_free(g);
}

static void on_build_line(void *arg, const char *line, size_t len)
{
    struct build_log *bl = arg;
    char err[64];
    yajl_val v = NULL, s;
    const char *sp[] = {"stream", NULL}, *ep[] = {"error", NULL}, *mp[] = {"message", NULL};
    if (nb_json_parse(line, len, 16, &v, err, sizeof(err)) != 0 || !YAJL_IS_OBJECT(v)) {
        yajl_tree_free(v);
        return;
    }
    if ((s = yajl_tree_get(v, sp, yajl_t_string)) != NULL) {
        const char *text = nb_json_string(s);
        log_line(bl, "stream", text);
        if (bl->cap)
            nb_buildcap_line(bl->cap, text);
        if (strstr(text, "File too large") || strstr(text, "File size limit exceeded"))
            bl->fsize_hit = 1;
    } else if ((s = yajl_tree_get(v, ep, yajl_t_string)) != NULL ||
               (s = yajl_tree_get(v, mp, yajl_t_string)) != NULL) {
        snprintf(bl->error, sizeof(bl->error), "%s", nb_json_string(s));
        log_line(bl, "error", nb_json_string(s));
    }
    yajl_tree_free(v);
}

static void read_job(const char *path, const struct nb_conf *c, uint64_t *memory,
                     uint64_t *nano_cpus)
{
    char buf[512], err[64];
    yajl_val v = NULL, m;
    const char *mp[] = {"memory", NULL}, *cp[] = {"nano_cpus", NULL};
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    *memory = c->template_memory;
    *nano_cpus = c->template_nano_cpus;
    if (f)
        fclose(f);
    if (nb_json_parse(buf, n, 4, &v, err, sizeof(err)) == 0 && v) {
        if ((m = yajl_tree_get(v, mp, yajl_t_number)) && YAJL_GET_INTEGER(m) > 0)
            *memory = (uint64_t)YAJL_GET_INTEGER(m);
        if ((m = yajl_tree_get(v, cp, yajl_t_number)) && YAJL_GET_INTEGER(m) > 0)
            *nano_cpus = (uint64_t)YAJL_GET_INTEGER(m);
    }
    yajl_tree_free(v);
}

/*
 * The image the name points at once Docker said the build ended: asked up
 * to three times, since a failure recorded now would take the name off an
 * image that was built.
 */
static int inspect_built(struct nb_docker *d, const char *ref, struct nb_docker_image *im,
                         struct nb_derr *de)
{
    for (int i = 0;; i++) {
        if (nb_docker_image_inspect(d, ref, im, de) == 0)
            return 0;
        if (i == 2 || (de->kind == NB_DERR_HTTP && de->status == 404))
            return -1;
        nb_warn("template: cannot inspect %s after its build (%s); asking again", ref, de->msg);
        usleep(200000);
    }
}

/*
 * The builds' network as the reaper last made sure of it (at most
 * BUILD_NET_FRESH_S old when a builder forks, which inherits it): at 0, the
 * builder makes sure itself (a direct call, the unit tests').
 */
#define BUILD_NET_FRESH_S 10
static struct {
    int64_t at;
    char name[160];
    char err[512];
} build_net;

void nb_tpl_build_net_prepare(struct nb_app *a)
{
    struct nb_apierr ae = {0};
    int64_t now = time(NULL);
    if (strcmp(a->conf.template_network, "bridge") != 0 ||
        (build_net.at != 0 && now - build_net.at < BUILD_NET_FRESH_S && !build_net.err[0]))
        return;
    build_net.err[0] = '\0';
    if (nb_network_build_ensure(a, build_net.name, sizeof(build_net.name), &ae) != 0) {
        snprintf(build_net.err, sizeof(build_net.err), "%s", ae.msg);
        nb_warn("templates: the builds' network: %s", ae.msg);
    }
    build_net.at = now;
}

int nb_template_build_job(struct nb_app *a, struct nb_docker *d, const char *key)
{
    const struct nb_conf *c = &a->conf;
    struct nb_docker_image rec, im;
    struct nb_derr de = {0};
    struct build_log bl = {-1, 0, 0, "", NULL, 0};
    struct nb_docker_build b;
    struct nb_buildcap cap;
    char ref[128], jobp[PATH_MAX], tarp[PATH_MAX], logp[PATH_MAX], error[512] = "";
    char net[160] = "none", marker[PATH_MAX];
    const char *name;
    uint64_t memory, nano_cpus;

    nb_tpl_key_ref(c, key, ref, sizeof(ref));
    nb_tpl_job_path(c, "run", key, "json", jobp, sizeof(jobp));
    nb_tpl_job_path(c, "queue", key, "tar", tarp, sizeof(tarp));
    nb_tpl_key_log_path(c, key, logp, sizeof(logp));
    read_job(jobp, c, &memory, &nano_cpus);
    if (nb_docker_image_inspect(d, ref, &rec, &de) != 0 || strcmp(rec.status, "building") != 0 ||
        strcmp(rec.instance, c->instance) != 0 || !nb_tpl_named_image(c, &rec)) {
        nb_warn("template job %s: no build record (%s); dropping the job", key,
                de.kind ? de.msg : rec.status);
        unlink(jobp);
        unlink(tarp);
        return -1;
    }
    name = rec.name;
    bl.fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    memset(&b, 0, sizeof(b));
    b.context = tarp;
    b.tag = ref;
    /* the labels are the context's last instruction (record_labels): one step, not five */
    /* RUN steps: on the builds' own network (a bridge sandbox's rules), or none; never the host's */
    if (!strcmp(c->template_network, "bridge")) {
        struct nb_apierr nae = {0};
        if (build_net.at == 0 &&
            nb_network_build_ensure(a, build_net.name, sizeof(build_net.name), &nae) != 0)
            snprintf(build_net.err, sizeof(build_net.err), "%s", nae.msg);
        if (build_net.err[0]) {
            if (bl.fd >= 0)
                close(bl.fd);
            nb_tpl_fail_build(c, d, name, rec.owner, rec.created_at, rec.id, build_net.err);
            return -1;
        }
        snprintf(net, sizeof(net), "%s", build_net.name);
    }
    b.network = net;
    b.memory = memory;
    b.nano_cpus = nano_cpus;
    b.fsize = c->template_disk_max; /* no one file past the cap: the kernel's bound */
    b.timeout_ms = (long)c->template_timeout * 1000L;
    nb_tpl_job_path(c, "run", key, "disk", marker, sizeof(marker));
    unlink(marker);
    memset(&cap, 0, sizeof(cap));
    cap.fd = -1;
    /* the watcher of the whole (the real Docker only: the unit tests' is in this process) */
    if (d->ops == &nb_docker_curl_ops &&
        nb_buildcap_start(&cap, c, marker, c->template_disk_max) != 0)
        nb_warn("template %s: no disk watcher (%s): template_disk_max bounds each file only", name,
                strerror(errno));
    bl.cap = &cap;
    nb_info("template %s: building", name);
    if (nb_docker_build(d, &b, on_build_line, &bl, &de) != 0) {
        if (de.kind == NB_DERR_TIMEOUT ||
            (de.kind == NB_DERR_UNREACHABLE && strstr(de.msg, "imeout") != NULL))
            snprintf(error, sizeof(error), "the build took longer than template_timeout (%u s)",
                     c->template_timeout);
        else
            snprintf(error, sizeof(error), "%s", bl.error[0] ? bl.error : de.msg);
    } else if (bl.error[0]) {
        if (bl.fsize_hit)
            snprintf(error, sizeof(error),
                     "the build wrote a file over template_disk_max (%llu bytes): %.300s",
                     (unsigned long long)c->template_disk_max, bl.error);
        else
            snprintf(error, sizeof(error), "%s", bl.error);
    } else if (inspect_built(d, ref, &im, &de) != 0) {
        snprintf(error, sizeof(error), "the build ended, but its image: %s", de.msg);
    } else if (!strcmp(im.id, rec.id) || strcmp(im.status, "ready") != 0) {
        /* its last instruction is the labels' LABEL: another image took the tag */
        snprintf(error, sizeof(error), "the build ended without an image (%s is %s, status %s)",
                 ref, im.id, im.status[0] ? im.status : "none");
    }
    nb_buildcap_stop(&cap);
    if (error[0]) {
        if (bl.fd >= 0)
            close(bl.fd);
        nb_buildcap_cleanup(&cap, d); /* the images its steps made: a failed build leaves none */
        nb_tpl_fail_build(c, d, name, rec.owner, rec.created_at, rec.id, error);
        return -1;
    }
    if (nb_docker_image_remove(d, rec.id, 0, &de) != 0)
        nb_warn("template %s: cannot remove its build record %s: %s", name, rec.id, de.msg);
    if (bl.fd >= 0)
        close(bl.fd);
    nb_tpl_log_final(c, rec.owner, name, "ready", NULL);
    unlink(jobp);
    unlink(tarp);
    nb_info("template %s: ready (%s)", name, im.id);
    return 0;
}
