/*
 * tarstream.c - directory trees in and out of a sandbox as one tar (see
 * tarstream.h). The sandbox's GNU tar runs through the exec engine, as the
 * sandbox user in the sandbox; a tar to extract is first read whole here
 * with libarchive and refused unless each entry stays under the target.
 */
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tarstream.h"
#include "exec.h"
#include "log.h"

/* Exit codes of the scripts below for what the host answers itself. */
#define ARC_NOT_FOUND 10
#define ARC_NOT_DIR 11

/* $1: the directory. Say why it cannot be read (tar would leave out what
 * the sandbox user cannot read, once the answer began), then measure its
 * tar (GNU tar reads no file's data when the archive is /dev/null). */
static const char ARC_MEASURE[] =
    "[ -e \"$1\" ] || { echo \"no such directory: $1\" >&2; exit 10; }\n"
    "[ -d \"$1\" ] || { echo \"not a directory: $1\" >&2; exit 11; }\n"
    "cd -- \"$1\" || exit 1\n"
    "bad=$(find . ! -type l ! -readable -print -quit)\n"
    "[ -z \"$bad\" ] || { echo \"Permission denied: cannot read $bad\" >&2; exit 13; }\n"
    "exec tar -cf /dev/null --totals .";
static const char ARC_CREATE[] = "cd -- \"$1\" && exec tar -cf - .";
static const char ARC_EXTRACT[] =
    "if [ -e \"$1\" ] && [ ! -d \"$1\" ]; then echo \"not a directory: $1\" >&2; exit 11; fi\n"
    "mkdir -p -- \"$1\" && cd -- \"$1\" && exec tar -x -p -f - --no-same-owner";

/* Room for tar's own blocks and stderr past max_file in the agent's cap. */
#define ARC_SLACK (1024u * 1024u)

/* tar's first line of stderr (or the script's), for a message. */
static void first_line(const struct nb_buf *err, char *out, size_t outlen)
{
    size_t n = err->len;
    const char *nl = err->len ? memchr(err->data, '\n', err->len) : NULL;
    if (nl != NULL)
        n = (size_t)(nl - err->data);
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, err->len ? err->data : "", n);
    out[n] = '\0';
}

/* The answer for a script that did not exit 0. */
static void arc_failed(const struct nb_exec_result *res, const char *dir, const char *what,
                       struct nb_apierr *ae)
{
    char line[300];
    first_line(&res->err, line, sizeof(line));
    if (res->exit_code == ARC_NOT_FOUND)
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "no such directory: %s", dir);
    else if (res->exit_code == ARC_NOT_DIR)
        nb_apierr_set(ae, NB_E_CONFLICT, "conflict", "not a directory: %s", dir);
    else if (res->exit_code == 127)
        nb_apierr_set(ae, NB_E_UNSUPPORTED, "no_tar",
                      "the sandbox's image has no tar: archives need GNU tar in it");
    else if (res->timed_out)
        nb_apierr_set(ae, NB_E_TIMEOUT, "timeout", "%s took longer than exec_timeout_max", what);
    else if (strstr(res->err.len ? res->err.data : "", "Permission denied") != NULL ||
             strstr(res->err.len ? res->err.data : "", "Read-only file system") != NULL)
        nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden", "%s: %s", what, line);
    else if (strstr(res->err.len ? res->err.data : "", "No space left") != NULL ||
             strstr(res->err.len ? res->err.data : "", "quota exceeded") != NULL)
        nb_apierr_set(ae, NB_E_NO_SPACE, "no_space", "%s: %s", what, line);
    else
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "tar_failed", "%s failed (tar exit code %d): %s", what,
                      res->exit_code, line[0] ? line : "no message");
}

static void arc_req(struct nb_exec_req *rq, const struct nb_app *a, const char *const *argv,
                    int client_fd)
{
    memset(rq, 0, sizeof(*rq));
    rq->argv = argv;
    rq->timeout = a->conf.exec_timeout_max;
    rq->client_fd = client_fd;
}

