/*
 * request.h - the request a host sends first on a connection, parsed and
 * checked. init_request_parse is a pure function (no syscalls, no global
 * state) so it can be fuzzed on its own (tests/fuzz/fuzz_agent_request.c):
 * everything that reaches the rest of nanobox-init has passed it.
 *
 * Byte strings are slices into the frame body, which must outlive the
 * request; nothing in them is NUL-terminated.
 */
#ifndef INIT_REQUEST_H
#define INIT_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "agentproto.h"

struct init_slice {
    const unsigned char *p;
    uint32_t len;
};

struct init_request {
    uint8_t type;            /* enum nba_req */
    struct init_slice *argv; /* A: nargv entries, no NUL, argv[0] not empty */
    uint32_t nargv;
    struct init_slice *env; /* E: "NAME=value", NAME not empty, no NUL */
    uint32_t nenv;
    struct init_slice cwd;                /* C: a path (nba_path_ok); len 0 when absent */
    struct init_slice path;               /* F */
    struct init_slice dest;               /* G */
    struct init_slice data;               /* D */
    struct init_slice meta[NBA_META_MAX]; /* x of a write: "key\0value", checked */
    uint32_t nmeta;
    uint32_t timeout_ms;       /* T: 0 = none */
    uint32_t maxout;           /* M of exec: INIT_DEFAULT_MAXOUT when absent; of a watch:
                                  its most directories, NBA_WATCH_DIRS_DEFAULT when absent */
    uint32_t mode;             /* M of a file write: 0644 when absent, <= 07777 */
    uint32_t pid;              /* P: > 0 */
    uint32_t sig;              /* N: 0..INIT_MAX_SIGNAL */
    uint64_t off_out, off_err; /* O, o of a query: 0 when absent */
    uint8_t background;        /* B */
    uint8_t close_stdin;       /* Z */
    uint8_t recursive;         /* r */
    uint8_t wait;              /* W of a query */
    uint32_t depth;            /* H of a read: 1..NBA_MAX_DEPTH, 1 when absent */
    uint8_t pty;               /* Y of exec: run on a PTY of cols x rows */
    uint16_t cols, rows;       /* Y: 1..NBA_WINSIZE_MAX each */
    uint8_t root;              /* R of exec: run as root (root mode only) */
    uint8_t stdio;             /* I of exec: stdio passed as fds (not with B or Y) */
    int stdio_fds[3];          /* I: the fds, set by the connection (conn.c), else -1;
                                  the connection keeps owning them */
};

/*
 * Parse the body of a request frame of the given type. Returns 0, or an
 * errno (EINVAL for anything invalid, EPROTO for a field that runs past
 * the body, ENOMEM) with a message for the host in err.
 * init_request_free is needed after a 0 return only.
 */
int init_request_parse(struct init_request *r, uint8_t type, const unsigned char *body,
                       uint32_t len, char *err, size_t errlen);
void init_request_free(struct init_request *r);

/* Is this the name of a request type? */
int init_request_known(uint8_t type);

#endif
