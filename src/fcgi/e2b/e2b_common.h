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
/* What a signed file URL signs besides the token: the ?path= bytes as decoded, and the operation. */
struct e2b_file_access {
    const char *operation; /* E2B_SIGN_READ (GET /files) or E2B_SIGN_WRITE (POST) */
    const char *path;      /* "" when the URL has no ?path= */
    size_t path_len;
};
/*
 * envd's check of GET and POST /files for sandbox id (its validateSigning):
 * a token header is checked as e2b_data_authorized does; without one the
 * URL's ?signature= (files.downloadUrl/uploadUrl) must be the signature of
 * fa, ?username= and ?signature_expiration= under id's envdAccessToken, and
 * that expiration not past. 0 (*by_signature 1 when the signature let it
 * in), or -1 with ae set: 401 for a wrong or expired signature, 400 for an
 * expiration that is no number.
 */
int e2b_files_authorized(struct nb_app *a, struct nb_req *r, const char *id,
                         const struct e2b_file_access *fa, int *by_signature, struct nb_apierr *ae);
/*
 * The sandbox a /files request that names none (E2B_SANDBOX_URL's signed
 * URLs: no header, no host) is for: the live sandbox whose envdAccessToken
 * made its ?signature=, into id. 0, or -1 with ae set (401: no signature,
 * or no sandbox's). Each live sandbox's signature is computed (an HMAC and
 * a SHA-256 each); e2b_files_authorized then checks the one found.
 */
int e2b_files_find(struct nb_app *a, struct nb_req *r, const struct e2b_file_access *fa, char *id,
                   size_t idlen, struct nb_apierr *ae);
/* The sandbox user's home as E2B's SDKs see it: e2b_home, else the workspace. */
const char *e2b_home(const struct nb_conf *c);
/* A path of an E2B call (relative: under e2b_home) checked as nb_files_path does. */
int e2b_path(const struct nb_conf *c, const char *raw, size_t len, char *out, size_t outlen,
             struct nb_apierr *ae);
/* t (unix seconds) as RFC 3339 in UTC under key, as E2B writes its times. */
void e2b_json_time(yajl_gen g, const char *key, int64_t t);
/* "metadata": {key: value...} of a file's user metadata, when it has any (envd >= 0.6.2). */
struct nb_file_meta;
void e2b_json_metadata(yajl_gen g, const struct nb_file_meta *m);
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

/*
 * The image of owner's own built template tpl (a create's templateID, E2B's
 * template API's, api_e2b_tpl.c): 0, or -1 when owner has none of that name
 * (the operator's images are image_of's, api_e2b.c).
 */
int e2b_tpl_image(struct nb_app *a, const char *owner, const char *tpl, char *image, size_t n);

#endif
