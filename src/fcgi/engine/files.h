/*
 * files.h - the files engine: read, write, list, delete, mkdir and move a
 * path inside a sandbox, through its agent (files.c). It knows no HTTP:
 * paths and results are plain C values, errors a struct nb_apierr, and a
 * file's bytes go in and out through callbacks, so an upload or a download
 * streams through without ever being held whole. The HTTP routes
 * (api_files.c) are one front; MCP or another wire protocol can be another.
 *
 * The host never opens a path inside a sandbox: nanobox-init does, in the
 * sandbox's own mount namespace with the sandbox user's rights. Paths are
 * checked here first (nb_files_path) and again by the agent.
 */
#ifndef NB_FILES_H
#define NB_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "agentproto.h"
#include "app.h"

/* Longest path inside a sandbox, NUL excluded (the agent protocol's cap). */
#define NB_FILES_PATH_MAX 4096
/* Most entries a directory listing hands over (the rest: truncated). */
#define NB_FILES_MAX_ENTRIES 10000

enum nb_file_kind {
    NB_FILE_OTHER,
    NB_FILE_REGULAR,
    NB_FILE_DIR,
    NB_FILE_SYMLINK,
};

/* Most levels a listing descends (nb_files_sink's depth). */
#define NB_FILES_MAX_DEPTH 32

/*
 * A file's user metadata (E2B's files.write metadata; the xattrs
 * "user.<key>" in the sandbox): n entries, packed "key\0value\0" in
 * data[0..len), held to the agent protocol's rules and caps (NBA_META_*).
 */
struct nb_file_meta {
    unsigned n;
    size_t len;
    char data[NBA_META_BYTES + 2 * NBA_META_MAX];
};
/* Add an entry: 0, or -1 (a bad key or value, a key given twice, or past the caps). */
int nb_file_meta_add(struct nb_file_meta *m, const char *key, size_t klen, const char *value,
                     size_t vlen);
/* The entry after *pos (start at 0): 1 with *key and *value set, 0 at the end. */
int nb_file_meta_next(const struct nb_file_meta *m, size_t *pos, const char **key,
                      const char **value);

/* A path's (or a directory entry's) stat as the agent reports it (lstat: links not followed). */
struct nb_file_info {
    char name[NB_FILES_PATH_MAX + 1]; /* the entry's name, below depth 1 its relative path
                                         ("sub/file"; listings only) */
    enum nb_file_kind kind;
    uint64_t size;
    uint64_t mtime;      /* unix seconds */
    uint32_t mtime_nsec; /* and the nanoseconds within (0 from an older agent) */
    uint32_t mode;       /* permission bits (07777) */
    uint32_t tmode; /* a symlink's: the st_mode of what it leads to (0: dangling, or not told) */
    char owner[64]; /* the owner's name in the sandbox, or its uid ("" from an older agent) */
    char group[64]; /* the group's name, or its gid */
    char target[NB_FILES_PATH_MAX + 1]; /* a symlink's target ("" otherwise) */
    char real[NB_FILES_PATH_MAX + 1];   /* a symlink's absolute path with every link followed
                                           ("": it does not resolve, or an older agent) */
    struct nb_file_meta meta; /* a file's or directory's user metadata (none: an older agent) */
};

/* "file", "dir", "symlink" or "other". */
const char *nb_file_kind_name(enum nb_file_kind kind);

/*
 * Resolve raw[0..len) (absolute, or relative to the workspace) into out,
 * trailing slashes dropped. -1 with ae set (400 bad_path) for an empty
 * path, a NUL byte, a "." or ".." component, or more than
 * NB_FILES_PATH_MAX bytes.
 */
int nb_files_path(const struct nb_conf *c, const char *raw, size_t len, char *out, size_t outlen,
                  struct nb_apierr *ae);
/* The same, a relative path resolved under home instead (the E2B facade's /home/user). */
int nb_files_path_in(const char *home, const char *raw, size_t len, char *out, size_t outlen,
                     struct nb_apierr *ae);

/*
 * Where a read goes. on_info is called once, first, with the path's own
 * info; then a file's contents come through on_data in pieces, or a
 * directory's entries through on_entry (at most NB_FILES_MAX_ENTRIES; the
 * rest are counted out and *truncated set). A callback that returns
 * non-zero stops the read (a reader that went away): nb_files_read then
 * returns 0 at once.
 */
struct nb_files_sink {
    int (*on_info)(void *arg, const struct nb_file_info *fi);
    int (*on_data)(void *arg, const void *data, size_t len);
    int (*on_entry)(void *arg, const struct nb_file_info *entry);
    void *arg;
    int truncated;  /* set by nb_files_read: entries were left out */
    unsigned depth; /* levels of a directory listed (0 or 1: its entries; 2: theirs too...;
                       at most NB_FILES_MAX_DEPTH), symlinks never followed */
};

/* Read path (a file's bytes, or a directory's listing). 0, or -1 with ae set. */
int nb_files_read(struct nb_app *a, const struct nb_slot *slot, const char *path,
                  struct nb_files_sink *sink, struct nb_apierr *ae);

/*
 * Where a write's bytes come from: up to n bytes into buf; the bytes read,
 * 0 at the end, -1 on an error. Called until size bytes have come.
 */
