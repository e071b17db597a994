/*
 * files.c - see files.h. Each operation is one request on its own
 * connection to the sandbox's agent (agent.c); this file is where the
 * files part of the agent protocol (docs/AGENT-PROTOCOL.md) is spoken on
 * the host's side: request fields out, info/data/entry frames in.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agentproto.h"
#include "files.h"

_Static_assert(NB_FILES_PATH_MAX == NBA_MAX_PATH, "files.h's path cap is the protocol's");
_Static_assert(NB_FILES_MAX_DEPTH == NBA_MAX_DEPTH, "files.h's depth cap is the protocol's");

/* How long a small file operation may take in the agent. */
#define FILES_OP_TIMEOUT_MS 30000
#define FILES_ABANDON_MS 2000 /* how long an agent may take to drop a half-done upload */

const char *nb_file_kind_name(enum nb_file_kind kind)
{
    switch (kind) {
    case NB_FILE_REGULAR:
        return "file";
    case NB_FILE_DIR:
        return "dir";
    case NB_FILE_SYMLINK:
        return "symlink";
    default:
        return "other";
    }
}

int nb_files_path(const struct nb_conf *c, const char *raw, size_t len, char *out, size_t outlen,
                  struct nb_apierr *ae)
{
    return nb_files_path_in(c->workspace, raw, len, out, outlen, ae);
}

int nb_files_path_in(const char *home, const char *raw, size_t len, char *out, size_t outlen,
                     struct nb_apierr *ae)
{
    size_t n;
    if (len == 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_path", "a path is required (?path=/workspace/file)");
        return -1;
    }
    if (memchr(raw, '\0', len) != NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_path", "the path contains a NUL byte");
        return -1;
    }
    if (raw[0] == '/')
        n = (size_t)snprintf(out, outlen, "%.*s", (int)len, raw);
    else
        n = (size_t)snprintf(out, outlen, "%s/%.*s", home, (int)len, raw);
    if (n >= outlen || n > NBA_MAX_PATH) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_path", "the path is longer than %u bytes",
                      NBA_MAX_PATH);
        return -1;
    }
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    if (!nba_path_ok(out, n)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_path",
                      "the path must not contain \".\" or \"..\" components: \"%.200s\"", out);
        return -1;
    }
    return 0;
}

static enum nb_file_kind kind_of(uint8_t k)
{
    switch (k) {
    case NBA_KIND_FILE:
        return NB_FILE_REGULAR;
    case NBA_KIND_DIR:
        return NB_FILE_DIR;
    case NBA_KIND_LINK:
        return NB_FILE_SYMLINK;
    default:
        return NB_FILE_OTHER;
    }
}

/* A string field into out (cut to fit), NUL-terminated. */
static void field_str(char *out, size_t outlen, const unsigned char *v, uint32_t l)
{
    size_t n = l < outlen - 1 ? l : outlen - 1;
    memcpy(out, v, n);
    out[n] = '\0';
}

int nb_file_meta_add(struct nb_file_meta *m, const char *key, size_t klen, const char *value,
                     size_t vlen)
{
    size_t pos = 0, used = m->len - 2 * m->n; /* keys and values, without their NULs */
    const char *k, *v;
    if (!nba_meta_key_ok(key, klen) || !nba_meta_value_ok(value, vlen) || m->n >= NBA_META_MAX ||
        used + klen + vlen > NBA_META_BYTES || memchr(value, '\0', vlen) != NULL)
        return -1;
    while (nb_file_meta_next(m, &pos, &k, &v))
        if (strlen(k) == klen && memcmp(k, key, klen) == 0)
            return -1;
    memcpy(m->data + m->len, key, klen);
    m->data[m->len + klen] = '\0';
    memcpy(m->data + m->len + klen + 1, value, vlen);
    m->data[m->len + klen + 1 + vlen] = '\0';
    m->len += klen + vlen + 2;
    m->n++;
    return 0;
}

