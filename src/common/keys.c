/*
 * keys.c - see keys.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "conf.h"
#include "keys.h"

#define KEYS_FILE_MAX (4u << 20) /* bytes of a keys file */

static void kerr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void kerr(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int nb_key_name_valid(const char *name)
{
    size_t i;
    for (i = 0; name[i]; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || ((c == '.' || c == '-') && i > 0)))
            return 0;
    }
    return i >= 1 && i <= NB_KEY_NAME_MAX;
}

void nb_keys_free(struct nb_keys *k)
{
    free(k->v);
    k->v = NULL;
    k->n = 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A decimal count 0..1000000. */
static int parse_count(const char *s, unsigned *out)
{
    unsigned long v = 0;
    if (*s == '\0')
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > 1000000)
            return -1;
    }
    *out = (unsigned)v;
    return 0;
}

/* CPUs as "2" or "0.5" (at most 9 decimals) into nano-CPUs, at most 1024 CPUs. */
static int parse_cpus(const char *s, uint64_t *out)
{
    uint64_t whole = 0, frac = 0, scale = 1000000000ull;
    int digits = 0;
    if (*s == '\0' || *s == '.')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        whole = whole * 10 + (uint64_t)(*s - '0');
        if (whole > 1024)
            return -1;
    }
    if (*s == '.') {
        s++;
        if (*s == '\0')
            return -1;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (++digits > 9)
                return -1;
            scale /= 10;
            frac += (uint64_t)(*s - '0') * scale;
        }
    }
    if (*s != '\0')
        return -1;
    *out = whole * 1000000000ull + frac;
    return 0;
}

/* A rate as nginx's limit_req writes it: "N r/s" or "N r/m", no spaces ("10r/s"). */
static int rate_valid(const char *s)
{
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    if (n == 0 || n > 6 || s[0] == '0')
        return 0;
    return !strcmp(s + n, "r/s") || !strcmp(s + n, "r/m");
}

/* One "quota=value" word of a line into k. -1 with a message. */
static int parse_quota(struct nb_key *k, const char *word, char *msg, size_t msglen)
{
    const char *eq = strchr(word, '=');
    const char *v;
    size_t kl;
    if (eq == NULL) {
        kerr(msg, msglen, "\"%.40s\" is not quota=value", word);
        return -1;
    }
    kl = (size_t)(eq - word);
    v = eq + 1;
#define IS(name) (kl == sizeof(name) - 1 && !strncmp(word, name, kl))
    if (IS("max_sandboxes") && parse_count(v, &k->max_sandboxes) == 0)
        return 0;
    if (IS("max_ports") && parse_count(v, &k->max_ports) == 0)
        return 0;
    if (IS("max_templates") && parse_count(v, &k->max_templates) == 0)
        return 0;
    if (IS("max_volumes") && parse_count(v, &k->max_volumes) == 0)
        return 0;
    if (IS("max_volume_bytes") && nb_parse_size(v, &k->max_volume_bytes) == 0)
        return 0;
    if (IS("max_memory") && nb_parse_size(v, &k->max_memory) == 0)
        return 0;
    if (IS("max_cpus") && parse_cpus(v, &k->max_nano_cpus) == 0)
        return 0;
    if (IS("rate") && strlen(v) < sizeof(k->rate) && rate_valid(v)) {
        memcpy(k->rate, v, strlen(v) + 1);
        return 0;
    }
    if (IS("max_sandboxes") || IS("max_ports") || IS("max_templates") || IS("max_memory") ||
        IS("max_cpus") || IS("rate") || IS("max_volumes") || IS("max_volume_bytes"))
        kerr(msg, msglen, "bad value \"%.40s\" for %.*s", v, (int)kl, word);
    else
        kerr(msg, msglen,
             "unknown quota \"%.*s\" (max_sandboxes, max_memory, max_cpus, max_ports, "
             "max_templates, max_volumes, max_volume_bytes, rate)",
             (int)(kl > 40 ? 40 : kl), word);
#undef IS
    return -1;
}

/* One line's words (NUL-separated already) into k. */
static int parse_line(struct nb_key *k, char **w, size_t nw, char *msg, size_t msglen)
{
    memset(k, 0, sizeof(*k));
    if (nw < 3) {
        kerr(msg, msglen, "expected: NAME ROLE SHA256 [quota=value ...]");
        return -1;
    }
    if (!nb_key_name_valid(w[0])) {
        kerr(msg, msglen, "\"%.40s\" is not a key name (1 to %d of A-Z a-z 0-9 _ . -)", w[0],
             NB_KEY_NAME_MAX);
        return -1;
    }
    if (!strcmp(w[0], NB_KEY_DEFAULT)) {
        kerr(msg, msglen, "the name \"%s\" is nanobox.conf's api_key", NB_KEY_DEFAULT);
        return -1;
    }
    memcpy(k->name, w[0], strlen(w[0]) + 1);
    if (!strcmp(w[1], "admin"))
        k->admin = 1;
    else if (strcmp(w[1], "user") != 0) {
        kerr(msg, msglen, "role \"%.40s\" is neither admin nor user", w[1]);
        return -1;
    }
    if (strlen(w[2]) != 2 * NB_KEY_HASH_LEN) {
        kerr(msg, msglen, "the hash is not 64 hex digits (SHA-256 of the key)");
        return -1;
    }
    for (size_t i = 0; i < NB_KEY_HASH_LEN; i++) {
        int hi = hexval(w[2][2 * i]), lo = hexval(w[2][2 * i + 1]);
        if (hi < 0 || lo < 0) {
            kerr(msg, msglen, "the hash is not 64 hex digits (SHA-256 of the key)");
            return -1;
        }
        k->hash[i] = (unsigned char)(hi << 4 | lo);
    }
    for (size_t i = 3; i < nw; i++)
        if (parse_quota(k, w[i], msg, msglen) != 0)
            return -1;
    return 0;
}

