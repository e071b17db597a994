/*
 * e2b_sign.c - see e2b_sign.h.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "base64.h"
#include "buf.h"
#include "e2b_sign.h"

int e2b_sign(const char *path, size_t path_len, const char *operation, const char *user,
             const char *token, int has_exp, int64_t exp, char out[E2B_SIGNATURE_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    char tail[32] = "";
    struct nb_buf b64;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok;

    if (has_exp)
        snprintf(tail, sizeof(tail), ":%lld", (long long)exp);
    ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
         EVP_DigestUpdate(ctx, path, path_len) == 1 && EVP_DigestUpdate(ctx, ":", 1) == 1 &&
         EVP_DigestUpdate(ctx, operation, strlen(operation)) == 1 &&
         EVP_DigestUpdate(ctx, ":", 1) == 1 && EVP_DigestUpdate(ctx, user, strlen(user)) == 1 &&
         EVP_DigestUpdate(ctx, ":", 1) == 1 && EVP_DigestUpdate(ctx, token, strlen(token)) == 1 &&
         EVP_DigestUpdate(ctx, tail, strlen(tail)) == 1 &&
         EVP_DigestFinal_ex(ctx, md, &md_len) == 1 && md_len == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return -1;
    /* 32 bytes are 44 characters of base64, the last one "=" */
    nb_buf_init(&b64, 64);
    ok = nb_base64_encode(&b64, md, md_len) == NB_OK && b64.len == 44;
    if (ok) {
        memcpy(out, "v1_", 3);
        memcpy(out + 3, b64.data, 43);
        out[E2B_SIGNATURE_LEN] = '\0';
    }
    nb_buf_free(&b64);
    return ok ? 0 : -1;
}

int e2b_sign_expiration(const char *s, int64_t *out)
{
    const char *d = s;
    char *end;
    long long v;

    if (s == NULL)
        return -1;
    if (*d == '+' || *d == '-')
        d++;
    if (*d < '0' || *d > '9' || strspn(d, "0123456789") != strlen(d))
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (int64_t)v;
    return 0;
}

int e2b_sign_equal(const char *given, const char *want)
{
    size_t n = strlen(want);
    return given != NULL && strlen(given) == n && CRYPTO_memcmp(given, want, n) == 0;
}
