/*
 * mcp_tool.h - private to src/mcp: what the pieces of the MCP core share.
 * The fronts (the CLI's "nanobox mcp", nanobox-fcgi's api_mcp.c) see mcp.h
 * only.
 *
 * The files, each calling only those below it (no circle; see
 * docs/ARCHITECTURE.md's file map):
 *
 *   mcp.c          the protocol: JSON-RPC envelope, initialize, ping,
 *                  tools/list, tools/call, batches, dispatch
 *   tools.c        the tool table: names, argument lists, descriptions,
 *                  output schemas; the input schemas generated from the
 *                  argument lists, and the arguments checked against them
 *   tool_*.c       the tools, one file per group: sandbox (lifecycle),
 *                  exec (commands and background processes), files,
 *                  code (run_code), ports, volumes
 *   call.c         one tool call: its arguments, its result (text, images,
 *                  structuredContent), its API calls and their errors
 *   progress.c     a long call's progress notifications and cancellation
 *   describe.c     descriptions as templates: ${setting} from the config
 *   render.c       the API's JSON as text a model reads
 *
 * Names here have the mcp_ prefix: the objects are linked into programs
 * with libnanobox.a and the fronts' own files.
 */
#ifndef NB_MCP_TOOL_H
#define NB_MCP_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "conf.h"
#include "json.h"
#include "mcp.h"

#define MCP_MAX_ARGS 12               /* arguments of the widest tool (sandbox_create) */
#define MCP_DEFAULT_PORT_DURATION 600 /* sandbox_open_port without duration, seconds */
#define MCP_WORKSPACE "/workspace"    /* the workspace when the config is unknown */

/* ------------------------------------------------------- the tool table */

/* One argument of a tool: checked on every call, and its JSON schema. */
struct mcp_arg {
    const char *name;
    unsigned types; /* NB_JT_*; NB_JT_OBJECT means a map of strings */
    int required;
    const char *choices;     /* "a|b": the only values allowed, or NULL */
    const char *description; /* a template: ${setting} filled in from the config */
};

#define HINT_READ_ONLY 0x1   /* annotations.readOnlyHint */
#define HINT_DESTRUCTIVE 0x2 /* annotations.destructiveHint */
#define HINT_IDEMPOTENT 0x4  /* annotations.idempotentHint */

struct tool_call;

struct mcp_tool {
    const char *name;
    const char *title;
    const char *description;    /* a template, as mcp_arg's */
    const struct mcp_arg *args; /* ends with a NULL name */
    unsigned hints;             /* HINT_* */
    void (*run)(struct tool_call *t);
    const char *output_schema; /* JSON Schema of structuredContent (JSON text) */
};

/* tools.c: the table, in tools/list's order, and the server's instructions
 * (initialize's, a template as the descriptions are). */
extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_n_tools;
extern const char mcp_instructions[];

/* The tool called name, or NULL. */
const struct mcp_tool *mcp_tool_find(const char *name);
/* "inputSchema": tool's arguments as a JSON Schema, descriptions filled in. */
void mcp_gen_input_schema(yajl_gen g, const struct mcp_tool *tool, const struct mcp_session *s);
/* The arguments against the tool's list; 0, or -1 with t an isError result. */
int mcp_check_args(struct tool_call *t, yajl_val args);

/* --------------------------------------------------------- one tool call */

/* A content item after the first: text, or an image (base64 data). */
struct content_item {
    const char *mime; /* an image's MIME type (static); NULL: text */
    struct nb_buf data;
};

/*
 * What a long call reports (the tool call has a progressToken): progress
 * in seconds of its timeout (total; 0 unknown), or for a file transfer in
 * bytes. Its tick (mcp_watch_tick) is the one place progress is sent and a
 * cancellation seen, for the watched exec's polling loop and for a backend
 * that ticks while one API call waits (struct mcp_watch).
 */