int nb_file_meta_next(const struct nb_file_meta *m, size_t *pos, const char **key,
                      const char **value)
{
    if (*pos >= m->len)
        return 0;
    *key = m->data + *pos;
    *value = *key + strlen(*key) + 1;
    *pos = (size_t)(*value - m->data) + strlen(*value) + 1;
    return 1;
}

/* An info ('f') or entry ('n') frame's fields into fi. */
static void info_parse(const unsigned char *body, uint32_t len, struct nb_file_info *fi)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t l;
    memset(fi, 0, sizeof(*fi));
    fi->kind = NB_FILE_OTHER;
    nba_fields_init(&it, body, len);
    while (nba_fields_next(&it, &tag, &v, &l) == 1) {
        if (tag == NBA_T_KIND && l == 1)
            fi->kind = kind_of(v[0]);
        else if (tag == NBA_T_CLOSE && l == 8)
            fi->size = nba_get_u64(v);
        else if (tag == NBA_T_MAXOUT && l == 4)
            fi->mode = nba_get_u32(v);
        else if (tag == NBA_T_MTIME && l == 8)
            fi->mtime = nba_get_u64(v);
        else if (tag == NBA_T_MTIME_NS && l == 4 && nba_get_u32(v) < 1000000000u)
            fi->mtime_nsec = nba_get_u32(v);
        else if (tag == NBA_T_TMODE && l == 4)
            fi->tmode = nba_get_u32(v);
        else if (tag == NBA_T_PATH)
            field_str(fi->name, sizeof(fi->name), v, l);
        else if (tag == NBA_T_OWNER)
            field_str(fi->owner, sizeof(fi->owner), v, l);
        else if (tag == NBA_T_GROUP)
            field_str(fi->group, sizeof(fi->group), v, l);
        else if (tag == NBA_T_TARGET)
            field_str(fi->target, sizeof(fi->target), v, l);
        else if (tag == NBA_T_REAL && l > 0 && v[0] == '/')
            field_str(fi->real, sizeof(fi->real), v, l);
        else if (tag == NBA_T_META) {
            const unsigned char *nul = memchr(v, '\0', l);
            /* the agent holds to the rules; one that does not loses the entry */
            if (nul != NULL)
                (void)nb_file_meta_add(&fi->meta, (const char *)v, (size_t)(nul - v),
                                       (const char *)nul + 1, l - (size_t)(nul - v) - 1);
        }
    }
}

/* Files need the agent: say so rather than the bare "does not answer". */
static void agent_needed(struct nb_apierr *ae)
{
    if (ae->err == NB_E_AGENT_DOWN)
        nb_apierr_set(ae, NB_E_AGENT_DOWN, "agent_unavailable",
                      "this sandbox's agent (nanobox-init) does not answer; files need it");
}

static int files_connect(const struct nb_slot *slot, struct nb_agent *ag, struct nb_apierr *ae)
{
    if (nb_agent_connect(slot, ag, ae) != 0) {
        agent_needed(ae);
        return -1;
    }
    return 0;
}

/* The next frame within the operation's time; -1 with ae set when none came. */
static int files_recv(struct nb_agent *ag, uint8_t *type, const unsigned char **body, uint32_t *len,
                      struct nb_apierr *ae)
{
    int got = nb_agent_recv(ag, FILES_OP_TIMEOUT_MS, type, body, len, ae);
    if (got == 0)
        nb_apierr_set(ae, NB_E_TIMEOUT, "agent_timeout",
                      "the sandbox's agent did not answer in time");
    return got > 0 ? 0 : -1;
}

int nb_files_read(struct nb_app *a, const struct nb_slot *slot, const char *path,
                  struct nb_files_sink *sink, struct nb_apierr *ae)
{
    struct nb_agent ag;
    struct nb_buf f;
    struct nb_file_info fi;
    unsigned n_entries = 0;
    int got_info = 0, rc = -1;

