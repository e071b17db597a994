/*
 * request.c - see request.h.
 *
 * Each request type has a table of the fields it takes, with the shape of
 * each value; the parser makes two passes over the fields: the first
 * checks every tag, size and repetition and counts argv/env entries, the
 * second fills the request. Nothing is trusted before it has been checked
 * against the bytes held: the frame comes from whoever connected.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentproto.h"
#include "init.h"
#include "request.h"

enum field_kind {
    FK_EMPTY, /* presence is the value */
    FK_U32,
    FK_U64,
    FK_BYTES, /* anything */
    FK_PATH,  /* nba_path_ok */
    FK_ARG,   /* argv entry */
    FK_ENV,   /* NAME=value */
    FK_META,  /* "key\0value" (nba_meta_key_ok, nba_meta_value_ok) */
};

#define FR_REQUIRED 1u
#define FR_REPEAT 2u

struct field_rule {
    uint8_t tag;
    uint8_t kind;  /* enum field_kind */
    uint8_t flags; /* FR_* */
};

struct request_rule {
    uint8_t type;
    const struct field_rule *fields; /* ends with tag 0 */
};

static const struct field_rule no_fields[] = {{0, 0, 0}};
static const struct field_rule exec_fields[] = {
    {NBA_T_ARG, FK_ARG, FR_REQUIRED | FR_REPEAT},
    {NBA_T_ENV, FK_ENV, FR_REPEAT},
    {NBA_T_CWD, FK_PATH, 0},
    {NBA_T_TIMEOUT, FK_U32, 0},
    {NBA_T_MAXOUT, FK_U32, 0},
    {NBA_T_BG, FK_EMPTY, 0},
    {NBA_T_WINSIZE, FK_U32, 0},
    {NBA_T_CLOSE, FK_EMPTY, 0},
    {NBA_T_ROOT, FK_EMPTY, 0},
    {NBA_T_STDIO, FK_EMPTY, 0},
    {0, 0, 0},
};
static const struct field_rule pquery_fields[] = {
    {NBA_T_PID, FK_U32, FR_REQUIRED},
    {NBA_T_OFF, FK_U64, 0},
    {NBA_T_EOFF, FK_U64, 0},
    {NBA_T_WAIT, FK_EMPTY, 0},
    {0, 0, 0},
};
static const struct field_rule pstdin_fields[] = {
    {NBA_T_PID, FK_U32, FR_REQUIRED},
    {NBA_T_DATA, FK_BYTES, 0},
    {NBA_T_CLOSE, FK_EMPTY, 0},
    {0, 0, 0},
};
static const struct field_rule psignal_fields[] = {
    {NBA_T_PID, FK_U32, FR_REQUIRED},
    {NBA_T_SIG, FK_U32, FR_REQUIRED},
    {0, 0, 0},
};
static const struct field_rule pty_fields[] = {
    {NBA_T_PID, FK_U32, FR_REQUIRED},
    {NBA_T_DATA, FK_BYTES, 0},
    {NBA_T_WINSIZE, FK_U32, 0},
    {NBA_T_SIG, FK_U32, 0},
    {0, 0, 0},
};
static const struct field_rule path_fields[] = {
    {NBA_T_PATH, FK_PATH, FR_REQUIRED},
    {0, 0, 0},
};
static const struct field_rule fread_fields[] = {
    {NBA_T_PATH, FK_PATH, FR_REQUIRED},
    {NBA_T_DEPTH, FK_U32, 0},
    {0, 0, 0},
};
static const struct field_rule fwrite_fields[] = {
    {NBA_T_PATH, FK_PATH, FR_REQUIRED},
    {NBA_T_MAXOUT, FK_U32, 0},
    {NBA_T_META, FK_META, FR_REPEAT},
    {0, 0, 0},
};
static const struct field_rule fdelete_fields[] = {
    {NBA_T_PATH, FK_PATH, FR_REQUIRED},
    {NBA_T_RECURSIVE, FK_EMPTY, 0},
    {0, 0, 0},
};
static const struct field_rule fmove_fields[] = {
    {NBA_T_PATH, FK_PATH, FR_REQUIRED},
    {NBA_T_DEST, FK_PATH, FR_REQUIRED},
    {0, 0, 0},
};

