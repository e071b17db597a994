/*
 * fuzz_agent_request.c - libFuzzer harness over what nanobox-init does
 * with the bytes of a connection before any syscall: find the first frame
 * (nba_frame_peek), parse and check it as a request (init_request_parse),
 * and iterate the fields of what follows as the agent would.
 *
 * Input: the bytes a peer sends. When they hold no complete frame, the
 * first byte is taken as a request type and the rest as its body, so the
 * parser sees every input either way. On success the result must keep
 * every promise request.h makes; anything else aborts (a finding).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentproto.h"
#include "init.h"
#include "request.h"

static int in_body(const struct init_slice *s, const unsigned char *body, uint32_t len)
{
    if (s->len == 0)
        return 1;
    return s->p >= body && s->p + s->len <= body + len;
}

static void check(const struct init_request *r, uint8_t type, const unsigned char *body,
                  uint32_t len)
{
    if (r->type != type)
        abort();
    if (r->nargv > NBA_MAX_ARGS || r->nenv > NBA_MAX_ENV)
        abort();
    if (type == NBA_EXEC && r->nargv == 0)
        abort();
    for (uint32_t i = 0; i < r->nargv; i++) {
        if (!in_body(&r->argv[i], body, len) || memchr(r->argv[i].p, 0, r->argv[i].len) != NULL)
            abort();
        if (i == 0 && r->argv[i].len == 0)
            abort();
    }
    for (uint32_t i = 0; i < r->nenv; i++) {
        const struct init_slice *e = &r->env[i];
        const unsigned char *eq;
        if (!in_body(e, body, len) || e->len == 0 || memchr(e->p, 0, e->len) != NULL)
            abort();
        eq = memchr(e->p, '=', e->len);
        if (eq == NULL || eq == e->p)
            abort();
    }
    if (r->cwd.len > 0 && !nba_path_ok((const char *)r->cwd.p, r->cwd.len))
        abort();
    if ((type == NBA_FREAD || type == NBA_FSTAT || type == NBA_FWRITE || type == NBA_FDELETE ||
         type == NBA_FMKDIR || type == NBA_FMOVE || type == NBA_FWATCH || type == NBA_WCREATE) &&
        !nba_path_ok((const char *)r->path.p, r->path.len))
        abort();
    if (type == NBA_FMOVE && !nba_path_ok((const char *)r->dest.p, r->dest.len))
        abort();
    if (!in_body(&r->cwd, body, len) || !in_body(&r->path, body, len) ||
        !in_body(&r->dest, body, len) || !in_body(&r->data, body, len))
        abort();
    if (r->mode > 07777 || r->sig > INIT_MAX_SIGNAL)
        abort();
    if ((type == NBA_FWATCH || type == NBA_WCREATE) &&
        (r->maxout < 1 || r->maxout > NBA_WATCH_DIRS_MAX))
        abort();
    if ((type == NBA_WPOLL || type == NBA_WREMOVE) && r->pid == 0)
        abort();
    if ((type == NBA_PQUERY || type == NBA_PSTDIN || type == NBA_PSIGNAL) &&
        (r->pid == 0 || r->pid > 0x7fffffffu))
        abort();
}

static void parse_one(uint8_t type, const unsigned char *body, uint32_t len)
{
    struct init_request r;
    char err[512];
    int e;

    /* An exact-size copy: AddressSanitizer catches any read past the body. */
    unsigned char *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return;
    if (len > 0)
        memcpy(copy, body, len);
    e = init_request_parse(&r, type, copy, len, err, sizeof(err));
    if (e == 0) {
        check(&r, type, copy, len);
        init_request_free(&r);
    } else if (strlen(err) == 0 || strlen(err) >= sizeof(err)) {
        abort(); /* every refusal carries a message for the host */
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t type;
    const unsigned char *body;
    uint32_t len;
    long n = nba_frame_peek(data, size, NBA_MAX_BODY, &type, &body, &len);

    if (n > 0) {
        struct nba_fields it;
        uint8_t tag;
        const unsigned char *v;
        uint32_t vlen;
        if ((size_t)n != NBA_HDR + (size_t)len || n > (long)size)
            abort();
        parse_one(type, body, len);
        /* Later frames (stdin, upload data) are walked the same way. */
        nba_fields_init(&it, data + n, (uint32_t)(size - (size_t)n));
        while (nba_fields_next(&it, &tag, &v, &vlen) == 1) {
            if (v < data + n || v + vlen > data + size)
                abort();
        }
    } else if (size > 0 && size - 1 <= NBA_MAX_BODY) {
        parse_one(data[0], data + 1, (uint32_t)(size - 1));
    }
    return 0;
}