    (void)a;
    sink->truncated = 0;
    if (files_connect(slot, &ag, ae) != 0)
        return -1;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    if (sink->depth > 1)
        nb_agent_field_u32(&f, NBA_T_DEPTH,
                           sink->depth < NBA_MAX_DEPTH ? sink->depth : NBA_MAX_DEPTH);
    nb_agent_queue(&ag, NBA_FREAD, f.data, f.len);
    nb_buf_free(&f);
    for (;;) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        if (files_recv(&ag, &type, &body, &len, ae) != 0)
            break;
        if (type == NBA_ERROR) {
            nb_agent_error(body, len, "read the path", ae);
            break;
        }
        if (type == NBA_INFO && !got_info) {
            got_info = 1;
            info_parse(body, len, &fi);
            if (sink->on_info(sink->arg, &fi) != 0) {
                rc = 0;
                break;
            }
        } else if (type == NBA_DATA && got_info && fi.kind != NB_FILE_DIR) {
            /* a reader that left: closing the connection ends the read */
            if (sink->on_data(sink->arg, body, len) != 0) {
                rc = 0;
                break;
            }
        } else if (type == NBA_DIRENT && got_info && fi.kind == NB_FILE_DIR) {
            struct nb_file_info e;
            if (n_entries >= NB_FILES_MAX_ENTRIES) {
                sink->truncated = 1;
                continue;
            }
            info_parse(body, len, &e);
            n_entries++;
            if (sink->on_entry(sink->arg, &e) != 0) {
                rc = 0;
                break;
            }
        } else if (type == NBA_END) {
            if (got_info)
                rc = 0;
            else
                nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                              "the sandbox's agent answered without the file");
            break;
        }
    }
    nb_agent_close(&ag);
    return rc;
}

/*
 * Send size bytes of src (NB_FILES_SIZE_UNKNOWN: until it says 0) as data
 * frames, never more than one chunk held here.
 */
static int write_body(struct nb_agent *ag, uint64_t size, nb_files_source_fn src, void *src_arg,
                      struct nb_apierr *ae)
{
    char *chunk = nb_xmalloc(NBA_CHUNK);
    uint64_t sent = 0;
    int rc = 0;

    while (sent < size && rc == 0) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        size_t want = size - sent < NBA_CHUNK ? (size_t)(size - sent) : NBA_CHUNK;
        int n = src(src_arg, chunk, want), got;
        if (n == 0 && size == NB_FILES_SIZE_UNKNOWN)
            break; /* the source's own end */
        if (n <= 0 && size == NB_FILES_SIZE_UNKNOWN) {
            nb_apierr_set(ae, NB_E_INVALID, "short_body",
                          "the body could not be read after %llu bytes", (unsigned long long)sent);
            rc = -1;
            break;
        }
        if (n <= 0) {
            nb_apierr_set(ae, NB_E_INVALID, "short_body", "the body ended after %llu of %llu bytes",
                          (unsigned long long)sent, (unsigned long long)size);
            rc = -1;
            break;
        }
        sent += (uint64_t)n;
        nb_agent_queue(ag, NBA_DATA, chunk, (size_t)n);
        if (nb_agent_flush(ag, FILES_OP_TIMEOUT_MS, ae) != 0) {
            rc = -1;
        } else if ((got = nb_agent_poll_frame(ag, &type, &body, &len, ae)) != 0) {
            /* the agent only speaks early to refuse */
            if (got > 0 && type == NBA_ERROR)
                nb_agent_error(body, len, "write the file", ae);
            else if (got > 0)
                nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                              "unexpected answer from the sandbox's agent");
            rc = -1;
        }
    }
    free(chunk);
    chunk = NULL;
    return rc;
}

int nb_files_write(struct nb_app *a, const struct nb_slot *slot, const char *path, uint32_t mode,
                   uint64_t size, nb_files_source_fn src, void *src_arg, struct nb_file_info *out,
                   int *have_info, struct nb_apierr *ae)
{
    return nb_files_write_meta(a, slot, path, mode, NULL, size, src, src_arg, out, have_info, ae);
}

