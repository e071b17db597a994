/*
 * e2b_common.c - what the E2B front's handlers (api_e2b*.c) share, under
 * them (docs/ARCHITECTURE.md, "Layers"): the sandbox user's home and paths
 * as E2B sees them, its times, the envdAccessToken and the data plane's one
 * access check (with /files' signed URLs, over e2b_sign.c), and the
 * Connect-RPC calls' request, sandbox and stream messages (over the codec,
 * e2b_rpc.c). No handler here, and no call to one.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "clock.h"
#include "e2b_common.h"
#include "e2b_rpc.h"
#include "e2b_sign.h"
#include "files.h"
#include "json.h"
#include "sandbox.h"
#include "templates.h"
#include "tenant.h"

const char *e2b_home(const struct nb_conf *c)
{
    return c->e2b_home[0] != '\0' ? c->e2b_home : c->workspace;
}

int e2b_path(const struct nb_conf *c, const char *raw, size_t len, char *out, size_t outlen,
             struct nb_apierr *ae)
{
    return nb_files_path_in(e2b_home(c), raw, len, out, outlen, ae);
}

/* RFC 3339 in UTC, as E2B's startedAt and endAt. */
void e2b_json_time(yajl_gen g, const char *key, int64_t t)
{
    char buf[32];
    struct tm tm;
    time_t tt = (time_t)t;
    gmtime_r(&tt, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    nb_json_kv_str(g, key, buf);
}

/* What the access token's HMAC signs before the sandbox id: a token for nothing else. */
#define E2B_TOKEN_CONTEXT "nanobox e2b envdAccessToken v1:"

/*
 * The sandbox's envdAccessToken: HMAC-SHA256 of the context and the
 * sandbox id, in hex, under its owner's secret: the SHA-256 of the owner's
 * key for a key of the keys file (the file is the owner's and the
 * operator's only), the API key for the "default" key's sandboxes. Only who
 * holds that can make it, it opens one sandbox's data plane only, and it
 * stops working when the owner's key is removed. -1 (no token) when there
 * is no secret.
 */
int e2b_access_token(const struct nb_conf *c, const char *owner, const char *id,
                     char out[E2B_TOKEN_LEN + 1])
{
    unsigned char msg[sizeof(E2B_TOKEN_CONTEXT) + NB_ID_LEN], mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    size_t ctx = strlen(E2B_TOKEN_CONTEXT), idlen = strnlen(id, NB_ID_LEN);
    const void *secret = c->api_key;
    int secret_len = (int)strlen(c->api_key);
    struct nb_key k;

    if (strcmp(owner, NB_KEY_DEFAULT) != 0 && nb_tenant_lookup(owner, &k) == 0) {
        secret = k.hash;
        secret_len = (int)sizeof(k.hash);
    }
    if (secret_len == 0)
        return -1;
    memcpy(msg, E2B_TOKEN_CONTEXT, ctx);
    memcpy(msg + ctx, id, idlen);
    if (HMAC(EVP_sha256(), secret, secret_len, msg, ctx + idlen, mac, &maclen) == NULL ||
        maclen * 2 != E2B_TOKEN_LEN)
        return -1;
    for (unsigned i = 0; i < maclen; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
    return 0;
}

int e2b_data_authorized(struct nb_app *a, struct nb_req *r, const char *id, struct nb_apierr *ae)
{
    char want[E2B_TOKEN_LEN + 1], owner[NB_OWNER_LEN + 8] = "";
    /* envd calls send it as X-Access-Token; the code interpreter's SDK sends
     * it so on /execute only, and as E2B-Traffic-Access-Token (create's
     * trafficAccessToken, the same token) on every call */
    const char *given = nb_http_param(r, "HTTP_X_ACCESS_TOKEN");
    struct nb_slot *s;

    if (given == NULL)
        given = nb_http_param(r, "HTTP_E2B_TRAFFIC_ACCESS_TOKEN");

    nb_tenant_refresh(a); /* a data-plane request carries no key: the keys may be old */
    if (!nb_tenant_auth_on(a))
        return 0; /* no key, no tokens: the data plane is as open as the API */
    /* an unknown id gets the same 401 as a wrong token: nothing leaks */
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL)
        snprintf(owner, sizeof(owner), "%s", s->owner);
    nb_table_unlock(&a->table);
    if (e2b_access_token(&a->conf, owner, id, want) == 0 && given != NULL &&
        strlen(given) == E2B_TOKEN_LEN && CRYPTO_memcmp(given, want, E2B_TOKEN_LEN) == 0)
        return 0;
    nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthenticated",
                  "missing or wrong X-Access-Token: send the envdAccessToken that creating or "
                  "connecting to sandbox %.64s returned",
                  id);
    return -1;
}

