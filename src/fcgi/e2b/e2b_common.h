/*
 * e2b_common.h - what the E2B front's handlers share (e2b_common.c): the
 * helpers under them, which call engines, the HTTP layer and the
 * Connect-RPC codec but no handler (docs/ARCHITECTURE.md, "Layers").
 */
#ifndef NB_E2B_COMMON_H
#define NB_E2B_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "app.h"
#include "http.h"
#include "route.h"

/* An envdAccessToken: hex of HMAC-SHA256. */
#define E2B_TOKEN_LEN 64

/*
 * Sandbox id's envdAccessToken (create and connect answer it) under its
 * owner's secret, in out: 0, or -1 (no token) when there is no secret.
 */
int e2b_access_token(const struct nb_conf *c, const char *owner, const char *id,
                     char out[E2B_TOKEN_LEN + 1]);
/*
 * The E2B data plane's one access check: the request's
 * X-Access-Token is the envdAccessToken create and connect gave for
 * sandbox id (an HMAC of the id under the API key). 0, or -1 with ae set
 * (401 "unauthenticated"). Every data-plane handler but /health calls it.
 */
int e2b_data_authorized(struct nb_app *a, struct nb_req *r, const char *id, struct nb_apierr *ae);
/* The sandbox user's home as E2B's SDKs see it: e2b_home, else the workspace. */
const char *e2b_home(const struct nb_conf *c);
/* A path of an E2B call (relative: under e2b_home) checked as nb_files_path does. */
int e2b_path(const struct nb_conf *c, const char *raw, size_t len, char *out, size_t outlen,
             struct nb_apierr *ae);
/* t (unix seconds) as RFC 3339 in UTC under key, as E2B writes its times. */
void e2b_json_time(yajl_gen g, const char *key, int64_t t);
/*
 * The Connect-RPC helpers every envd service uses:
 * the running sandbox a call names, once its access token is checked
 * (502 unavailable otherwise); the request message, a streaming call's
 * one envelope or a unary call's body, as a JSON object (NULL for an
 * empty unary body); a message's member by its protobuf-JSON name or
 * alt (the proto's), NULL when absent or null.
 */
int e2b_rpc_sandbox(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_slot *slot, struct nb_apierr *ae);
int e2b_rpc_request(struct nb_app *a, struct nb_req *r, int stream, yajl_val *out,
                    struct nb_apierr *ae);
yajl_val e2b_rpc_member(yajl_val obj, const char *key, const char *alt);
/* A server stream's next message, as built in g (freed), in its envelope: 0, or -1 when the client left. */
int e2b_rpc_stream_send(struct nb_req *r, yajl_gen g);

#endif