int nb_files_write_meta(struct nb_app *a, const struct nb_slot *slot, const char *path,
                        uint32_t mode, const struct nb_file_meta *meta, uint64_t size,
                        nb_files_source_fn src, void *src_arg, struct nb_file_info *out,
                        int *have_info, struct nb_apierr *ae)
{
    struct nb_agent ag;
    struct nb_buf f;
    int rc = -1;

    (void)a;
    *have_info = 0;
    if (meta != NULL && meta->n > 0 && !(nb_agent_caps(slot) & NB_AGENT_CAP_META)) {
        nb_apierr_set(ae, NB_E_INVALID, "metadata_unsupported",
                      "this sandbox's agent predates file metadata: recreate the sandbox");
        return -1;
    }
    if (files_connect(slot, &ag, ae) != 0)
        return -1;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    nb_agent_field_u32(&f, NBA_T_MAXOUT, mode);
    if (meta != NULL) {
        size_t pos = 0;
        const char *k, *v;
        while (nb_file_meta_next(meta, &pos, &k, &v))
            nb_agent_field(&f, NBA_T_META, k, (uint32_t)(v + strlen(v) - k)); /* key\0value */
    }
    nb_agent_queue(&ag, NBA_FWRITE, f.data, f.len);
    nb_buf_free(&f);

    if (write_body(&ag, size, src, src_arg, ae) == 0) {
        nb_agent_queue(&ag, NBA_END, NULL, 0);
        for (;;) {
            uint8_t type;
            const unsigned char *body;
            uint32_t len;
            if (files_recv(&ag, &type, &body, &len, ae) != 0)
                break;
            if (type == NBA_ERROR) {
                nb_agent_error(body, len, "write the file", ae);
                break;
            }
            if (type == NBA_INFO) {
                info_parse(body, len, out);
                *have_info = 1;
            } else if (type == NBA_END) {
                rc = 0;
                break;
            }
        }
    }
    /*
     * a write that did not finish leaves nothing: the agent drops its temp
     * file, before the client hears of the failure
     */
    if (rc == 0)
        nb_agent_close(&ag);
    else
        nb_agent_abandon(&ag, FILES_ABANDON_MS);
    return rc;
}

struct stat_ctx {
    struct nb_file_info *out;
    int got;
};

static int stat_frame(void *arg, uint8_t type, const unsigned char *body, uint32_t len)
{
    struct stat_ctx *sc = arg;
    if (type == NBA_INFO && !sc->got) {
        info_parse(body, len, sc->out);
        sc->got = 1;
    }
    return 0;
}

int nb_files_stat(struct nb_app *a, const struct nb_slot *slot, const char *path,
                  struct nb_file_info *out, struct nb_apierr *ae)
{
    struct stat_ctx sc = {out, 0};
    struct nb_buf f;
    int rc;

    (void)a;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    rc = nb_agent_call(slot, NBA_FSTAT, &f, "stat the path", FILES_OP_TIMEOUT_MS, stat_frame, &sc,
                       ae);
    nb_buf_free(&f);
    if (rc != 0) {
        agent_needed(ae);
        return -1;
    }
    if (!sc.got) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                      "the sandbox's agent answered without the path's info");
        return -1;
    }
    return 0;
}

/* One small request whose answer is just the end frame. */
static int files_simple(const struct nb_slot *slot, uint8_t req, const struct nb_buf *fields,
                        const char *what, struct nb_apierr *ae)
{
    if (nb_agent_call(slot, req, fields, what, FILES_OP_TIMEOUT_MS, NULL, NULL, ae) != 0) {
        agent_needed(ae);
        return -1;
    }
    return 0;
}

int nb_files_delete(struct nb_app *a, const struct nb_slot *slot, const char *path, int recursive,
                    struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc;

    (void)a;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    if (recursive)
        nb_agent_field(&f, NBA_T_RECURSIVE, NULL, 0);
    rc = files_simple(slot, NBA_FDELETE, &f, "delete the path", ae);
    nb_buf_free(&f);
    return rc;
}

int nb_files_mkdir(struct nb_app *a, const struct nb_slot *slot, const char *path,
                   struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc;

    (void)a;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    rc = files_simple(slot, NBA_FMKDIR, &f, "create the directory", ae);
    nb_buf_free(&f);
    return rc;
}