int nb_keys_parse(const char *text, size_t len, struct nb_keys *out, char *err, size_t errlen)
{
    size_t pos = 0, lineno = 0, cap = 0;
    char line[1024], msg[200];

    out->v = NULL;
    out->n = 0;
    while (pos < len) {
        size_t end = pos, ll, nw = 0;
        char *w[16], *p;
        int too_many = 0;

        while (end < len && text[end] != '\n')
            end++;
        lineno++;
        ll = end - pos;
        if (ll >= sizeof(line)) {
            kerr(err, errlen, "line %zu: longer than %zu bytes", lineno, sizeof(line) - 1);
            goto fail;
        }
        memcpy(line, text + pos, ll);
        line[ll] = '\0';
        pos = end + 1;
        if (memchr(line, '\0', ll) != NULL) {
            kerr(err, errlen, "line %zu: a NUL byte", lineno);
            goto fail;
        }
        if ((p = strchr(line, '#')) != NULL)
            *p = '\0';
        for (p = line; *p;) {
            while (*p == ' ' || *p == '\t' || *p == '\r')
                *p++ = '\0';
            if (*p == '\0')
                break;
            if (nw == sizeof(w) / sizeof(w[0])) {
                too_many = 1;
                break;
            }
            w[nw++] = p;
            while (*p && *p != ' ' && *p != '\t' && *p != '\r')
                p++;
        }
        if (nw == 0)
            continue;
        if (too_many) {
            kerr(err, errlen, "line %zu: more than %zu words", lineno, sizeof(w) / sizeof(w[0]));
            goto fail;
        }
        if (out->n == NB_KEYS_MAX) {
            kerr(err, errlen, "line %zu: more than %d keys", lineno, NB_KEYS_MAX);
            goto fail;
        }
        if (out->n == cap) {
            struct nb_key *nv;
            cap = cap ? cap * 2 : 8;
            nv = realloc(out->v, cap * sizeof(*nv));
            if (nv == NULL) {
                kerr(err, errlen, "out of memory");
                goto fail;
            }
            out->v = nv;
        }
        if (parse_line(&out->v[out->n], w, nw, msg, sizeof(msg)) != 0) {
            kerr(err, errlen, "line %zu: %s", lineno, msg);
            goto fail;
        }
        if (nb_keys_find(out, out->v[out->n].name) != NULL) {
            kerr(err, errlen, "line %zu: a second key named \"%s\"", lineno, out->v[out->n].name);
            goto fail;
        }
        out->n++;
    }
    return 0;
fail:
    nb_keys_free(out);
    return -1;
}

int nb_keys_load(const char *path, struct nb_keys *out, char *err, size_t errlen)
{
    struct stat st;
    char *text;
    ssize_t got;
    size_t n = 0;
    int fd, rc;

    out->v = NULL;
    out->n = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) {
            errno = ENOENT;
            return 0;
        }
        kerr(err, errlen, "%s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        kerr(err, errlen, "%s: not a regular file", path);
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (st.st_mode & 077) {
        kerr(err, errlen, "%s: mode %03o lets others read or write it: chmod 600 it", path,
             (unsigned)(st.st_mode & 0777));
        close(fd);
        errno = EPERM;
        return -1;
    }
    if (st.st_size > (off_t)KEYS_FILE_MAX) {
        kerr(err, errlen, "%s: larger than %u bytes", path, KEYS_FILE_MAX);
        close(fd);
        errno = EFBIG;
        return -1;
    }
    text = malloc((size_t)st.st_size + 1);
    if (text == NULL) {
        close(fd);
        kerr(err, errlen, "out of memory");
        return -1;
    }
    while (n < (size_t)st.st_size &&
           ((got = read(fd, text + n, (size_t)st.st_size - n)) > 0 || (got < 0 && errno == EINTR)))
        if (got > 0)
            n += (size_t)got;
    close(fd);
    rc = nb_keys_parse(text, n, out, err, errlen);
    if (rc != 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s", err);
        kerr(err, errlen, "%s: %s", path, msg);
    }
    free(text);
    errno = 0;
    return rc;
}

int nb_key_hash(const char *key, unsigned char out[NB_KEY_HASH_LEN])
{
    unsigned len = 0;
    if (EVP_Digest(key, strlen(key), out, &len, EVP_sha256(), NULL) != 1 || len != NB_KEY_HASH_LEN)
        return -1;
    return 0;
}