/* "Total bytes written: N (...)" in tar's stderr. */
static int parse_totals(const struct nb_buf *err, uint64_t *out)
{
    static const char key[] = "Total bytes written: ";
    const char *p = err->len ? strstr(err->data, key) : NULL;
    char *end;
    unsigned long long v;

    if (p == NULL)
        return -1;
    v = strtoull(p + sizeof(key) - 1, &end, 10);
    if (end == p + sizeof(key) - 1)
        return -1;
    *out = v;
    return 0;
}

struct read_ctx {
    struct nb_tar_sink *sink;
    uint64_t size;
    int begun;
};

static int read_output(void *arg, int is_stderr, const char *data, size_t len)
{
    struct read_ctx *x = arg;
    if (is_stderr)
        return 0;
    if (!x->begun) {
        x->begun = 1;
        if (x->sink->on_begin(x->sink->arg, x->size) != 0)
            return -1;
    }
    return x->sink->on_data(x->sink->arg, data, len);
}

int nb_tar_read(struct nb_app *a, const struct nb_slot *slot, const char *dir, int client_fd,
                struct nb_tar_sink *sink, struct nb_apierr *ae)
{
    const char *measure[] = {"sh", "-c", ARC_MEASURE, "sh", dir, NULL};
    const char *create[] = {"sh", "-c", ARC_CREATE, "sh", dir, NULL};
    size_t cap = a->conf.max_file;
    struct nb_exec_req rq;
    struct nb_exec_result res;
    struct read_ctx x = {sink, 0, 0};
    int rc = -1;

    arc_req(&rq, a, measure, client_fd);
    nb_exec_result_init(&res, 64 * 1024);
    if (nb_exec_run(a, slot, &rq, &res, ae) != 0)
        goto out;
    if (res.client_gone) {
        nb_apierr_set(ae, NB_E_CANCELLED, "client_gone", "the client went away");
        goto out;
    }
    if (res.exit_code != 0 || parse_totals(&res.err, &x.size) != 0) {
        if (res.exit_code == 0)
            nb_apierr_set(ae, NB_E_UPSTREAM, "bad_gateway",
                          "the sandbox's tar did not say how large");
        else
            arc_failed(&res, dir, "reading the directory", ae);
        goto out;
    }
    if (x.size > cap) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                      "the directory's tar is %" PRIu64 " bytes; the limit is %zu (max_file)",
                      x.size, cap);
        goto out;
    }
    nb_exec_result_free(&res);

    arc_req(&rq, a, create, client_fd);
    rq.stream_stdout = 1;
    rq.on_output = read_output;
    rq.ctx = &x;
    nb_exec_result_init(&res, cap + ARC_SLACK);
    if (nb_exec_run(a, slot, &rq, &res, ae) != 0)
        goto out;
    if (!x.begun && !res.client_gone) {
        arc_failed(&res, dir, "reading the directory", ae);
        goto out;
    }
    if (res.exit_code != 0 || res.truncated)
        nb_warn("sandbox %s: the tar of %s ended early (exit %d%s): %.*s", slot->id, dir,
                res.exit_code, res.truncated ? ", over max_file" : "",
                (int)(res.err.len > 200 ? 200 : res.err.len), res.err.len ? res.err.data : "");
    rc = 0;
out:
    nb_exec_result_free(&res);
    return rc;
}

/* A name as it will be extracted: relative, no "..", no empty name. Leading
 * "./" are dropped; "." (the directory itself) is fine. 0 or -1. */
static int name_ok(const char *name, const char **why)
{
    const char *p = name;
    if (name == NULL || *name == '\0') {
        *why = "an entry has no name";
        return -1;
    }
    if (*name == '/') {
        *why = "is an absolute path";
        return -1;
    }
    while (*p) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            *why = "has a \"..\" component";
            return -1;
        }
        p += n;
        while (*p == '/')
            p++;
    }
    return 0;
}

/* The depth of a name's directory: "a/b/c" -> 2 (a/b), "./x" -> 0. */
static int dir_depth(const char *name)
{
    int depth = 0;
    const char *p = name;
    while (*p) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (end == NULL)
            break; /* the last component is the entry itself */
        if (!(n == 0 || (n == 1 && p[0] == '.')))
            depth++;
        p = end + 1;
    }
    return depth;
}

/* A symlink at name pointing at target stays under the directory, as
 * written: relative, and its ".." never climb above the top. */
