/*
 * agentproto.h - the wire format between the host (nanobox-fcgi) and
 * nanobox-init, the agent that runs as PID 1 in every sandbox. Shared by
 * both sides; plain C with no dependency beyond libc, because nanobox-init
 * is linked statically. docs/AGENT-PROTOCOL.md is the prose version.
 *
 * A frame is   type:u8  len:u32be  body[len]      (len <= NBA_MAX_BODY)
 * A request body (the first frame on a connection) is a list of fields,
 * each  tag:u8  len:u32be  value[len]. Integers are big-endian.
 * One request per connection.
 */
#ifndef NB_AGENTPROTO_H
#define NB_AGENTPROTO_H

#include <stddef.h>
#include <stdint.h>

#define NBA_SOCKET_NAME "nanobox-init" /* abstract: sun_path = "\0nanobox-init" */
#define NBA_VERSION 1
#define NBA_HDR 5                                      /* frame header bytes */
#define NBA_MAX_BODY (1024u * 1024u)                   /* largest frame body either side accepts */
#define NBA_CHUNK (64u * 1024u)                        /* data frames are sent at most this big */
#define NBA_MAX_ARGS 4096                              /* argv entries */
#define NBA_MAX_ENV 1024                               /* env entries */
#define NBA_MAX_PATH 4096                              /* bytes of a path, NUL excluded */
#define NBA_KERNEL_BRIDGE "/.nanobox/kernel/bridge.py" /* the code bridge, mounted read-only */
#define NBA_KERNEL_HELLO "nanobox-kernel 1"            /* the bridge's first frame (p) */

/*
 * What an agent does beyond the requests of its version, named in its pong
 * after the version, each after a space: "nanobox-init 1 query-wait ...".
 * A sandbox keeps the agent it started with across an upgrade of the host,
 * so the host asks (agent.c) instead of assuming; an agent that names
 * none (one from before the names) does none of them.
 */
#define NBA_CAP_QUERY_WAIT "query-wait" /* Q with W: the answer waits for output or the end */
#define NBA_CAP_BG_PTY "bg-pty"         /* X with B and Y: a PTY kept in the background */
#define NBA_CAP_BG_CLOSE "bg-close"     /* X with B and Z: stdin closed at the start */
#define NBA_CAP_META "meta"             /* U with x; f and n carry x (user metadata, xattrs) */
/* K may be followed at once by the bridge's j request: what the agent read
 * of it goes to the bridge with the connection (no wait for the hello) */
#define NBA_CAP_KERNEL_PIPE "kernel-pipe"
#define NBA_CAPS                                                                \
    NBA_CAP_QUERY_WAIT " " NBA_CAP_BG_PTY " " NBA_CAP_BG_CLOSE " " NBA_CAP_META \
                       " " NBA_CAP_KERNEL_PIPE
/* Most bytes after K that an agent passes on with the connection (one
 * SOCK_SEQPACKET message: 'K' and these); more is EPROTO. */
#define NBA_KERNEL_PASS_MAX (64u * 1024u)

/* Requests: the first frame a host sends on a connection. */
enum nba_req {
    NBA_PING = 'P',    /* -> NBA_PONG */
    NBA_EXEC = 'X',    /* fields A E C T M B Y R I -> s (o|r)* x ; B: s then close */
    NBA_PLIST = 'L',   /* -> l* . */
    NBA_PQUERY = 'Q',  /* fields P O o -> l (o|r)* . */
    NBA_PSTDIN = 'W',  /* fields P D Z -> . */
    NBA_PSIGNAL = 'S', /* fields P N -> . */
    NBA_FREAD = 'R',   /* fields F H -> f (d* | n*) . */
    NBA_FSTAT = 'T',   /* fields F -> f . */
    NBA_FWRITE = 'U',  /* fields F M x* -> (host sends d* .) -> f . */
    NBA_FDELETE = 'D', /* fields F r -> . */
    NBA_FMKDIR = 'N',  /* fields F -> . */
    NBA_FMOVE = 'V',   /* fields F G -> . */
    NBA_KERNEL = 'K',  /* no fields: the connection goes to the code bridge -> p, (host j) j* . */
    NBA_PTY = 'Y',     /* fields P D Y -> . : a PTY session's input, then its new window */
    NBA_FWATCH = 'I',  /* fields F r M -> s v* (until the host leaves) */
    NBA_WCREATE = 'J', /* fields F r M -> s (with the watcher's id) . : a polling watcher */
    NBA_WPOLL = 'G',   /* fields P (watcher id) -> v* . : its events since the last poll */
    NBA_WREMOVE = 'O', /* fields P (watcher id) -> . */
};