/* ---------------------------------------------------------------- signed file URLs */

/* The request's access token header (envd's X-Access-Token, or the code interpreter's), or NULL. */
static const char *token_header(const struct nb_req *r)
{
    const char *t = nb_http_param(r, "HTTP_X_ACCESS_TOKEN");
    if (t == NULL || t[0] == '\0')
        t = nb_http_param(r, "HTTP_E2B_TRAFFIC_ACCESS_TOKEN");
    return t != NULL && t[0] != '\0' ? t : NULL;
}

/*
 * What a signed URL says besides its path: ?signature= into sig (-1 when
 * absent), ?username= ("" when absent), ?signature_expiration= (*has_exp
 * 0 when absent; -1 with ae set, 400, when it is not a number).
 */
static int url_signature(struct nb_req *r, char *sig, size_t siglen, char *user, size_t userlen,
                         int *has_exp, int64_t *exp, struct nb_apierr *ae)
{
    char v[64];
    if (nb_http_query(r, "signature", sig, siglen) != 0)
        return -1;
    if (nb_http_query(r, "username", user, userlen) != 0)
        user[0] = '\0';
    *has_exp = nb_http_query(r, "signature_expiration", v, sizeof(v)) == 0;
    if (*has_exp && e2b_sign_expiration(v, exp) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "signature_expiration \"%.32s\" is not unix seconds", v);
        return -2;
    }
    return 0;
}

/* Is sig the signature of fa's request with sandbox id's token (its owner's)? */
static int signed_by(const struct nb_conf *c, const char *owner, const char *id,
                     const struct e2b_file_access *fa, const char *user, int has_exp, int64_t exp,
                     const char *sig)
{
    char token[E2B_TOKEN_LEN + 1], want[E2B_SIGNATURE_LEN + 1];
    return e2b_access_token(c, owner, id, token) == 0 &&
           e2b_sign(fa->path, fa->path_len, fa->operation, user, token, has_exp, exp, want) == 0 &&
           e2b_sign_equal(sig, want);
}

/* A user name longer than this is no sandbox user's: no signature matches it. */
#define E2B_SIGN_USER_MAX 128
/* A request's path in a message: at most 200 of its bytes. */
#define PATH_SHOWN(fa) (int)((fa)->path_len < 200 ? (fa)->path_len : 200), (fa)->path

int e2b_files_authorized(struct nb_app *a, struct nb_req *r, const char *id,
                         const struct e2b_file_access *fa, int *by_signature, struct nb_apierr *ae)
{
    char sig[E2B_SIGNATURE_LEN + 8], user[E2B_SIGN_USER_MAX + 2], owner[NB_OWNER_LEN + 8] = "";
    int has_exp = 0, rc;
    int64_t exp = 0;
    struct nb_slot *s;

    *by_signature = 0;
    /* as envd: a token in the header decides, right or wrong; else the signature */
    if (token_header(r) != NULL)
        return e2b_data_authorized(a, r, id, ae);
    rc = url_signature(r, sig, sizeof(sig), user, sizeof(user), &has_exp, &exp, ae);
    if (rc == -2)
        return -1;
    if (rc != 0)
        return e2b_data_authorized(a, r, id, ae); /* its 401, or open without a key */
    nb_tenant_refresh(a);
    if (!nb_tenant_auth_on(a))
        return 0; /* no key, no tokens: nothing to sign with, nothing to check */
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL)
        snprintf(owner, sizeof(owner), "%s", s->owner);
    nb_table_unlock(&a->table);
    if (strlen(user) > E2B_SIGN_USER_MAX ||
        !signed_by(&a->conf, owner, id, fa, user, has_exp, exp, sig)) {
        nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthenticated",
                      "invalid signature: it is not sandbox %.64s's signature of this %s of path "
                      "\"%.*s\" as user \"%.32s\"%s (the SDK's files.%s of that sandbox makes one)",
                      id, fa->operation, PATH_SHOWN(fa), user,
                      has_exp ? " with this signature_expiration" : "",
                      strcmp(fa->operation, E2B_SIGN_READ) == 0 ? "downloadUrl" : "uploadUrl");
        return -1;
    }
    if (has_exp && exp < nb_clock_real_s()) {
        nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthenticated",
                      "the signature expired at %lld (unix seconds); it is %lld now",
                      (long long)exp, (long long)nb_clock_real_s());
        return -1;
    }
    *by_signature = 1;
    return 0;
}

