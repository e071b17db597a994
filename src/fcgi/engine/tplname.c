/*
 * tplname.c - the templates engine's names (templates.h, tplpriv.h): a
 * name's rules, the hidden image ref of an owner's name (an HMAC under the
 * instance's secret), the paths under <sandbox_dir>/templates, the names'
 * lock, and which images have a root. No Docker call here.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "isolation.h"
#include "keys.h"
#include "log.h"
#include "tplpriv.h"

/* ---- names and paths ---- */

int nb_template_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > NB_TPL_NAME_MAX ||
        !((s[0] >= 'a' && s[0] <= 'z') || isdigit((unsigned char)s[0])))
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

int nb_template_path_ok(const char *p)
{
    size_t n = strlen(p);
    const char *seg = p;
    if (n == 0 || n > 255 || p[0] == '/' || !strcmp(p, "Dockerfile") || p[n - 1] == '/')
        return -1;
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '\\')
            return -1;
    while (seg) {
        const char *slash = strchr(seg, '/');
        size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
        if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && !strncmp(seg, "..", 2)))
            return -1;
        seg = slash ? slash + 1 : NULL;
    }
    return 0;
}

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* nanobox-tpl-<instance as a Docker repository component> */
void nb_tpl_repo(const struct nb_conf *c, char *out, size_t outlen)
{
    char r[48];
    size_t k = 0;
    int changed = 0;
    for (const char *p = c->instance; *p; p++) {
        char ch = *p;
        if (k == 40) {
            changed = 1;
            break;
        }
        if (ch >= 'A' && ch <= 'Z') {
            ch = (char)(ch - 'A' + 'a');
            changed = 1;
        }
        if (!((ch >= 'a' && ch <= 'z') || isdigit((unsigned char)ch))) {
            if (ch != '-')
                changed = 1;
            ch = '-';
        }
        if (ch == '-' && k == 0) {
            changed = 1;
            continue;
        }
        r[k++] = ch;
    }
    while (k > 0 && r[k - 1] == '-') {
        k--;
        changed = 1;
    }
    r[k] = '\0';
    if (changed || k == 0)
        snprintf(out, outlen, "nanobox-tpl-%s%s%08x", r, k ? "-" : "", fnv1a(c->instance));
    else
        snprintf(out, outlen, "nanobox-tpl-%s", r);
}

/*
 * The instance's secret for the image names (<templates>/.secret, 32
 * random bytes made on first use): read once per process.
 */
static int tpl_secret(const struct nb_conf *c, unsigned char key[32])
{
    static unsigned char cached[32];
    static int have;
    char p[PATH_MAX], tmp[PATH_MAX + 32];
    int fd;
    if (have) {
        memcpy(key, cached, 32);
        return 0;
    }
    nb_tpl_path(c, "", p, sizeof(p));
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
        return -1;
    nb_tpl_path(c, ".secret", p, sizeof(p));
    fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        unsigned char fresh[32];
        int w;
        snprintf(tmp, sizeof(tmp), "%s.%ld", p, (long)getpid());
        if (getrandom(fresh, sizeof(fresh), 0) != (ssize_t)sizeof(fresh))
            return -1;
        w = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (w < 0)
            return -1;
        if (write(w, fresh, sizeof(fresh)) != (ssize_t)sizeof(fresh) || fsync(w) != 0) {
            close(w);
            unlink(tmp);
            return -1;
        }
        close(w);
        /* link: the first process's secret wins, never replaced */
        if (link(tmp, p) != 0 && errno != EEXIST) {
            unlink(tmp);
            return -1;
        }
        unlink(tmp);
        fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    if (fd < 0)
        return -1;
    if (read(fd, cached, sizeof(cached)) != (ssize_t)sizeof(cached)) {
        close(fd);
        return -1;
    }
    close(fd);
    have = 1;
    memcpy(key, cached, 32);
    return 0;
}

const char *nb_template_owner(const char *owner)
{
    return owner != NULL && owner[0] ? owner : NB_KEY_DEFAULT;
}