static int link_ok(const char *name, const char *target, const char **why)
{
    int depth = dir_depth(name);
    const char *p = target;
    if (target == NULL || *target == '\0') {
        *why = "is a symlink with no target";
        return -1;
    }
    if (*target == '/') {
        *why = "is a symlink to an absolute path";
        return -1;
    }
    while (*p) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0) {
                *why = "is a symlink that points above the directory";
                return -1;
            }
        } else if (!(n == 0 || (n == 1 && p[0] == '.'))) {
            depth++;
        }
        p += n;
        while (*p == '/')
            p++;
    }
    return 0;
}

int nb_tar_check(const void *tar, size_t len, size_t max_bytes, struct nb_tar_stats *st,
                 struct nb_apierr *ae)
{
    struct archive *ar;
    struct archive_entry *e;
    int r, rc = -1;

    memset(st, 0, sizeof(*st));
    if (len == 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_archive",
                      "the body is empty: send a tar (application/x-tar)");
        return -1;
    }
    ar = archive_read_new();
    if (ar == NULL) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "out of memory");
        return -1;
    }
    archive_read_support_format_tar(ar);
    archive_read_support_filter_none(ar);
    if (archive_read_open_memory(ar, tar, len) != ARCHIVE_OK) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_archive", "not a tar: %s", archive_error_string(ar));
        goto out;
    }
    while ((r = archive_read_next_header(ar, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        const char *name = archive_entry_pathname(e), *why = NULL;
        const char *hard = archive_entry_hardlink(e);
        mode_t type = archive_entry_filetype(e);

        st->entries++;
        if (name_ok(name, &why) != 0)
            goto refuse;
        if (hard != NULL) {
            if (name_ok(hard, &why) != 0) {
                why = "is a hard link to a path outside the directory";
                goto refuse;
            }
        } else if (type == AE_IFLNK) {
            if (link_ok(name, archive_entry_symlink(e), &why) != 0)
                goto refuse;
        } else if (type == AE_IFREG) {
            int64_t size = archive_entry_size(e);
            st->bytes += size > 0 ? (uint64_t)size : 0;
            if (st->bytes > max_bytes) {
                nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                              "the tar's files hold more than %zu bytes (max_file)", max_bytes);
                goto out;
            }
        } else if (type != AE_IFDIR) {
            why = "is not a file, a directory or a link (devices, FIFOs and sockets are refused)";
            goto refuse;
        }
        if (archive_read_data_skip(ar) != ARCHIVE_OK) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_archive", "the tar is cut short or damaged: %s",
                          archive_error_string(ar));
            goto out;
        }
        continue;
refuse:
        nb_apierr_set(ae, NB_E_INVALID, "bad_archive", "entry '%.200s' %s: nothing was extracted",
                      name ? name : "", why);
        goto out;
    }
    if (r != ARCHIVE_EOF) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_archive", "not a tar, or a damaged one: %s",
                      archive_error_string(ar));
        goto out;
    }
    rc = 0;
out:
    archive_read_free(ar);
    return rc;
}

int nb_tar_extract(struct nb_app *a, const struct nb_slot *slot, const char *dir, const void *tar,
                   size_t len, int client_fd, struct nb_tar_stats *st, struct nb_apierr *ae)
{
    const char *extract[] = {"sh", "-c", ARC_EXTRACT, "sh", dir, NULL};
    struct nb_exec_req rq;
    struct nb_exec_result res;
    int rc = -1;

    if (nb_tar_check(tar, len, a->conf.max_file, st, ae) != 0)
        return -1;
    arc_req(&rq, a, extract, client_fd);
    rq.stdin_data = tar;
    rq.stdin_len = len;
    nb_exec_result_init(&res, 64 * 1024);
    if (nb_exec_run(a, slot, &rq, &res, ae) != 0)
        goto out;
    if (res.client_gone) {
        nb_apierr_set(ae, NB_E_CANCELLED, "client_gone", "the client went away");
        goto out;
    }
    if (res.exit_code != 0) {
        arc_failed(&res, dir, "extracting the tar", ae);
        goto out;
    }
    rc = 0;
out:
    nb_exec_result_free(&res);
    return rc;
}