int nb_files_move(struct nb_app *a, const struct nb_slot *slot, const char *from, const char *to,
                  struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc;

    (void)a;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, from);
    nb_agent_field_str(&f, NBA_T_DEST, to);
    rc = files_simple(slot, NBA_FMOVE, &f, "move the path", ae);
    nb_buf_free(&f);
    return rc;
}

/* ---- watch ---- */

const char *nb_watch_event_name(enum nb_watch_event ev)
{
    static const char *const names[] = {"create", "write", "remove", "rename", "chmod", "overflow"};
    return (unsigned)ev < sizeof(names) / sizeof(names[0]) ? names[ev] : "overflow";
}

static int watch_kind(uint8_t k, enum nb_watch_event *ev)
{
    switch (k) {
    case NBA_EV_CREATE:
        *ev = NB_WATCH_CREATE;
        return 0;
    case NBA_EV_WRITE:
        *ev = NB_WATCH_WRITE;
        return 0;
    case NBA_EV_REMOVE:
        *ev = NB_WATCH_REMOVE;
        return 0;
    case NBA_EV_RENAME:
        *ev = NB_WATCH_RENAME;
        return 0;
    case NBA_EV_CHMOD:
        *ev = NB_WATCH_CHMOD;
        return 0;
    case NBA_EV_OVERFLOW:
        *ev = NB_WATCH_OVERFLOW;
        return 0;
    default:
        return -1; /* a newer agent's kind: skipped */
    }
}

/* One v frame to on_event: its return. */
static int watch_event_to(int (*on_event)(void *arg, enum nb_watch_event ev, const char *name),
                          void *arg, const unsigned char *body, uint32_t len)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t l;
    enum nb_watch_event ev = NB_WATCH_OVERFLOW;
    char name[NB_FILES_PATH_MAX + 1] = "";
    int known = -1;

    nba_fields_init(&it, body, len);
    while (nba_fields_next(&it, &tag, &v, &l) == 1) {
        if (tag == NBA_T_KIND && l == 1)
            known = watch_kind(v[0], &ev);
        else if (tag == NBA_T_PATH)
            field_str(name, sizeof(name), v, l);
    }
    return known == 0 ? on_event(arg, ev, name) : 0;
}

int nb_files_watch(struct nb_app *a, const struct nb_slot *slot, const char *path, int recursive,
                   unsigned max_dirs, struct nb_files_watch_sink *sink, struct nb_apierr *ae)
{
    struct nb_agent ag;
    struct nb_buf f;
    int started = 0, rc = -1;

    (void)a;
    sink->gone = 0;
    if (files_connect(slot, &ag, ae) != 0)
        return -1;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    if (recursive)
        nb_agent_field(&f, NBA_T_RECURSIVE, NULL, 0);
    nb_agent_field_u32(&f, NBA_T_MAXOUT, max_dirs);
    nb_agent_queue(&ag, NBA_FWATCH, f.data, f.len);
    nb_buf_free(&f);
    for (;;) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        int got = nb_agent_recv_watch(&ag, started ? sink->idle_ms : FILES_OP_TIMEOUT_MS,
                                      sink->client_fd, &type, &body, &len, ae);
        if (got == 2) {
            rc = 0; /* the client left: closing the connection ends the agent's watch */
            break;
        }
        if (got == 0 && !started) {
            nb_apierr_set(ae, NB_E_TIMEOUT, "agent_timeout",
                          "the sandbox's agent did not answer in time");
            break;
        }
        if (got == 0) {
            if (sink->on_idle(sink->arg) != 0) {
                rc = 0;
                break;
            }
            continue;
        }
        if (got < 0) {
            agent_needed(ae);
            break;
        }
        if (type == NBA_ERROR) {
            nb_agent_error(body, len, "watch the directory", ae);
            if (!started && ae->err == NB_E_NO_SPACE) /* ENOSPC: past the cap or the kernel's */
                nb_apierr_set(ae, NB_E_LIMIT, "too_many_watches",
                              "%.200s has more directories than a watch may hold "
                              "(files_watch_max_dirs = %u)",
                              path, max_dirs);
            else if (!started && ae->err == NB_E_LIMIT)
                snprintf(ae->code, sizeof(ae->code), "too_many_watches");
            break;
        }
        if (type == NBA_STARTED && !started && len >= 4) {
            started = 1;
            if (sink->on_start(sink->arg, nba_get_u32(body)) != 0) {
                rc = 0;
                break;
            }
        } else if (type == NBA_FEVENT && started) {
            if (watch_event_to(sink->on_event, sink->arg, body, len) != 0) {
                rc = 0;
                break;
            }
        } else if (type == NBA_END && started) {
            sink->gone = 1;
            rc = 0;
            break;
        }
    }
    nb_agent_close(&ag);
    return rc;
}