const struct nb_key *nb_keys_match(const struct nb_keys *k, const char *given)
{
    unsigned char h[NB_KEY_HASH_LEN];
    const struct nb_key *found = NULL;
    if (k->n == 0 || nb_key_hash(given, h) != 0)
        return NULL;
    for (size_t i = 0; i < k->n; i++) {
        int eq = CRYPTO_memcmp(h, k->v[i].hash, NB_KEY_HASH_LEN) == 0;
        /* no early exit: every line costs the same */
        if (eq && found == NULL)
            found = &k->v[i];
    }
    return found;
}

const struct nb_key *nb_keys_find(const struct nb_keys *k, const char *name)
{
    for (size_t i = 0; i < k->n; i++)
        if (!strcmp(k->v[i].name, name))
            return &k->v[i];
    return NULL;
}

/* bytes as "512m", "2g" or digits: what nb_parse_size reads back */
static void fmt_size(uint64_t b, char *buf, size_t len)
{
    static const char suf[] = "kmg";
    int i = -1;
    while (i < 2 && b != 0 && b % 1024 == 0) {
        b /= 1024;
        i++;
    }
    if (i < 0)
        snprintf(buf, len, "%" PRIu64, b);
    else
        snprintf(buf, len, "%" PRIu64 "%c", b, suf[i]);
}

static void fmt_cpus(uint64_t nano, char *buf, size_t len)
{
    uint64_t frac = nano % 1000000000ull;
    int n;
    if (frac == 0) {
        snprintf(buf, len, "%" PRIu64, nano / (uint64_t)1000000000);
        return;
    }
    n = snprintf(buf, len, "%" PRIu64 ".%09" PRIu64, nano / (uint64_t)1000000000, frac);
    while (n > 0 && (size_t)n < len && buf[n - 1] == '0')
        buf[--n] = '\0';
}

void nb_key_quotas(const struct nb_key *key, char *buf, size_t len)
{
    char v[32];
    size_t off = 0;
    buf[0] = '\0';
#define ADD(...)                                                       \
    do {                                                               \
        int w_ = snprintf(buf + off, len - off, "%s", off ? " " : ""); \
        if (w_ > 0 && (size_t)w_ < len - off)                          \
            off += (size_t)w_;                                         \
        w_ = snprintf(buf + off, len - off, __VA_ARGS__);              \
        if (w_ > 0 && (size_t)w_ < len - off)                          \
            off += (size_t)w_;                                         \
    } while (0)
    if (key->max_sandboxes)
        ADD("max_sandboxes=%u", key->max_sandboxes);
    if (key->max_memory) {
        fmt_size(key->max_memory, v, sizeof(v));
        ADD("max_memory=%s", v);
    }
    if (key->max_nano_cpus) {
        fmt_cpus(key->max_nano_cpus, v, sizeof(v));
        ADD("max_cpus=%s", v);
    }
    if (key->max_ports)
        ADD("max_ports=%u", key->max_ports);
    if (key->max_templates)
        ADD("max_templates=%u", key->max_templates);
    if (key->max_volumes)
        ADD("max_volumes=%u", key->max_volumes);
    if (key->max_volume_bytes) {
        fmt_size(key->max_volume_bytes, v, sizeof(v));
        ADD("max_volume_bytes=%s", v);
    }
    if (key->rate[0])
        ADD("rate=%s", key->rate);
#undef ADD
}

void nb_key_format(const struct nb_key *key, char *buf, size_t len)
{
    char hex[2 * NB_KEY_HASH_LEN + 1], q[256];
    for (size_t i = 0; i < NB_KEY_HASH_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", key->hash[i]);
    nb_key_quotas(key, q, sizeof(q));
    snprintf(buf, len, "%s %s %s%s%s", key->name, key->admin ? "admin" : "user", hex,
             q[0] ? " " : "", q);
}

int nb_keys_save(const char *path, const struct nb_keys *k, char *err, size_t errlen)
{
    char tmp[PATH_MAX], line[512];
    FILE *f;
    int fd, bad = 0;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        kerr(err, errlen, "%s: path too long", path);
        return -1;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
        kerr(err, errlen, "%s: %s", tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    fprintf(f, "# nanobox API keys: NAME ROLE SHA256-OF-KEY [quota=value ...]\n"
               "# written by `nanobox keys`; see docs/CONFIG.md (Keys file)\n");
    for (size_t i = 0; i < k->n; i++) {
        nb_key_format(&k->v[i], line, sizeof(line));
        fprintf(f, "%s\n", line);
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        bad = errno ? errno : EIO;
    if (fclose(f) != 0 && !bad)
        bad = errno ? errno : EIO;
    if (!bad && rename(tmp, path) != 0)
        bad = errno;
    if (bad) {
        kerr(err, errlen, "%s: %s", path, strerror(bad));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int nb_keys_lock(const char *path)
{
    char lk[PATH_MAX];
    int fd;
    if (snprintf(lk, sizeof(lk), "%s.lock", path) >= (int)sizeof(lk))
        return -1;
    fd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    return fd;
}