static const struct field_rule fwatch_fields[] = {
    {NBA_T_PATH, FK_PATH, FR_REQUIRED},
    {NBA_T_RECURSIVE, FK_EMPTY, 0},
    {NBA_T_MAXOUT, FK_U32, 0},
    {0, 0, 0},
};

static const struct field_rule watcher_fields[] = {
    {NBA_T_PID, FK_U32, FR_REQUIRED},
    {0, 0, 0},
};

static const struct request_rule request_rules[] = {
    {NBA_PING, no_fields},         {NBA_EXEC, exec_fields},     {NBA_PLIST, no_fields},
    {NBA_PQUERY, pquery_fields},   {NBA_PSTDIN, pstdin_fields}, {NBA_PSIGNAL, psignal_fields},
    {NBA_FREAD, fread_fields},     {NBA_FSTAT, path_fields},    {NBA_FWRITE, fwrite_fields},
    {NBA_FDELETE, fdelete_fields}, {NBA_FMKDIR, path_fields},   {NBA_FMOVE, fmove_fields},
    {NBA_KERNEL, no_fields},       {NBA_PTY, pty_fields},       {NBA_FWATCH, fwatch_fields},
    {NBA_WCREATE, fwatch_fields},  {NBA_WPOLL, watcher_fields}, {NBA_WREMOVE, watcher_fields},
};

static const struct request_rule *rule_for(uint8_t type)
{
    for (size_t i = 0; i < sizeof(request_rules) / sizeof(request_rules[0]); i++) {
        if (request_rules[i].type == type)
            return &request_rules[i];
    }
    return NULL;
}

int init_request_known(uint8_t type)
{
    return rule_for(type) != NULL;
}