/* ---- polling watchers ---- */

struct watcher_ctx {
    uint32_t id;
    int (*on_event)(void *arg, enum nb_watch_event ev, const char *name);
    void *arg;
};

static int watcher_frame(void *arg, uint8_t type, const unsigned char *body, uint32_t len)
{
    struct watcher_ctx *w = arg;
    if (type == NBA_STARTED && len >= 12)
        w->id = nba_get_u32(body + 8);
    else if (type == NBA_FEVENT && w->on_event != NULL)
        watch_event_to(w->on_event, w->arg, body, len);
    return 0;
}

int nb_files_watcher_create(struct nb_app *a, const struct nb_slot *slot, const char *path,
                            int recursive, unsigned max_dirs, uint32_t *id, struct nb_apierr *ae)
{
    struct watcher_ctx w = {0, NULL, NULL};
    struct nb_buf f;
    int rc;

    (void)a;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_str(&f, NBA_T_PATH, path);
    if (recursive)
        nb_agent_field(&f, NBA_T_RECURSIVE, NULL, 0);
    nb_agent_field_u32(&f, NBA_T_MAXOUT, max_dirs);
    rc = nb_agent_call(slot, NBA_WCREATE, &f, "watch the directory", FILES_OP_TIMEOUT_MS,
                       watcher_frame, &w, ae);
    nb_buf_free(&f);
    if (rc != 0) {
        agent_needed(ae);
        if (ae->err == NB_E_NO_SPACE)
            nb_apierr_set(ae, NB_E_LIMIT, "too_many_watches",
                          "%.200s has more directories than a watch may hold "
                          "(files_watch_max_dirs = %u)",
                          path, max_dirs);
        else if (ae->err == NB_E_LIMIT)
            snprintf(ae->code, sizeof(ae->code), "too_many_watches");
        return -1;
    }
    if (w.id == 0) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                      "the sandbox's agent answered without a watcher id");
        return -1;
    }
    *id = w.id;
    return 0;
}

static int watcher_by_id(const struct nb_slot *slot, uint8_t req, uint32_t id,
                         struct watcher_ctx *w, const char *what, struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc;

    nb_buf_init(&f, 64);
    nb_agent_field_u32(&f, NBA_T_PID, id);
    rc = nb_agent_call(slot, req, &f, what, FILES_OP_TIMEOUT_MS, watcher_frame, w, ae);
    nb_buf_free(&f);
    if (rc != 0)
        agent_needed(ae);
    return rc;
}

int nb_files_watcher_events(struct nb_app *a, const struct nb_slot *slot, uint32_t id,
                            int (*on_event)(void *arg, enum nb_watch_event ev, const char *name),
                            void *arg, struct nb_apierr *ae)
{
    struct watcher_ctx w = {id, on_event, arg};
    (void)a;
    return watcher_by_id(slot, NBA_WPOLL, id, &w, "read the watcher's events", ae);
}

int nb_files_watcher_remove(struct nb_app *a, const struct nb_slot *slot, uint32_t id,
                            struct nb_apierr *ae)
{
    struct watcher_ctx w = {id, NULL, NULL};
    (void)a;
    return watcher_by_id(slot, NBA_WREMOVE, id, &w, "remove the watcher", ae);
}
