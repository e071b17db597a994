/*
 * keys.h - the API keys file (docs/CONFIG.md, "Keys file"): one line per
 * key, its name, role, the SHA-256 of the key (hex) and its quotas:
 *
 *   # name  role   sha256-of-the-key (64 hex)                         quotas
 *   alice   user   9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 max_sandboxes=5
 *
 * The key itself is never stored: a request's key is hashed and compared
 * with every line's hash in constant time. The parser takes the file's
 * text as untrusted (tests/fuzz/fuzz_keys.c); the reader also refuses a
 * file that others than its owner may read.
 */
#ifndef NB_KEYS_H
#define NB_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define NB_KEY_NAME_MAX 32       /* bytes of a key's name: [A-Za-z0-9_.-], first not '.' or '-' */
#define NB_KEY_HASH_LEN 32       /* SHA-256 */
#define NB_KEY_RATE_MAX 16       /* "10r/s" */
#define NB_KEYS_MAX 4096         /* lines with a key in one file */
#define NB_KEY_DEFAULT "default" /* the name of nanobox.conf's api_key */

/* One key. A quota of 0 is no limit. */
struct nb_key {
    char name[NB_KEY_NAME_MAX + 1];
    int admin; /* role admin: sees and touches every sandbox */
    unsigned char hash[NB_KEY_HASH_LEN];
    unsigned max_sandboxes;     /* live sandboxes */
    uint64_t max_memory;        /* bytes, summed over its live sandboxes */
    uint64_t max_nano_cpus;     /* CPUs (1e9 = one), summed over its live sandboxes */
    unsigned max_ports;         /* open ports over its sandboxes */
    unsigned max_templates;     /* templates it owns */
    unsigned max_volumes;       /* persistent volumes it owns; 0: the config's volume_max_count */
    uint64_t max_volume_bytes;  /* bytes summed over its volumes; 0: the config's volume_quota */
    char rate[NB_KEY_RATE_MAX]; /* the nginx rate class ("10r/s"); "" none */
};

struct nb_keys {
    struct nb_key *v;
    size_t n;
};

/* Is name a key name (1..32 of [A-Za-z0-9_.-], not starting with '.' or '-')? */
int nb_key_name_valid(const char *name);

/*
 * Parse a keys file's text (len bytes, need not be NUL-terminated) into out
 * (freed with nb_keys_free). -1 with "line N: message" in err on the first
 * bad line, out then empty. Names must be unique and not NB_KEY_DEFAULT.
 */
int nb_keys_parse(const char *text, size_t len, struct nb_keys *out, char *err, size_t errlen);

/*
 * Read path: it must be a regular file no one but its owner may read or
 * write (mode 0600 or stricter). A missing file is an empty set (0, errno
 * ENOENT). -1 with a message naming path otherwise.
 */
int nb_keys_load(const char *path, struct nb_keys *out, char *err, size_t errlen);

void nb_keys_free(struct nb_keys *k);

/* SHA-256 of the key text. 0, or -1 if libcrypto fails. */
int nb_key_hash(const char *key, unsigned char out[NB_KEY_HASH_LEN]);

/*
 * The key whose hash is SHA-256(given), or NULL. Every line is compared,
 * each in constant time, so the time taken says nothing of which matched.
 */
const struct nb_key *nb_keys_match(const struct nb_keys *k, const char *given);

/* The key named name, or NULL. */
const struct nb_key *nb_keys_find(const struct nb_keys *k, const char *name);

/* One file line for key (no newline): what nb_keys_parse reads back. */
void nb_key_format(const struct nb_key *key, char *buf, size_t len);

/* The quotas of key as "max_sandboxes=5 max_memory=1g ..." ("" when none). */
void nb_key_quotas(const struct nb_key *key, char *buf, size_t len);

/*
 * Write k to path atomically (a temporary file in the same directory, mode
 * 0600, fsync'd, then renamed over path). -1 with a message.
 */
int nb_keys_save(const char *path, const struct nb_keys *k, char *err, size_t errlen);

/*
 * Hold path's lock (the file path.lock, made 0600 if missing, flock'd) for
 * a read-modify-write of the keys file: `nanobox keys` and a cluster
 * node's key sync take it, so neither writes over the other's change. The
 * descriptor, to close to let go; -1 if the lock file cannot be made.
 */
int nb_keys_lock(const char *path);

#endif