struct call_watch {
    struct tool_call *t;
    int64_t start, next; /* monotonic ms: the call's start, the next progress due */
    double total;        /* seconds of the timeout, or bytes of a transfer; 0: unknown */
    const char *ends;    /* what the timeout does ("killed"), for the message */
    const char *moved;   /* a transfer: "sent" or "received"; NULL: progress in seconds */
    long long done;      /* bytes reported last */
};

/* One tools/call in progress. */
struct tool_call {
    struct mcp_session *s;
    const struct mcp_tool *tool;
    struct nb_jfield f[MCP_MAX_ARGS]; /* the arguments, in the tool's order */
    struct nb_buf text;               /* content[0].text */
    struct content_item *items;       /* content[1..]: images and the text between them */
    size_t n_items;
    int is_error;
    yajl_val structured;         /* structuredContent (owned), or NULL */
    const char *structured_omit; /* a top-level key left out of it */
    const char *id_json;         /* the request's id as JSON text */
    yajl_val progress_token;     /* params._meta.progressToken, or NULL */
    int cancelled;               /* notifications/cancelled named it, or the client left */
    struct call_watch watch;     /* its progress, when it has a progress_token */
    int polling;                 /* exec_watched: ticks itself, its API calls are not watched */
};

/* The tools (tool_*.c), as the table names them. */
void mcp_tool_sandbox_create(struct tool_call *t);
void mcp_tool_sandbox_exec(struct tool_call *t);
void mcp_tool_sandbox_write_file(struct tool_call *t);
void mcp_tool_sandbox_read_file(struct tool_call *t);
void mcp_tool_sandbox_list_files(struct tool_call *t);
void mcp_tool_sandbox_open_port(struct tool_call *t);
void mcp_tool_sandbox_list(struct tool_call *t);
void mcp_tool_sandbox_destroy(struct tool_call *t);
void mcp_tool_sandbox_pause(struct tool_call *t);
void mcp_tool_sandbox_resume(struct tool_call *t);
void mcp_tool_sandbox_snapshot(struct tool_call *t);
void mcp_tool_sandbox_fork(struct tool_call *t);
void mcp_tool_volume_create(struct tool_call *t);
void mcp_tool_volume_list(struct tool_call *t);
void mcp_tool_volume_delete(struct tool_call *t);
void mcp_tool_run_code(struct tool_call *t);
void mcp_tool_sandbox_set_timeout(struct tool_call *t);
void mcp_tool_sandbox_start_process(struct tool_call *t);
void mcp_tool_sandbox_list_processes(struct tool_call *t);
void mcp_tool_sandbox_read_process_output(struct tool_call *t);
void mcp_tool_sandbox_write_process_stdin(struct tool_call *t);
void mcp_tool_sandbox_kill_process(struct tool_call *t);
void mcp_tool_sandbox_delete_file(struct tool_call *t);
void mcp_tool_sandbox_make_dir(struct tool_call *t);
void mcp_tool_sandbox_move_file(struct tool_call *t);
void mcp_tool_sandbox_list_ports(struct tool_call *t);
void mcp_tool_sandbox_close_port(struct tool_call *t);

/* call.c: the call's arguments (NULL, "": not given). */
yajl_val mcp_arg_val(struct tool_call *t, const char *name);
const char *mcp_arg_str(struct tool_call *t, const char *name);

