/*
 * tenant.h - who a request is: its API key checked against nanobox.conf's
 * api_key (the admin key "default") and the keys file (keys.h), which each
 * process re-reads when the file's (inode, size, mtime) changed, checked
 * with one stat per request: `nanobox keys add/rm` take effect on the next
 * request, no signal and no restart (docs/SECURITY.md, "Keys and owners").
 */
#ifndef NB_TENANT_H
#define NB_TENANT_H

#include "app.h"
#include "keys.h"

/*
 * Read the keys file at start (the master, before the workers fork): -1
 * with a message if it is there and bad (mode, syntax), 0 otherwise.
 */
int nb_tenant_init(struct nb_app *a, char *err, size_t errlen);

/* Re-read the keys file if it changed since this process read it. */
void nb_tenant_refresh(struct nb_app *a);

/* Does the service check keys at all (api_key set, or a key in the file)? */
int nb_tenant_auth_on(const struct nb_app *a);

/*
 * The key given (what the request sent): 0 with *who filled if it is
 * api_key (the admin "default"), a key of the file, or with a prefix (a
 * front's key style, NULL: none), either of those behind one prefix; -1
 * if none. Constant time in the key.
 */
int nb_tenant_identify(const struct nb_app *a, const char *given, const char *prefix,
                       struct nb_key *who);

/* Is given want? In a time that says nothing of where they differ (the metrics token). */
int nb_tenant_equal(const char *given, const char *want);

/* The identity of a request when the service checks no key: admin "default". */
void nb_tenant_anyone(struct nb_key *who);

/* A copy of the key named name as the file has it now; -1 if none. */
int nb_tenant_lookup(const char *name, struct nb_key *out);

#endif