/* A live sandbox's id and owner, copied out of the table. */
struct sign_candidate {
    char id[NB_ID_LEN + 1];
    char owner[NB_OWNER_LEN + 8];
};

int e2b_files_find(struct nb_app *a, struct nb_req *r, const struct e2b_file_access *fa, char *id,
                   size_t idlen, struct nb_apierr *ae)
{
    char sig[E2B_SIGNATURE_LEN + 8], user[E2B_SIGN_USER_MAX + 2];
    struct sign_candidate *c = NULL;
    uint32_t n = 0;
    int has_exp = 0, rc, found = 0;
    int64_t exp = 0, now = nb_clock_real_s();

    rc = url_signature(r, sig, sizeof(sig), user, sizeof(user), &has_exp, &exp, ae);
    if (rc == -2)
        return -1;
    nb_tenant_refresh(a);
    if (rc != 0 || !nb_tenant_auth_on(a)) {
        nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthenticated",
                      "this request names no sandbox: send E2b-Sandbox-Id (and X-Access-Token) "
                      "as the SDK does, use the host <port>-<sandboxId>.<domain>, or a signed URL "
                      "of files.downloadUrl/uploadUrl (its signature names the sandbox)%s",
                      rc == 0 ? "; with no api_key there are no tokens, so no signed URLs" : "");
        return -1;
    }
    /* the URL of E2B_SANDBOX_URL's mode names no sandbox: the one whose token signed it does */
    if (strlen(sig) == E2B_SIGNATURE_LEN && strncmp(sig, "v1_", 3) == 0 &&
        strlen(user) <= E2B_SIGN_USER_MAX) {
        nb_table_lock(&a->table);
        c = nb_xmalloc((size_t)a->table.nslots * sizeof(*c) + 1);
        for (uint32_t i = 0; i < a->table.nslots; i++) {
            const struct nb_slot *s = &a->table.slots[i];
            if (!nb_slot_live(s, now))
                continue;
            snprintf(c[n].id, sizeof(c[n].id), "%s", s->id);
            snprintf(c[n].owner, sizeof(c[n].owner), "%s", s->owner);
            n++;
        }
        nb_table_unlock(&a->table);
        for (uint32_t i = 0; i < n && !found; i++)
            if (signed_by(&a->conf, c[i].owner, c[i].id, fa, user, has_exp, exp, sig)) {
                snprintf(id, idlen, "%s", c[i].id);
                found = 1;
            }
        free(c);
    }
    if (!found) {
        nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthenticated",
                      "invalid signature: no sandbox's signature of this %s of path \"%.*s\" "
                      "as user \"%.32s\"%s (files.%s makes one with the sandbox's envdAccessToken)",
                      fa->operation, PATH_SHOWN(fa), user,
                      has_exp ? " with this signature_expiration" : "",
                      strcmp(fa->operation, E2B_SIGN_READ) == 0 ? "downloadUrl" : "uploadUrl");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- Connect-RPC */