void nb_template_key(const struct nb_conf *c, const char *owner, const char *name,
                     char out[NB_TPL_KEY_LEN + 1])
{
    unsigned char secret[32], md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    struct nb_buf msg;
    nb_buf_init(&msg, 1024);
    nb_buf_printf(&msg, "%s\n%s\n%s", c->instance, nb_template_owner(owner), name);
    if (tpl_secret(c, secret) != 0) {
        /* no secret (the directory is not writable): nothing can be built or found */
        nb_warn("templates: cannot read or make the templates' secret: %s", strerror(errno));
        memset(secret, 0, sizeof(secret));
        getrandom(secret, sizeof(secret), 0);
    }
    HMAC(EVP_sha256(), secret, sizeof(secret), (const unsigned char *)msg.data, msg.len, md,
         &mdlen);
    nb_buf_free(&msg);
    for (unsigned i = 0; i < NB_TPL_KEY_LEN / 2; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    out[NB_TPL_KEY_LEN] = '\0';
}

void nb_template_ref(const struct nb_conf *c, const char *owner, const char *name, char *out,
                     size_t outlen)
{
    char repo[64], key[NB_TPL_KEY_LEN + 1];
    nb_tpl_repo(c, repo, sizeof(repo));
    nb_template_key(c, owner, name, key);
    snprintf(out, outlen, "%s:%s", repo, key);
}

void nb_tpl_key_ref(const struct nb_conf *c, const char *key, char *out, size_t outlen)
{
    char repo[64];
    nb_tpl_repo(c, repo, sizeof(repo));
    snprintf(out, outlen, "%s:%s", repo, key);
}

void nb_template_conf_name(const char *image, char *out, size_t outlen)
{
    size_t n = strlen(image), k = 0;
    if (n > 7 && !strcmp(image + n - 7, ":latest"))
        n -= 7;
    for (size_t i = 0; i < n && k + 1 < outlen && k < NB_TPL_NAME_MAX; i++) {
        char ch = (char)tolower((unsigned char)image[i]);
        out[k++] = strchr("abcdefghijklmnopqrstuvwxyz0123456789._-", ch) && ch ? ch : '-';
    }
    out[k] = '\0';
}

void nb_tpl_path(const struct nb_conf *c, const char *sub, char *out, size_t outlen)
{
    char dir[PATH_MAX - 512];
    nb_isolation_path(c, "templates", 0, dir, sizeof(dir));
    snprintf(out, outlen, "%s%s%s", dir, sub[0] ? "/" : "", sub);
}

void nb_tpl_key_log_path(const struct nb_conf *c, const char *key, char *out, size_t outlen)
{
    char sub[128];
    snprintf(sub, sizeof(sub), "%.100s.log", key);
    nb_tpl_path(c, sub, out, outlen);
}

void nb_template_log_path(const struct nb_conf *c, const char *owner, const char *name, char *out,
                          size_t outlen)
{
    char key[NB_TPL_KEY_LEN + 1];
    nb_template_key(c, owner, name, key);
    nb_tpl_key_log_path(c, key, out, outlen);
}

/* queue/<name>.<ext> or run/<name>.<ext> */
void nb_tpl_job_path(const struct nb_conf *c, const char *where, const char *name, const char *ext,
                     char *out, size_t outlen)
{
    char sub[160];
    snprintf(sub, sizeof(sub), "%.8s/%.80s.%.8s", where, name, ext);
    nb_tpl_path(c, sub, out, outlen);
}

int nb_tpl_ensure_dirs(const struct nb_conf *c)
{
    char p[PATH_MAX];
    const char *subs[] = {"", "queue", "run"};
    for (size_t i = 0; i < 3; i++) {
        nb_tpl_path(c, subs[i], p, sizeof(p));
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

int nb_tpl_lock(const struct nb_conf *c)
{
    char p[PATH_MAX];
    int fd;
    nb_tpl_path(c, ".lock", p, sizeof(p));
    fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

void nb_tpl_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* drops the flock */
}
int nb_tpl_conf_template(const struct nb_conf *c, const char *name)
{
    char n[NB_TPL_NAME_MAX + 1];
    for (unsigned i = 0; i < c->n_images; i++) {
        nb_template_conf_name(c->images[i], n, sizeof(n));
        if (!strcmp(n, name))
            return (int)i;
    }
    return -1;
}

/* ---- for snapshots (snapshot.c) and the root of a sandbox ---- */

void nb_template_work_path(const struct nb_conf *c, const char *file, char *out, size_t outlen)
{
    nb_tpl_path(c, file, out, outlen);
}

void nb_template_of_image(const struct nb_conf *c, const char *image, char *out, size_t outlen)
{
    char repo[90];
    size_t rl;
    nb_tpl_repo(c, repo, sizeof(repo));
    rl = strlen(repo);
    if (!strncmp(image, repo, rl) && image[rl] == ':')
        snprintf(out, outlen, "%s", image + rl + 1);
    else if (nb_conf_image_allowed(c, image))
        nb_template_conf_name(image, out, outlen);
    else
        snprintf(out, outlen, "%s", image);
}

int nb_template_root(const struct nb_conf *c, const char *image)
{
    char name[300], tmp[NB_CONF_LIST], *save = NULL, *tok;
    nb_template_of_image(c, image, name, sizeof(name));
    snprintf(tmp, sizeof(tmp), "%s", c->root_templates);
    for (tok = strtok_r(tmp, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
        char ref[128];
        const char *slash = strchr(tok, '/');
        if (!strcmp(tok, "*") || !strcmp(tok, name))
            return 1; /* all, or one of the operator's images by its template name */
        /* a built template or snapshot: OWNER/NAME, or NAME of the admin key's (names are
         * each key's own, so a bare name never gives another key's "NAME" a root) */
        if (slash != NULL) {
            char owner[NB_TPL_NAME_MAX + 1];
            snprintf(owner, sizeof(owner), "%.*s", (int)(slash - tok), tok);
            nb_template_ref(c, owner, slash + 1, ref, sizeof(ref));
        } else {
            nb_template_ref(c, NULL, tok, ref, sizeof(ref));
        }
        if (!strcmp(ref, image))
            return 1;
    }
    return 0;
}