typedef int (*nb_files_source_fn)(void *arg, void *buf, size_t n);

/* A write's size when only its source knows it: the bytes until src returns 0. */
#define NB_FILES_SIZE_UNKNOWN UINT64_MAX

/*
 * Write size bytes (or NB_FILES_SIZE_UNKNOWN) from src to path with permission bits mode (the agent
 * writes a temporary file and renames it: a write that does not finish
 * leaves nothing). On success *out holds the new file's info when the
 * agent sent it (*have_info). A source that ends early is 400 short_body.
 */
int nb_files_write(struct nb_app *a, const struct nb_slot *slot, const char *path, uint32_t mode,
                   uint64_t size, nb_files_source_fn src, void *src_arg, struct nb_file_info *out,
                   int *have_info, struct nb_apierr *ae);
/*
 * The same, the new file given the user metadata meta (NULL or empty:
 * none). A sandbox whose agent predates metadata (NB_AGENT_CAP_META) is
 * 400 metadata_unsupported, before anything is written; so is a
 * filesystem that keeps no user xattrs.
 */
int nb_files_write_meta(struct nb_app *a, const struct nb_slot *slot, const char *path,
                        uint32_t mode, const struct nb_file_meta *meta, uint64_t size,
                        nb_files_source_fn src, void *src_arg, struct nb_file_info *out,
                        int *have_info, struct nb_apierr *ae);

/* path's own info (a symlink is not followed: kind NB_FILE_SYMLINK and its target). */
int nb_files_stat(struct nb_app *a, const struct nb_slot *slot, const char *path,
                  struct nb_file_info *out, struct nb_apierr *ae);

/* Delete path (a directory only when empty, unless recursive). */
int nb_files_delete(struct nb_app *a, const struct nb_slot *slot, const char *path, int recursive,
                    struct nb_apierr *ae);

/* Create the directory path (and its missing parents). */
int nb_files_mkdir(struct nb_app *a, const struct nb_slot *slot, const char *path,
                   struct nb_apierr *ae);

/* Move (rename) from to to. */
int nb_files_move(struct nb_app *a, const struct nb_slot *slot, const char *from, const char *to,
                  struct nb_apierr *ae);

/* A watched directory's change (nb_files_watch), as E2B's envd and Go's fsnotify name them. */
enum nb_watch_event {
    NB_WATCH_CREATE,   /* created, or moved in */
    NB_WATCH_WRITE,    /* written to */
    NB_WATCH_REMOVE,   /* deleted */
    NB_WATCH_RENAME,   /* moved away (its new name, if watched, comes as a create) */
    NB_WATCH_CHMOD,    /* its mode, owner or times changed */
    NB_WATCH_OVERFLOW, /* events were lost (the sandbox's kernel queue overflowed) */
};

/* "create", "write", "remove", "rename", "chmod", "overflow". */
const char *nb_watch_event_name(enum nb_watch_event ev);

/*
 * Where a watch's events go. on_start once the agent watches (dirs: how
 * many directories); on_event per change, name relative to the watched
 * directory ("sub/file" below it when recursive; "" for overflow);
 * on_idle after idle_ms without an event (keepalives, deadlines). A
 * callback that returns non-zero ends the watch, as does client_fd's peer
 * leaving (-1: none). gone is set when the watched directory itself went.
 */
struct nb_files_watch_sink {
    int (*on_start)(void *arg, unsigned dirs);
    int (*on_event)(void *arg, enum nb_watch_event ev, const char *name);
    int (*on_idle)(void *arg);
    void *arg;
    int client_fd;
    int idle_ms;
    int gone;
};

/*
 * Watch the directory path (and every directory below it when recursive,
 * at most max_dirs; files_watch_max_dirs) until the sink ends it: the
 * agent's watch ends with this call's connection, so nothing outlives it.
 * 0 when it ended; -1 with ae set (before on_start: 404 no such
 * directory, 409 not a directory, 429 too many directories or watches).
 */
int nb_files_watch(struct nb_app *a, const struct nb_slot *slot, const char *path, int recursive,
                   unsigned max_dirs, struct nb_files_watch_sink *sink, struct nb_apierr *ae);

/*
 * Polling watchers (E2B's CreateWatcher, GetWatcherEvents, RemoveWatcher):
 * a watch the sandbox's agent keeps between requests, by id, with the
 * events since the last poll (at most 1024: then an overflow). They count
 * against the sandbox's 32 watches and go with the sandbox.
 * nb_files_watcher_events calls on_event per event (0 to go on). Unknown
 * ids: 404 no_process (Connect's not_found).
 */
int nb_files_watcher_create(struct nb_app *a, const struct nb_slot *slot, const char *path,
                            int recursive, unsigned max_dirs, uint32_t *id, struct nb_apierr *ae);
int nb_files_watcher_events(struct nb_app *a, const struct nb_slot *slot, uint32_t id,
                            int (*on_event)(void *arg, enum nb_watch_event ev, const char *name),
                            void *arg, struct nb_apierr *ae);
int nb_files_watcher_remove(struct nb_app *a, const struct nb_slot *slot, uint32_t id,
                            struct nb_apierr *ae);

#endif
