/*
 * fwd.h - what the parts of nanobox-fwd share: how an epoll event names its
 * source, and the one way to ask the event loop to stop.
 *
 * nanobox-fwd is one process per open port: it listens on a host TCP port
 * and a unix socket (for nginx) and relays every connection, with splice(2),
 * to 127.0.0.1:<port> inside a sandbox's network namespace. It stays single-
 * threaded on purpose: setns(2) acts on the calling thread only.
 */
#ifndef FWD_H
#define FWD_H

#include <stdint.h>

/* An epoll event's u64: bits 0-3 the kind, 4-31 a connection slot, 32-63
 * that slot's generation (so an event for a connection closed earlier in
 * the same batch is recognised and dropped). */
enum fwd_tag_kind {
    FWD_TAG_TCP_LISTEN = 1,
    FWD_TAG_UNIX_LISTEN,
    FWD_TAG_SIGNAL,
    FWD_TAG_EXPIRY,
    FWD_TAG_TARGET, /* the pidfd of the sandbox's process */
    FWD_TAG_CLIENT, /* the accepted side of a connection */
    FWD_TAG_SERVER, /* the upstream side, inside the sandbox */
};

#define FWD_TAG(kind, slot, gen) \
    ((uint64_t)(kind) | ((uint64_t)(slot) << 4) | ((uint64_t)(gen) << 32))
#define FWD_TAG_KIND(tag) ((unsigned)((tag)&0xf))
#define FWD_TAG_SLOT(tag) ((uint32_t)(((tag) >> 4) & 0x0fffffff))
#define FWD_TAG_GEN(tag) ((uint32_t)((tag) >> 32))

/* Ask the event loop to stop after the current batch; the first reason
 * given is the one logged, and status (0, or 1 for a failure) becomes the
 * exit code. reason must be a string literal or static. main.c's fwd_stop
 * is one; it hands it to the parts below it (relay_init), which call it
 * and do not link to main.c. */
typedef void fwd_stop_fn(const char *reason, int status);

#endif