/* call.c: the call's result. mcp_fail makes t an isError result saying why. */
void mcp_fail(struct tool_call *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mcp_items_free(struct tool_call *t);
/* Where the next text goes: content[0] until an image came, then the text item after it. */
struct nb_buf *mcp_text_out(struct tool_call *t);
/* An image content item: b64 as the API gave it, without the line breaks some kernels add. */
void mcp_add_image(struct tool_call *t, const char *mime, const char *b64);
/* An API call's outcome. */
struct mcp_answer {
    long status;
    struct nb_buf body;
    yajl_val json; /* body parsed when it is JSON, else NULL */
};

/* Hand the parsed answer over as structuredContent, but its member omit. */
void mcp_keep_structured(struct tool_call *t, struct mcp_answer *a, const char *omit);
/* structuredContent built here: the object g generated. */
void mcp_set_structured(struct tool_call *t, yajl_gen g);
/* exec's and run's answer as text (both have the same fields). */
void mcp_put_exec_result(struct tool_call *t, yajl_val r);

void mcp_answer_free(struct mcp_answer *a);
/*
 * One API call of tool call t. Returns 0 for a 2xx answer; otherwise -1
 * after making t an isError result with the API's message (or why no answer
 * came). A long call's (a progressToken, outside exec_watched's polling) is
 * watched: the backend ticks while it waits, so the client gets progress
 * and a cancellation drops the call.
 */
int mcp_api_call(struct tool_call *t, const char *method, const char *path, const char *body,
                 size_t body_len, const char *content_type, struct mcp_answer *a);
/* "/sandbox/ID" + suffix, the id %-encoded (p is initialised here). */
void mcp_sandbox_path(struct nb_buf *p, struct tool_call *t, const char *suffix);
/* A request body holding the tool's given arguments, but the one named skip. */
char *mcp_body_from_args(struct tool_call *t, const char *skip);

/* ------------------------------------------------------------ progress.c */

/* Start t's watch: progress in seconds of total (0: unknown), or with moved
 * ("sent", "received") in bytes of total. */
void mcp_watch_start(struct tool_call *t, double total, const char *ends, const char *moved);
/* The tick of a call_watch (struct mcp_watch's, and the watched exec's once
 * per poll): a progress when one is due, then 1 when the call is to stop. */
int mcp_watch_tick(void *arg, long long done, long long total);
/* Whether t was cancelled (notifications/cancelled, or the client left). */
int mcp_cancelled(struct tool_call *t);

/* ------------------------------------------------------------ describe.c */

/* The config of the server the backend reaches, or NULL. */
const struct nb_conf *mcp_conf(const struct mcp_session *s);
/* Where relative file paths start: the config's workspace, or the usual one. */
const char *mcp_workspace(const struct mcp_session *s);
/* sandbox_open_port's duration when none is given: ours, within the server's cap. */
unsigned mcp_port_duration(const struct mcp_session *s);
/* Append template tmpl with each ${name} filled in (see describe.c). */
void mcp_put_description(struct nb_buf *b, const char *tmpl, const struct mcp_session *s);
/* "key": the template filled in, as a JSON string. */
void mcp_gen_description(yajl_gen g, const char *key, const char *tmpl,
                         const struct mcp_session *s);

/* -------------------------------------------------------------- render.c */

/* Member key of object o, or NULL; as a string ("" when not one). */
yajl_val mcp_member(yajl_val o, const char *key);
const char *mcp_member_str(yajl_val o, const char *key);
/* v as text: strings as they are, numbers as the API wrote them. */
void mcp_put_value(struct nb_buf *b, yajl_val v);
/* "key: value\n" for each of keys present in o. */
void mcp_put_fields(struct nb_buf *b, yajl_val o, const char *const *keys);
/* Unix seconds as "2025-11-29 18:40:12 UTC". */
void mcp_put_time(struct nb_buf *b, yajl_val v);
/* "1800 seconds (30 minutes)": the API's unit, and one a reader takes in. */
void mcp_put_seconds(struct nb_buf *b, unsigned long long secs);
/* A size for a person: "812 bytes", "256 MiB", "1.5 KiB". */
void mcp_put_size(struct nb_buf *b, unsigned long long bytes);
/* The API's byte count v as a size; anything else as it came. */
void mcp_put_size_val(struct nb_buf *b, yajl_val v);
/* text, ended by a newline unless empty */
void mcp_put_block(struct nb_buf *b, const char *text);

#endif