/* Frames after the request, in either direction. */
enum nba_frame {
    NBA_PONG = 'p',    /* body: "nanobox-init <version>", then " <capability>"* (NBA_CAPS) */
    NBA_STARTED = 's', /* u32 pid (as the sandbox sees it) */
    NBA_STDOUT = 'o',  /* data */
    NBA_STDERR = 'r',  /* data */
    NBA_EXIT = 'x',    /* i32 exit code (-1 if killed), u8 signal, u8 flags NBA_EXIT_* */
    NBA_STDIN = 'i',   /* host -> init: data for the command's stdin */
    NBA_EOF = 'e',     /* host -> init: close the command's stdin */
    NBA_KILL = 'k',    /* host -> init: u8 signal for the command's process group */
    NBA_WINSIZE = 'w', /* host -> init: u16 cols, u16 rows: a PTY session's new window size */
    NBA_INFO = 'f',    /* fields: K kind, Z size, M mode, Y mtime, y its ns, u owner, g group,
                          L target, m the target's mode, a its real path, x* metadata */
    NBA_DATA = 'd',    /* file bytes */
    NBA_DIRENT = 'n',  /* fields: F name (a relative path below depth 1), then as f */
    NBA_PROC =
        'l', /* fields: P pid, A argv (repeated), K state, X code, N signal, O out total, o err total, Y started */
    NBA_FEVENT = 'v', /* fields: K event NBA_EV_*, F path relative to the watched directory */
    NBA_END = '.',    /* end of a reply or of an upload */
    NBA_ERROR = '!',  /* u32 errno, then a message (not NUL-terminated) */
    NBA_JSON = 'j',   /* code bridge: one JSON object (request or event) */
};

#define NBA_EXIT_TIMEDOUT 1u
#define NBA_EXIT_TRUNCATED 2u
#define NBA_EXIT_OOM 4u /* the sandbox's cgroup OOM-killed something meanwhile */

/* Field tags. */
enum nba_tag {
    NBA_T_ARG = 'A',       /* argv entry, repeated, at least one */
    NBA_T_ENV = 'E',       /* "NAME=value", repeated */
    NBA_T_CWD = 'C',       /* absolute path */
    NBA_T_TIMEOUT = 'T',   /* u32 milliseconds, 0 = none */
    NBA_T_MAXOUT = 'M',    /* u32 bytes of stdout+stderr to forward (exec); u32 mode (write) */
    NBA_T_BG = 'B',        /* empty: run in the background */
    NBA_T_PID = 'P',       /* u32 */
    NBA_T_OFF = 'O',       /* u64 stdout offset (query) / u64 total (proc) */
    NBA_T_EOFF = 'o',      /* u64 stderr offset (query) / u64 total (proc) */
    NBA_T_DATA = 'D',      /* bytes */
    NBA_T_CLOSE = 'Z',     /* empty: close stdin after D (stdin) or at start (exec B) */
    NBA_T_SIG = 'N',       /* u32 signal number */
    NBA_T_PATH = 'F',      /* path (request) / entry name (dirent) */
    NBA_T_DEST = 'G',      /* destination path (move) */
    NBA_T_RECURSIVE = 'r', /* empty: delete a directory tree */
    NBA_T_KIND = 'K',      /* u8: NBA_KIND_* (file) or NBA_PS_* (process) */
    NBA_T_MTIME = 'Y',     /* u64 unix seconds */
    NBA_T_MTIME_NS = 'y',  /* u32 0..999999999: the nanoseconds of Y (info) */
    NBA_T_TMODE = 'm',     /* u32 st_mode (type and permission bits) of what a symlink leads to,
                              when it resolves (info) */
    NBA_T_EXITCODE = 'X',  /* i32 */
    NBA_T_WINSIZE = 'Y',   /* u16 cols, u16 rows: run on a PTY (exec); the new size (resize) */
    NBA_T_DEPTH = 'H',     /* u32 1..NBA_MAX_DEPTH: levels a listing descends (read) */
    NBA_T_OWNER = 'u',     /* the owner's user name, or its uid in decimal (info) */
    NBA_T_GROUP = 'g',     /* the group's name, or its gid in decimal (info) */
    NBA_T_TARGET = 'L',    /* a symlink's target, as readlink gives it (info) */
    NBA_T_REAL = 'a',      /* a symlink's absolute path with every link followed (realpath),
                              when it resolves (info) */
    NBA_T_WAIT = 'W',      /* empty: a query's answer waits for output or the end (query) */
    NBA_T_ROOT = 'R',      /* empty: run as root, uid 0 with no capabilities (exec; root mode) */
    NBA_T_STDIO = 'I',     /* empty: stdin, stdout, stderr came as 3 fds with the request (exec) */
    NBA_T_TTY = 't',       /* empty: the background process runs on a PTY (proc) */
    NBA_T_META = 'x',      /* "key\0value": user metadata, the xattr "user.<key>" (write,
                              repeated; info, repeated; agents with NBA_CAP_META only) */
};

