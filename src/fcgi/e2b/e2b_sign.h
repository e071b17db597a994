/*
 * e2b_sign.h - E2B's signed file URLs (docs/E2B.md, "Signed file URLs"):
 * the signature the SDK's files.downloadUrl and uploadUrl put in
 * ?signature= and envd checks on GET and POST /files. Pure functions of
 * strings (SHA-256 from OpenSSL), unit-tested (tests/unit/test_e2b_sign.c)
 * against the SDK's own getSignature; e2b_common.c checks a request with
 * them.
 */
#ifndef NB_E2B_SIGN_H
#define NB_E2B_SIGN_H

#include <stddef.h>
#include <stdint.h>

/* "v1_" and the base64 of a SHA-256 without its padding: 3 + 43 characters. */
#define E2B_SIGNATURE_LEN 46

/* The operations a signature names: GET /files reads, POST /files writes. */
#define E2B_SIGN_READ "read"
#define E2B_SIGN_WRITE "write"

/*
 * The signature of a file URL, as the SDK's getSignature makes it and
 * envd's generateSignature checks it: "v1_" + base64 (standard alphabet,
 * no padding) of SHA-256("<path>:<operation>:<user>:<token>") with
 * ":<expiration>" (decimal unix seconds) after the token when has_exp.
 * path is path_len bytes (the ?path= as decoded; "" when there is none),
 * user the ?username= ("" when there is none). 0, or -1 (OpenSSL failed).
 */
int e2b_sign(const char *path, size_t path_len, const char *operation, const char *user,
             const char *token, int has_exp, int64_t exp, char out[E2B_SIGNATURE_LEN + 1]);

/*
 * ?signature_expiration= as envd reads it (Go's strconv.ParseInt, base
 * 10): an optional sign and digits, within int64. 0 with *out set,
 * or -1 for anything else.
 */
int e2b_sign_expiration(const char *s, int64_t *out);

/* Is given (any string, NULL: no) exactly want, compared in constant time? */
int e2b_sign_equal(const char *given, const char *want);

#endif
