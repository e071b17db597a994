/*
 * e2b_rpc.h - a small Connect-RPC codec (the Connect protocol, JSON codec,
 * over HTTP/1.1), as E2B's SDKs speak it to envd (docs/E2B.md): no HTTP of
 * its own, only the bytes and names the HTTP layer and the handlers send.
 *
 * - Unary: the request and the answer are plain JSON (application/json);
 *   an error is a non-2xx status with {"code": "not_found", "message"}.
 * - Server-streaming (application/connect+json): the request and every
 *   answer message travel in an envelope, 1 flag byte + a 4-byte
 *   big-endian length + the JSON. The answer is always 200; its last
 *   envelope has flag 0x02 (end of stream) and carries {} or
 *   {"error": {"code", "message"}}.
 */
#ifndef NB_E2B_RPC_H
#define NB_E2B_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "nberr.h"

#define NB_RPC_FLAG_COMPRESSED 0x01u
#define NB_RPC_FLAG_END 0x02u
#define NB_RPC_ENVELOPE_HEAD 5

/* The content type of a server-streaming call (request and answer). */
#define NB_RPC_STREAM_CTYPE "application/connect+json"

/* Append one envelope (flags, then msg) to out: NB_OK or NB_ETOOBIG. */
int nb_rpc_envelope(struct nb_buf *out, unsigned flags, const void *msg, size_t len);

/*
 * The one envelope a streaming request is: exactly len bytes, flags 0. 0
 * with *msg and *msglen its JSON; -1 when it is short, long or not one
 * envelope; -2 when it is compressed (no compression is offered).
 */
int nb_rpc_unenvelope(const void *data, size_t len, const char **msg, size_t *msglen);

/*
 * The end-of-stream envelope: {} when code is NULL, else
 * {"error": {"code": code, "message": msg}}.
 */
int nb_rpc_end_stream(struct nb_buf *out, const char *code, const char *msg);

/* A unary call's error body, {"code", "message"}, appended to out. */
int nb_rpc_error_body(struct nb_buf *out, const char *code, const char *msg);

/*
 * The Connect code of an error: code itself when it is one of Connect's
 * names ("not_found", "deadline_exceeded", ...), else the one the domain
 * code (nberr.h) maps to: the E2B front's one mapping (invalid
 * invalid_argument, not found not_found, exists already_exists, a
 * conflict failed_precondition, a limit resource_exhausted, a part down
 * unavailable, a timeout deadline_exceeded...).
 */
const char *nb_rpc_code(enum nb_err err, const char *code);

/* The HTTP status a unary call's error with Connect code answers (Connect's table). */
int nb_rpc_http_status(const char *code);

/* Is code one of Connect's error code names? */
int nb_rpc_code_valid(const char *code);

/* Is path a Connect procedure, "/<package>.<Service>/<Method>"? */
int nb_rpc_is_procedure(const char *path);

/* Is ctype (a Content-Type header, NULL: none) a streaming call's? */
int nb_rpc_is_stream_ctype(const char *ctype);

/*
 * The Connect-Timeout-Ms header (1 to 10 ASCII digits): 0 with *ms, -1 when
 * it is malformed. Absent (NULL): 0 with *ms = 0 (no timeout).
 */
int nb_rpc_timeout_ms(const char *header, int64_t *ms);

#endif
