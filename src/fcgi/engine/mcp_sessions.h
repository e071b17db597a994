/*
 * mcp_sessions.h - the sessions of the MCP Streamable HTTP transport
 * (POST /mcp), shared by every worker: any worker serves any request of a
 * session, so they live in a small file next to the state table,
 * "<state_file>.mcp", mmap'd by each worker on its first /mcp request.
 *
 * A session is only what the transport needs between requests: its id (the
 * Mcp-Session-Id header) and the protocol version initialize settled. The
 * file holds a fixed number of slots; a new session takes a free or expired
 * one, else the least recently used. Each operation holds flock(LOCK_EX) on
 * the worker's own descriptor of the file (flock is per open file, which is
 * why every worker opens it itself rather than inheriting one).
 */
#ifndef NB_MCP_SESSIONS_H
#define NB_MCP_SESSIONS_H

#include <stddef.h>

#include "app.h"

#define NB_MCP_SESSIONS 256             /* sessions kept; the least recently used goes */
#define NB_MCP_SESSION_IDLE (24 * 3600) /* seconds unused before a session is forgotten */
#define NB_MCP_SESSION_ID_LEN 36        /* a textual UUID */
#define NB_MCP_VERSION_LEN 16           /* "2025-06-18" and its NUL, with room */
#define NB_MCP_CANCELS 64               /* cancelled calls remembered, all sessions */
#define NB_MCP_REQUEST_ID_LEN 63        /* a request id (JSON text) a cancellation can name */

/*
 * Every session belongs to the key that opened it (owner, a key name): for
 * another key, find and end do not know it.
 */

/*
 * A new session of owner speaking version: its id in id, naming the node
 * of tag (a cluster node's tag, "" alone: nb_cluster_new_id) so that a
 * front sends the session's requests to the node that holds it. -1 with
 * ae set if the file fails.
 */
int nb_mcp_session_new(const struct nb_conf *c, const char *tag, const char *owner,
                       const char *version, char id[NB_MCP_SESSION_ID_LEN + 1],
                       struct nb_apierr *ae);

/*
 * Look session id up and mark it used: 1 with its version in version, 0 when
 * it is unknown or expired, -1 with ae set if the file fails.
 */
int nb_mcp_session_find(const struct nb_conf *c, const char *owner, const char *id, char *version,
                        size_t vlen, struct nb_apierr *ae);

/* End session id: 1 ended, 0 unknown, -1 with ae set if the file fails. */
int nb_mcp_session_end(const struct nb_conf *c, const char *owner, const char *id,
                       struct nb_apierr *ae);

/*
 * Calls cancelled (notifications/cancelled) in one worker, seen by the one
 * running them: add records request req (its id as JSON text) of session
 * sid as cancelled (1; 0 for ids no call can have; -1 with ae set if the
 * file fails); take says whether it was, and forgets it.
 */
int nb_mcp_cancel_add(const struct nb_conf *c, const char *sid, const char *req,
                      struct nb_apierr *ae);
int nb_mcp_cancel_take(const struct nb_conf *c, const char *sid, const char *req);

#endif