/*
 * User metadata on a file (E2B's files.write metadata): each entry the
 * xattr "user.<key>". A key is 1..NBA_META_KEY_MAX bytes of HTTP token
 * characters and does not itself name an xattr namespace ("user.",
 * "trusted.", "security.", "system."); a value is 0..NBA_META_VALUE_MAX
 * printable ASCII bytes. At most NBA_META_MAX entries, NBA_META_BYTES of
 * keys and values, per file; what an info reports is held to the same
 * rules (an xattr set another way that breaks them is left out).
 */
#define NBA_META_MAX 16
#define NBA_META_KEY_MAX 128
#define NBA_META_VALUE_MAX 1024
#define NBA_META_BYTES 4096
/* Is key[0..len) a metadata key? value[0..len) a metadata value? */
int nba_meta_key_ok(const char *key, size_t len);
int nba_meta_value_ok(const char *value, size_t len);

/* Exec with I: the fds passed (SCM_RIGHTS) with the request frame. */
#define NBA_STDIO_FDS 3
/* The error (EPERM) an exec with R gets from an agent not in root mode. */
#define NBA_NO_ROOT_MSG \
    "a nanobox sandbox has no root: commands run as the sandbox user, with no capabilities"
/* sudo mode (nanobox-init run as "sudo"): the socket name instead of NBA_SOCKET_NAME */
#define NBA_SOCKET_ENV "NANOBOX_INIT_SOCKET"

/* Most levels a directory listing descends (H). */
#define NBA_MAX_DEPTH 32

/* A PTY's window: 1..NBA_WINSIZE_MAX columns and rows. */
#define NBA_WINSIZE_MAX 1000

enum { NBA_KIND_FILE = 'f', NBA_KIND_DIR = 'd', NBA_KIND_LINK = 'l', NBA_KIND_OTHER = 'o' };
enum { NBA_PS_RUNNING = 'R', NBA_PS_EXITED = 'X' };
/* a watch's events (v frames' K) */
enum {
    NBA_EV_CREATE = 'c',
    NBA_EV_WRITE = 'w',
    NBA_EV_REMOVE = 'x',
    NBA_EV_RENAME = 'm',
    NBA_EV_CHMOD = 'a',
    NBA_EV_OVERFLOW = 'o', /* events were lost (the kernel's queue overflowed) */
};
/* directories one watch (I) may hold: M's default and its most */
#define NBA_WATCH_DIRS_DEFAULT 1024
#define NBA_WATCH_DIRS_MAX 65536

/* Big-endian helpers. */
uint32_t nba_get_u32(const unsigned char *p);
uint64_t nba_get_u64(const unsigned char *p);
void nba_put_u32(unsigned char *p, uint32_t v);
void nba_put_u64(unsigned char *p, uint64_t v);

/*
 * A complete frame at the start of buf[0..n)? Returns its total size
 * (NBA_HDR + len) with *type, *body, *len set; 0 if more bytes are needed;
 * -1 if the header announces a body over max_body (the peer is broken:
 * close the connection).
 */
long nba_frame_peek(const unsigned char *buf, size_t n, size_t max_body, uint8_t *type,
                    const unsigned char **body, uint32_t *len);

/* Write a frame header for a body of len bytes into out[NBA_HDR]. */
void nba_frame_hdr(unsigned char *out, uint8_t type, uint32_t len);

/* Field iteration over a request (or info) body. */
struct nba_fields {
    const unsigned char *p, *end;
};
void nba_fields_init(struct nba_fields *it, const unsigned char *body, uint32_t len);
/* 1 with tag, val and len set; 0 at the end; -1 if a field runs past the body. */
int nba_fields_next(struct nba_fields *it, uint8_t *tag, const unsigned char **val, uint32_t *len);

/*
 * Write one field (tag, len, value) into out, which must have room for
 * NBA_HDR + len bytes; returns NBA_HDR + len.
 */
size_t nba_field_put(unsigned char *out, uint8_t tag, const void *val, uint32_t len);

/*
 * Is path acceptable to the agent: absolute, 1..NBA_MAX_PATH bytes, no NUL,
 * no "." or ".." component? 1 yes, 0 no.
 */
int nba_path_ok(const char *path, size_t len);

#endif