static const struct field_rule *field_rule_for(const struct request_rule *rr, uint8_t tag)
{
    for (const struct field_rule *f = rr->fields; f->tag != 0; f++) {
        if (f->tag == tag)
            return f;
    }
    return NULL;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    if (errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* The value's shape, whatever the request: sizes and contents. */
static int check_value(uint8_t type, const struct field_rule *f, const unsigned char *v,
                       uint32_t len, char *err, size_t errlen)
{
    const unsigned char *eq;

    switch (f->kind) {
    case FK_EMPTY:
        if (len != 0)
            return fail(err, errlen, EINVAL, "field '%c' of '%c' must be empty", f->tag, type);
        return 0;
    case FK_U32:
        if (len != 4)
            return fail(err, errlen, EINVAL, "field '%c' of '%c' must be 4 bytes, not %u", f->tag,
                        type, len);
        return 0;
    case FK_U64:
        if (len != 8)
            return fail(err, errlen, EINVAL, "field '%c' of '%c' must be 8 bytes, not %u", f->tag,
                        type, len);
        return 0;
    case FK_PATH:
        if (!nba_path_ok((const char *)v, len))
            return fail(err, errlen, EINVAL,
                        "field '%c': a path must be absolute, at most %d bytes, without NUL "
                        "or . or .. components",
                        f->tag, NBA_MAX_PATH);
        return 0;
    case FK_ARG:
        if (memchr(v, '\0', len) != NULL)
            return fail(err, errlen, EINVAL, "an argv entry contains a NUL byte");
        return 0;
    case FK_ENV:
        if (memchr(v, '\0', len) != NULL)
            return fail(err, errlen, EINVAL, "an environment entry contains a NUL byte");
        eq = memchr(v, '=', len);
        if (eq == NULL || eq == v)
            return fail(err, errlen, EINVAL, "an environment entry must be NAME=value");
        return 0;
    case FK_META:
        eq = memchr(v, '\0', len);
        if (eq == NULL || !nba_meta_key_ok((const char *)v, (size_t)(eq - v)) ||
            !nba_meta_value_ok((const char *)eq + 1, len - (uint32_t)(eq - v) - 1))
            return fail(err, errlen, EINVAL,
                        "metadata is key\\0value: a key of 1 to %d token characters naming no "
                        "xattr namespace, a value of at most %d printable ASCII bytes",
                        NBA_META_KEY_MAX, NBA_META_VALUE_MAX);
        return 0;
    default:
        return 0;
    }
}

/* First pass: tags, sizes, repetition, required fields; counts A and E. */
static int check_fields(const struct request_rule *rr, const unsigned char *body, uint32_t len,
                        uint32_t *nargv, uint32_t *nenv, char *err, size_t errlen)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t vlen;
    unsigned char seen[256] = {0};
    uint32_t nmeta = 0, meta_bytes = 0;
    int rc;

    *nargv = *nenv = 0;
    nba_fields_init(&it, body, len);
    while ((rc = nba_fields_next(&it, &tag, &v, &vlen)) == 1) {
        const struct field_rule *f = field_rule_for(rr, tag);
        int e;
        if (f == NULL)
            return fail(err, errlen, EINVAL, "request '%c' takes no field 0x%02x", rr->type, tag);
        if (seen[tag] && !(f->flags & FR_REPEAT))
            return fail(err, errlen, EINVAL, "field '%c' of '%c' given twice", tag, rr->type);
        seen[tag] = 1;
        e = check_value(rr->type, f, v, vlen, err, errlen);
        if (e != 0)
            return e;
        if (tag == NBA_T_ARG && rr->type == NBA_EXEC && ++*nargv > NBA_MAX_ARGS)
            return fail(err, errlen, EINVAL, "more than %d argv entries", NBA_MAX_ARGS);
        if (tag == NBA_T_ENV && rr->type == NBA_EXEC && ++*nenv > NBA_MAX_ENV)
            return fail(err, errlen, EINVAL, "more than %d environment entries", NBA_MAX_ENV);
        if (tag == NBA_T_META) {
            meta_bytes += vlen - 1; /* the key and the value, the NUL between them not */
            if (++nmeta > NBA_META_MAX || meta_bytes > NBA_META_BYTES)
                return fail(err, errlen, EINVAL,
                            "metadata is at most %d entries of %d bytes of keys and values",
                            NBA_META_MAX, NBA_META_BYTES);
        }
    }
    if (rc == -1)
        return fail(err, errlen, EPROTO, "a field of request '%c' runs past its body", rr->type);
    for (const struct field_rule *f = rr->fields; f->tag != 0; f++) {
        if ((f->flags & FR_REQUIRED) && !seen[f->tag])
            return fail(err, errlen, EINVAL, "request '%c' needs field '%c'", rr->type, f->tag);
    }
    return 0;
}

/* Second pass: the values, and the checks that depend on the request. */
static int fill_fields(struct init_request *r, const unsigned char *body, uint32_t len, char *err,
                       size_t errlen)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t vlen, na = 0, ne = 0;
    int maxout_given = 0;

    nba_fields_init(&it, body, len);
    while (nba_fields_next(&it, &tag, &v, &vlen) == 1) {
        struct init_slice s = {v, vlen};
        switch (tag) {
        case NBA_T_ARG:
            r->argv[na++] = s;
            break;
        case NBA_T_ENV:
            r->env[ne++] = s;
            break;
        case NBA_T_CWD:
            r->cwd = s;
            break;
        case NBA_T_PATH:
            r->path = s;
            break;
        case NBA_T_DEST:
            r->dest = s;
            break;
        case NBA_T_DATA:
            r->data = s;
            break;
        case NBA_T_META:
            r->meta[r->nmeta++] = s; /* at most NBA_META_MAX: counted by check_fields */
            break;
        case NBA_T_TIMEOUT:
            r->timeout_ms = nba_get_u32(v);
            break;
        case NBA_T_MAXOUT:
            if (r->type == NBA_FWRITE)
                r->mode = nba_get_u32(v);
            else
                r->maxout = nba_get_u32(v);
            maxout_given = 1;
            break;
        case NBA_T_PID:
            r->pid = nba_get_u32(v);
            break;
        case NBA_T_SIG:
            r->sig = nba_get_u32(v);
            break;
        case NBA_T_OFF:
            r->off_out = nba_get_u64(v);
            break;
        case NBA_T_EOFF:
            r->off_err = nba_get_u64(v);
            break;
        case NBA_T_BG:
            r->background = 1;
            break;
        case NBA_T_CLOSE:
            r->close_stdin = 1;
            break;
        case NBA_T_RECURSIVE:
            r->recursive = 1;
            break;
        case NBA_T_WAIT:
            r->wait = 1;
            break;
        case NBA_T_DEPTH:
            r->depth = nba_get_u32(v);
            break;
        case NBA_T_ROOT:
            r->root = 1;
            break;
        case NBA_T_STDIO:
            r->stdio = 1;
            break;
        case NBA_T_WINSIZE:
            r->pty = 1;
            r->cols = (uint16_t)(nba_get_u32(v) >> 16);
            r->rows = (uint16_t)(nba_get_u32(v) & 0xffffu);
            break;
        default:
            break;
        }
    }
    if (r->nargv > 0 && r->argv[0].len == 0)
        return fail(err, errlen, EINVAL, "argv[0] is empty");
    if (r->type == NBA_FREAD && r->depth == 0)
        r->depth = 1;
    if (r->depth > NBA_MAX_DEPTH)
        return fail(err, errlen, EINVAL, "a listing descends 1 to %d levels, not %u", NBA_MAX_DEPTH,
                    r->depth);
    if (r->type == NBA_FWATCH || r->type == NBA_WCREATE) {
        if (!maxout_given)
            r->maxout = NBA_WATCH_DIRS_DEFAULT;
        if (r->maxout < 1 || r->maxout > NBA_WATCH_DIRS_MAX)
            return fail(err, errlen, EINVAL, "a watch holds 1 to %d directories, not %u",
                        NBA_WATCH_DIRS_MAX, r->maxout);
    }
    if (r->mode > 07777)
        return fail(err, errlen, EINVAL, "mode %#o has bits beyond 07777", r->mode);
    if (r->pty &&
        (r->cols == 0 || r->rows == 0 || r->cols > NBA_WINSIZE_MAX || r->rows > NBA_WINSIZE_MAX))
        return fail(err, errlen, EINVAL, "a PTY's window is 1 to %d columns and rows, not %ux%u",
                    NBA_WINSIZE_MAX, r->cols, r->rows);
    if (r->type == NBA_EXEC && r->close_stdin && !r->background)
        return fail(err, errlen, EINVAL,
                    "'Z' closes a background command's stdin: a command of this connection's "
                    "gets 'e'");
    if (r->stdio && (r->background || r->pty))
        return fail(err, errlen, EINVAL,
                    "'I' passes the command's stdio for this connection: not with 'B' or 'Y'");
    /* a terminal's output is not capped unless asked */
    if (r->pty && r->type == NBA_EXEC && !maxout_given)
        r->maxout = UINT32_MAX;
    if ((r->type == NBA_PQUERY || r->type == NBA_PSTDIN || r->type == NBA_PSIGNAL ||
         r->type == NBA_PTY) &&
        (r->pid == 0 || r->pid > 0x7fffffffu))
        return fail(err, errlen, EINVAL, "pid %u is not a process id", r->pid);
    if ((r->type == NBA_WPOLL || r->type == NBA_WREMOVE) && r->pid == 0)
        return fail(err, errlen, EINVAL, "0 is no watcher id");
    if (r->sig > INIT_MAX_SIGNAL)
        return fail(err, errlen, EINVAL, "signal %u is not a signal number", r->sig);
    return 0;
}