/* The running sandbox a data-plane call names, once its access token is checked. */
int e2b_rpc_sandbox(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_slot *slot, struct nb_apierr *ae)
{
    if (e2b_data_authorized(a, r, ra->id, ae) != 0)
        return -1;
    if (!nb_sandbox_id_valid(ra->id) || nb_sandbox_get(a, ra->id, slot, ae) != 0 ||
        slot->state != NB_SLOT_RUNNING) {
        /* what E2B's proxy says for a sandbox that is gone: the SDK then asks /health */
        nb_apierr_set(ae, NB_E_UPSTREAM, "unavailable", "sandbox \"%.64s\" is not running", ra->id);
        return -1;
    }
    return 0;
}

/*
 * The request message: a streaming call's one envelope or a unary call's
 * body, as a JSON object (NULL for an empty unary body). -1 with ae set.
 */
int e2b_rpc_request(struct nb_app *a, struct nb_req *r, int stream, yajl_val *out,
                    struct nb_apierr *ae)
{
    const char *msg = NULL;
    size_t len = 0;
    char err[256];
    int rc;

    *out = NULL;
    if (nb_http_read_body(r, a->conf.max_body, ae) != 0)
        return -1;
    if (stream != nb_rpc_is_stream_ctype(nb_http_param(r, "CONTENT_TYPE"))) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "%s is a %s procedure: send Content-Type: %s", r->path,
                      stream ? "server-streaming" : "unary",
                      stream ? NB_RPC_STREAM_CTYPE : "application/json");
        return -1;
    }
    if (!stream) {
        msg = r->body.data;
        len = r->body.len;
    } else if ((rc = nb_rpc_unenvelope(r->body.data, r->body.len, &msg, &len)) != 0) {
        if (rc == -2)
            nb_apierr_set(ae, NB_E_INVALID, "unimplemented",
                          "compressed messages are not supported");
        else
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                          "the request is not one Connect envelope (flags 0, 4-byte length, JSON)");
        return -1;
    }
    if (len > 0 && nb_json_parse(msg, len, a->conf.max_json_depth, out, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "%s", err);
        return -1;
    }
    if (*out != NULL && (!YAJL_IS_OBJECT(*out) || nb_json_has_nul(msg, len))) {
        yajl_tree_free(*out);
        *out = NULL;
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "the message must be a JSON object without NUL bytes in its strings");
        return -1;
    }
    return 0;
}

/* obj's member key (protobuf-JSON: the lowerCamelCase name or the proto's), not null. */
yajl_val e2b_rpc_member(yajl_val obj, const char *key, const char *alt)
{
    const char *p1[] = {key, NULL}, *p2[] = {alt, NULL};
    yajl_val v = obj != NULL ? yajl_tree_get(obj, p1, yajl_t_any) : NULL;
    if (v == NULL && alt != NULL && obj != NULL)
        v = yajl_tree_get(obj, p2, yajl_t_any);
    return v == NULL || YAJL_IS_NULL(v) ? NULL : v;
}

int e2b_rpc_stream_send(struct nb_req *r, yajl_gen g)
{
    const unsigned char *buf;
    size_t len;
    struct nb_buf b;
    int rc;
    yajl_gen_get_buf(g, &buf, &len);
    nb_buf_init(&b, len + NB_RPC_ENVELOPE_HEAD);
    nb_rpc_envelope(&b, 0, buf, len);
    rc = nb_http_stream_bytes(r, b.data, b.len);
    nb_buf_free(&b);
    yajl_gen_free(g);
    return rc;
}

void e2b_json_metadata(yajl_gen g, const struct nb_file_meta *m)
{
    size_t pos = 0;
    const char *k, *v;
    if (m->n == 0)
        return;
    nb_json_cstr(g, "metadata");
    yajl_gen_map_open(g);
    while (nb_file_meta_next(m, &pos, &k, &v))
        nb_json_kv_str(g, k, v);
    yajl_gen_map_close(g);
}

int e2b_tpl_image(struct nb_app *a, const char *owner, const char *tpl, char *image, size_t n)
{
    struct nb_apierr ae;
    struct nb_template t;
    if (!nb_template_name_ok(tpl) || nb_template_get(a, tpl, owner, &t, &ae) != 0 ||
        !strcmp(t.kind, "image"))
        return -1;
    return nb_template_image(a, tpl, owner, image, n, &ae);
}
