/*
 * agent.h - the host's side of the nanobox-init protocol (agentproto.h,
 * docs/AGENT-PROTOCOL.md): reach the agent inside a sandbox through its
 * network namespace, send one request, read the frames that answer it.
 *
 * A connection is made in the sandbox's network namespace (setns there,
 * socket, setns back) to the abstract name, after checking that the pid
 * the table holds is still the container's PID 1 (its cgroup names the
 * container), and the peer is checked with SO_PEERCRED: no file in the
 * sandbox and no process in it can stand in for the agent.
 *
 * This is the agent client the engines (exec.c, files.c, procs.c) speak
 * through. Frame types and field tags (NBA_*) are agentproto.h's, which
 * only those engines and agent.c include: a handler never builds a frame.
 */
#ifndef NB_AGENT_H
#define NB_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "buf.h"

struct nb_agent {
    int fd;                /* non-blocking, connected; -1 when closed */
    unsigned char *in;     /* received bytes not yet consumed */
    size_t in_len, in_cap; /* in_cap = NBA_HDR + NBA_MAX_BODY */
    size_t consumed;       /* bytes of in taken by the last frame */
    struct nb_buf out;     /* frames queued to send */
    pid_t init_pid;        /* the sandbox's PID 1, to tell a broken agent from a stopped sandbox */
    char cid[NB_CID_LEN + 1];
};

/*
 * Connect to the agent of slot. 0 on success; -1 with ae set: 503
 * "agent_unavailable" when no agent answers (the caller may fall back to
 * docker exec), 409 "not_running" when the container is gone.
 */
int nb_agent_connect(const struct nb_slot *slot, struct nb_agent *ag, struct nb_apierr *ae);
void nb_agent_close(struct nb_agent *ag);
/*
 * Close after a request given up half way (an upload whose body ended
 * short): shut the sending side, so the agent drops what the request left
 * (an upload's temporary file) and closes, wait up to timeout_ms for that
 * close, then nb_agent_close. Once it returns the sandbox holds nothing of
 * the request, so the error the client gets next is the whole story.
 */
void nb_agent_abandon(struct nb_agent *ag, int timeout_ms);

/*
 * 1 if the sandbox's PID 1 is gone (or goes within wait_ms): a failure
 * then means "the sandbox stopped" (409), not a fault of ours (5xx).
 */
int nb_agent_sandbox_gone(const struct nb_slot *slot, int wait_ms);

/* Ping: 0 when the agent answers within timeout_ms (ae set otherwise). */
int nb_agent_ping(const struct nb_slot *slot, int timeout_ms, struct nb_apierr *ae);

/*
 * What the sandbox's agent does beyond version 1 (its pong, NBA_CAPS in
 * agentproto.h): NB_AGENT_CAP_* bits. A sandbox keeps the agent it started
 * with across an upgrade of the host, so an engine asks before it sends a
 * request that needs one, and takes the older way without it. Asked once
 * per sandbox in this process (cached by container id and PID 1: a new
 * container or a restarted one is asked again). An agent that cannot be
 * asked (it does not answer) is taken to have them all: the request that
 * follows fails the way it always did.
 */
#define NB_AGENT_CAP_QUERY_WAIT 1u   /* Q with W */
#define NB_AGENT_CAP_BG_PTY 2u       /* X with B and Y */
#define NB_AGENT_CAP_BG_CLOSE 4u     /* X with B and Z */
#define NB_AGENT_CAP_META 8u         /* U with x; f and n with x (user metadata) */
#define NB_AGENT_CAP_KERNEL_PIPE 16u /* K followed at once by the bridge's j request */
#define NB_AGENT_CAPS_ALL 31u
unsigned nb_agent_caps(const struct nb_slot *slot);

/* The capabilities a pong's body names (none for "nanobox-init 1" alone). */
unsigned nb_agent_caps_parse(const unsigned char *body, uint32_t len);

/* Request building: fields appended to b (a request body). */
void nb_agent_field(struct nb_buf *b, uint8_t tag, const void *val, size_t len);
void nb_agent_field_str(struct nb_buf *b, uint8_t tag, const char *s);
void nb_agent_field_u32(struct nb_buf *b, uint8_t tag, uint32_t v);
void nb_agent_field_u64(struct nb_buf *b, uint8_t tag, uint64_t v);

/* Queue one frame (the request, or a later stdin/data/end frame). */
void nb_agent_queue(struct nb_agent *ag, uint8_t type, const void *body, size_t len);

/* Write what is queued, waiting up to timeout_ms; 0 when all is sent. */
int nb_agent_flush(struct nb_agent *ag, int timeout_ms, struct nb_apierr *ae);

/*
 * Try to send queued bytes and to read one complete frame without
 * blocking. 1 with a frame (valid until the next call), 0 if none is ready,
 * -1 on a broken or closed connection (ae set).
 */
int nb_agent_poll_frame(struct nb_agent *ag, uint8_t *type, const unsigned char **body,
                        uint32_t *len, struct nb_apierr *ae);

/*
 * Wait up to timeout_ms for one frame (sending what is queued meanwhile).
 * 1 with a frame, 0 on timeout, -1 on error (ae set).
 */
int nb_agent_recv(struct nb_agent *ag, int timeout_ms, uint8_t *type, const unsigned char **body,
                  uint32_t *len, struct nb_apierr *ae);

/*
 * Has the peer of fd (the FastCGI connection: nginx, for a client that
 * left) closed it? 0 for fd -1. Never blocks, never consumes a byte.
 */
int nb_agent_peer_left(int fd);

/*
 * nb_agent_recv while watching watch_fd (-1: none) with nb_agent_peer_left:
 * 1 with a frame, 0 on timeout, 2 when watch_fd's peer left, -1 on error
 * (ae set).
 */
int nb_agent_recv_watch(struct nb_agent *ag, int timeout_ms, int watch_fd, uint8_t *type,
                        const unsigned char **body, uint32_t *len, struct nb_apierr *ae);

/* An error frame's errno and message as an API error (status by errno). */
void nb_agent_error(const unsigned char *body, uint32_t len, const char *what,
                    struct nb_apierr *ae);

/*
 * One whole exchange for the small requests: send req with fields, collect
 * every frame of the answer until '.', handing each to cb (may be NULL).
 * what names the action for error messages ("read the file").
 * 0 on success; -1 with ae set (an error frame, a broken connection).
 */
typedef int (*nb_agent_frame_fn)(void *ctx, uint8_t type, const unsigned char *body, uint32_t len);
int nb_agent_call(const struct nb_slot *slot, uint8_t req, const struct nb_buf *fields,
                  const char *what, int timeout_ms, nb_agent_frame_fn cb, void *ctx,
                  struct nb_apierr *ae);

#endif