int init_request_parse(struct init_request *r, uint8_t type, const unsigned char *body,
                       uint32_t len, char *err, size_t errlen)
{
    const struct request_rule *rr = rule_for(type);
    uint32_t nargv, nenv;
    int e;

    memset(r, 0, sizeof(*r));
    r->stdio_fds[0] = r->stdio_fds[1] = r->stdio_fds[2] = -1;
    if (errlen > 0)
        err[0] = '\0';
    if (rr == NULL)
        return fail(err, errlen, EINVAL, "unknown request type 0x%02x", type);
    e = check_fields(rr, body, len, &nargv, &nenv, err, errlen);
    if (e != 0)
        return e;
    r->type = type;
    r->maxout = INIT_DEFAULT_MAXOUT;
    r->mode = 0644;
    if (nargv > 0 && (r->argv = calloc(nargv, sizeof(*r->argv))) == NULL)
        return fail(err, errlen, ENOMEM, "out of memory");
    if (nenv > 0 && (r->env = calloc(nenv, sizeof(*r->env))) == NULL) {
        init_request_free(r);
        return fail(err, errlen, ENOMEM, "out of memory");
    }
    r->nargv = nargv;
    r->nenv = nenv;
    e = fill_fields(r, body, len, err, errlen);
    if (e != 0)
        init_request_free(r);
    return e;
}

void init_request_free(struct init_request *r)
{
    free(r->argv);
    r->argv = NULL;
    free(r->env);
    r->env = NULL;
    r->nargv = r->nenv = 0;
}
