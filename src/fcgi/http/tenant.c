/*
 * tenant.c - see tenant.h. The file's keys live in this process only; each
 * worker reloads them on its own, between two of its requests, so a reload
 * never changes the keys under a request in flight.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "log.h"
#include "tenant.h"

static struct nb_keys tenant_keys;
static struct {
    int have; /* 1: the file was there when last looked at */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} tenant_seen;
static int tenant_looked; /* the file was looked at once */

static void tenant_load(struct nb_app *a)
{
    struct nb_keys fresh;
    char err[512];

    if (nb_keys_load(a->conf.keys_file, &fresh, err, sizeof(err)) != 0) {
        /* keep the keys of the last good read: a half-edited file locks no one out */
        nb_error("keys reload: %s (keeping the %zu keys read before)", err, tenant_keys.n);
        return;
    }
    nb_keys_free(&tenant_keys);
    tenant_keys = fresh;
    nb_info("audit: key=- action=keys-reload keys=%zu file=%s", tenant_keys.n, a->conf.keys_file);
}

/* Remember what the file looks like now (have: it exists). */
static void tenant_mark(const struct stat *st, int have)
{
    tenant_seen.have = have;
    if (have) {
        tenant_seen.dev = st->st_dev;
        tenant_seen.ino = st->st_ino;
        tenant_seen.size = st->st_size;
        tenant_seen.mtime = st->st_mtim;
    }
}

void nb_tenant_refresh(struct nb_app *a)
{
    struct stat st;
    int have;

    if (a->conf.keys_file[0] == '\0')
        return;
    have = stat(a->conf.keys_file, &st) == 0;
    if (tenant_looked && have == tenant_seen.have &&
        (!have ||
         (st.st_dev == tenant_seen.dev && st.st_ino == tenant_seen.ino &&
          st.st_size == tenant_seen.size && st.st_mtim.tv_sec == tenant_seen.mtime.tv_sec &&
          st.st_mtim.tv_nsec == tenant_seen.mtime.tv_nsec)))
        return;
    tenant_looked = 1;
    tenant_mark(&st, have);
    if (!have) {
        if (tenant_keys.n > 0)
            nb_info("audit: key=- action=keys-reload keys=0 file=%s (gone)", a->conf.keys_file);
        nb_keys_free(&tenant_keys);
        return;
    }
    tenant_load(a);
}

int nb_tenant_init(struct nb_app *a, char *err, size_t errlen)
{
    struct stat st;
    int have;
    if (a->conf.keys_file[0] == '\0')
        return 0;
    have = stat(a->conf.keys_file, &st) == 0;
    if (nb_keys_load(a->conf.keys_file, &tenant_keys, err, errlen) != 0)
        return -1;
    /* the workers inherit these keys and what the file looked like */
    tenant_looked = 1;
    tenant_mark(&st, have);
    if (tenant_keys.n > 0)
        nb_info("keys file %s: %zu keys", a->conf.keys_file, tenant_keys.n);
    return 0;
}

int nb_tenant_auth_on(const struct nb_app *a)
{
    return a->conf.api_key[0] != '\0' || tenant_keys.n > 0;
}

void nb_tenant_anyone(struct nb_key *who)
{
    memset(who, 0, sizeof(*who));
    snprintf(who->name, sizeof(who->name), "%s", NB_KEY_DEFAULT);
    who->admin = 1;
}

int nb_tenant_equal(const char *given, const char *want)
{
    size_t gl = strlen(given), wl = strlen(want);
    unsigned char diff = (unsigned char)(gl != wl);
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned char)(want[i] ^ (i < gl ? given[i] : 0));
    return diff == 0;
}

int nb_tenant_identify(const struct nb_app *a, const char *given, const char *prefix,
                       struct nb_key *who)
{
    const struct nb_key *k = NULL, *k2 = NULL;
    size_t pl = prefix != NULL ? strlen(prefix) : 0;
    int dflt = 0, pre = pl > 0 && strncmp(given, prefix, pl) == 0;

    if (a->conf.api_key[0] != '\0') {
        dflt = nb_tenant_equal(given, a->conf.api_key);
        if (pre)
            dflt |= nb_tenant_equal(given + pl, a->conf.api_key);
    }
    k = nb_keys_match(&tenant_keys, given);
    if (pre)
        k2 = nb_keys_match(&tenant_keys, given + pl);
    if (dflt) {
        nb_tenant_anyone(who);
        return 0;
    }
    if (k == NULL)
        k = k2;
    if (k == NULL)
        return -1;
    *who = *k;
    return 0;
}

int nb_tenant_lookup(const char *name, struct nb_key *out)
{
    const struct nb_key *k;
    if (!strcmp(name, NB_KEY_DEFAULT)) {
        nb_tenant_anyone(out);
        return 0;
    }
    k = nb_keys_find(&tenant_keys, name);
    if (k == NULL)
        return -1;
    *out = *k;
    return 0;
}
