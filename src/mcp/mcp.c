/*
 * mcp.c - the MCP core: nanobox's tools behind JSON-RPC (see mcp.h).
 *
 * Three parts: the JSON-RPC envelope (parse, validate, dispatch, reply),
 * the tool table (names, argument lists the JSON schemas are generated from,
 * descriptions written for a model), and one function per tool that turns
 * its arguments into API calls and the API's answer into text a model can
 * read, plus structuredContent (the API's JSON) from 2025-06-18 on.
 *
 * Descriptions are templates: ${name} stands for an operator setting
 * (default_ttl, exec_timeout_max, ...), filled in from the backend's config
 * when tools/list is answered, so a model reads this server's limits rather
 * than the shipped defaults. Without a config (the stdio front) a setting
 * reads "the server's NAME setting", or the text after '|' in
 * ${name|text}: never a number that may be wrong.
 *
 * Argument checks mirror the API's own (unknown arguments refused, types
 * strict); what only the API can judge (limits, ids) is left to it, and its
 * message comes back in the isError result.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "base64.h"
#include "buf.h"
#include "clock.h"
#include "json.h"
#include "log.h"
#include "mcp.h"
#include "url.h"

#define MCP_MAX_ARGS 11               /* arguments of the widest tool (sandbox_create) */
#define MCP_DEFAULT_PORT_DURATION 600 /* sandbox_open_port without duration, seconds */
#define MCP_WORKSPACE "/workspace"    /* the workspace when the config is unknown */
#define MCP_MAX_DESCRIPTION 4096      /* bytes of one description, templates filled in */
#define MCP_EXEC_TIMEOUT 30           /* a watched exec's timeout when the config is unknown */
#define MCP_MAX_OUTPUT (1u << 20)     /* a watched exec's output cap when the config is unknown */
#define MCP_POLL_MAX_MS 1000          /* a watched exec's longest wait between two polls */
#define MCP_BYTES_EVERY_MS 500        /* between two progress notifications of a transfer */

const char *const mcp_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05", NULL};

static const char server_instructions[] =
    "nanobox runs commands in isolated Linux sandboxes (containers, no network unless asked "
    "for). Create one with sandbox_create and pass its sandbox_id to sandbox_exec, "
    "sandbox_write_file, sandbox_read_file, sandbox_list_files and sandbox_open_port. Files "
    "live in ${workspace|the workspace directory (/workspace unless the server sets another)} "
    "and persist between calls until the sandbox is destroyed (sandbox_destroy, or its ttl "
    "runs out). For a one-off snippet, run_code needs no sandbox; with the sandbox_id of a "
    "nanobox-python:latest sandbox it runs code in a session that keeps its variables, like "
    "notebook cells, and returns plots as images.";

/* ------------------------------------------------------------ the tools */

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

/* A content item after the first: text, or an image (base64 data). */
struct content_item {
    const char *mime; /* an image's MIME type (static); NULL: text */
    struct nb_buf data;
};

/*
 * What a long call reports (the tool call has a progressToken): progress
 * in seconds of its timeout (total; 0 unknown), or for a file transfer in
 * bytes. Its tick (watch_tick) is the one place progress is sent and a
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

static void tool_sandbox_create(struct tool_call *t);
static void tool_sandbox_exec(struct tool_call *t);
static void tool_sandbox_write_file(struct tool_call *t);
static void tool_sandbox_read_file(struct tool_call *t);
static void tool_sandbox_list_files(struct tool_call *t);
static void tool_sandbox_open_port(struct tool_call *t);
static void tool_sandbox_list(struct tool_call *t);
static void tool_sandbox_destroy(struct tool_call *t);
static void tool_sandbox_pause(struct tool_call *t);
static void tool_sandbox_resume(struct tool_call *t);
static void tool_sandbox_snapshot(struct tool_call *t);
static void tool_run_code(struct tool_call *t);
static void tool_sandbox_set_timeout(struct tool_call *t);
static void tool_sandbox_start_process(struct tool_call *t);
static void tool_sandbox_list_processes(struct tool_call *t);
static void tool_sandbox_read_process_output(struct tool_call *t);
static void tool_sandbox_write_process_stdin(struct tool_call *t);
static void tool_sandbox_kill_process(struct tool_call *t);
static void tool_sandbox_delete_file(struct tool_call *t);
static void tool_sandbox_make_dir(struct tool_call *t);
static void tool_sandbox_move_file(struct tool_call *t);
static void tool_sandbox_list_ports(struct tool_call *t);
static void tool_sandbox_close_port(struct tool_call *t);

/* initialisers, laid out as the tables they go in */
/* clang-format off */
#define ARG_SANDBOX_ID                                                                      \
    {"sandbox_id", NB_JT_STRING, 1, NULL,                                                   \
     "The sandbox's id, as sandbox_create or sandbox_list returned it (a lowercase UUID)."}
#define ARG_END {NULL, 0, 0, NULL, NULL}
/* clang-format on */
#define STR_(x) #x
#define STR(x) STR_(x)

static const struct mcp_arg create_args[] = {
    {"image", NB_JT_STRING, 0, NULL,
     "Container image to run, one of the server's allowed images (${images|its images "
     "setting}; default: ${image|the first of them}). nanobox's own images: nanobox:latest "
     "has python3 and a POSIX shell; nanobox-python:latest adds numpy, pandas, matplotlib, "
     "scipy, pip, node, git and the code interpreter that run_code uses with a sandbox_id."},
    {"template", NB_JT_STRING, 0, NULL,
     "Instead of image: the name of a ready template to start from, one built from a "
     "Dockerfile through the server's POST /templates (its GET /templates lists them; "
     "\"nanobox-python\" is the image nanobox-python:latest)."},
    {"ttl", NB_JT_INT, 0, NULL,
     "Lifetime in seconds; the sandbox and its files are destroyed after it (default: "
     "${default_ttl}; at most ${max_ttl})."},
    {"memory", NB_JT_INT | NB_JT_STRING, 0, NULL,
     "Memory limit: bytes, or a size like \"128m\" or \"1g\" (default and maximum: "
     "${memory})."},
    {"cpus", NB_JT_NUMBER, 0, NULL,
     "CPUs, fractions allowed, e.g. 0.5 (default and maximum: ${cpus})."},
    {"pids", NB_JT_INT, 0, NULL, "Maximum number of processes (default and maximum: ${pids})."},
    {"network", NB_JT_STRING, 0, "none|bridge",
     "\"none\" (default): no network at all. \"bridge\": outbound network "
     "(${allow_bridge|if the server allows it})."},
    {"env", NB_JT_OBJECT, 0, NULL,
     "Environment variables for every command, as {\"NAME\": \"value\"}."},
    {"metadata", NB_JT_OBJECT, 0, NULL,
     "Labels to find the sandbox by later with sandbox_list, as {\"key\": \"value\"}."},
    {"auto_resume", NB_JT_BOOL, 0, NULL,
     "true: once paused (sandbox_pause), the next command, file or code call resumes it "
     "instead of failing (default: false)."},
    {"on_timeout", NB_JT_STRING, 0, "destroy|pause",
     "What the end of its ttl does: \"destroy\" (default) removes the sandbox and its "
     "files; \"pause\" pauses it instead (as sandbox_pause), keeping its processes and "
     "files until sandbox_resume gives it ${default_ttl} more."},
    ARG_END};

static const struct mcp_arg exec_args[] = {
    ARG_SANDBOX_ID,
    {"command", NB_JT_STRING, 1, NULL,
     "Shell command, run as /bin/sh -c COMMAND; pipes, redirections, && and cd work."},
    {"timeout", NB_JT_NUMBER, 0, NULL,
     "Seconds before the command and everything it started are killed (default: "
     "${exec_timeout}; at least 0.001, at most ${exec_timeout_max})."},
    {"cwd", NB_JT_STRING, 0, NULL,
     "Absolute directory to run in (default: ${workspace|the workspace directory})."},
    {"env", NB_JT_OBJECT, 0, NULL,
     "Extra environment variables for this command only, as {\"NAME\": \"value\"}."},
    ARG_END};

static const struct mcp_arg write_args[] = {
    ARG_SANDBOX_ID,
    {"path", NB_JT_STRING, 1, NULL,
     "File to write: absolute, or relative to ${workspace|the workspace directory}. An "
     "existing file is replaced."},
    {"content", NB_JT_STRING, 1, NULL,
     "The file's whole content: UTF-8 text, or base64 when encoding is \"base64\"."},
    {"encoding", NB_JT_STRING, 0, "utf-8|base64",
     "How content is given: \"utf-8\" (default, text as is) or \"base64\" (binary data)."},
    ARG_END};

static const struct mcp_arg read_args[] = {
    ARG_SANDBOX_ID,
    {"path", NB_JT_STRING, 1, NULL,
     "File to read: absolute, or relative to ${workspace|the workspace directory}."},
    ARG_END};

static const struct mcp_arg list_files_args[] = {
    ARG_SANDBOX_ID,
    {"path", NB_JT_STRING, 0, NULL,
     "Directory to list: absolute, or relative to ${workspace|the workspace directory} "
     "(default: ${workspace|" MCP_WORKSPACE "})."},
    ARG_END};

static const struct mcp_arg port_args[] = {
    ARG_SANDBOX_ID,
    {"port", NB_JT_INT, 1, NULL,
     "TCP port a server inside the sandbox listens on (it may listen on 127.0.0.1 only)."},
    {"duration", NB_JT_INT, 0, NULL,
     /* clang-format off */
     "Seconds the port stays reachable (default: ${port_duration|" STR(MCP_DEFAULT_PORT_DURATION)
     " seconds}; at most ${max_port_duration}, and never longer than the sandbox lives)."},
    /* clang-format on */
    ARG_END};

static const struct mcp_arg list_args[] = {
    {"metadata", NB_JT_OBJECT, 0, NULL,
     "Only sandboxes whose metadata has all of these {\"key\": \"value\"} pairs."},
    ARG_END};

static const struct mcp_arg destroy_args[] = {ARG_SANDBOX_ID, ARG_END};

static const struct mcp_arg snapshot_args[] = {
    ARG_SANDBOX_ID,
    {"name", NB_JT_STRING, 0, NULL,
     "Name of the new template: 1 to 63 of a-z, 0-9, '.', '_' and '-' (default: "
     "snap-<the sandbox id's first 8>-<time>)."},
    ARG_END};

static const struct mcp_arg run_args[] = {
    {"language", NB_JT_STRING, 0, "python|sh|javascript|bash",
     "Without sandbox_id: \"python\" (python3 -c CODE, the default) or \"sh\" (/bin/sh -c "
     "CODE). With sandbox_id: \"python\" (the default), \"javascript\" (node) or \"bash\" "
     "(\"sh\" means bash there); leave it out when context names a session."},
    {"code", NB_JT_STRING, 1, NULL,
     "The source text: a whole program, or with sandbox_id the next cell of the session."},
    {"timeout", NB_JT_NUMBER, 0, NULL,
     "Seconds before the program is killed, or with sandbox_id the cell interrupted (default: "
     "${exec_timeout}; at least 0.001, at most ${exec_timeout_max})."},
    {"stdin", NB_JT_STRING, 0, NULL,
     "Text the program reads on its standard input (only without sandbox_id)."},
    {"sandbox_id", NB_JT_STRING, 0, NULL,
     "Run in this sandbox's interpreter session instead of once: variables, imports and "
     "definitions stay for the next run_code with the same sandbox_id, like notebook cells. "
     "The sandbox must have the code interpreter (sandbox_create with image "
     "nanobox-python:latest)."},
    {"context", NB_JT_STRING, 0, NULL,
     "With sandbox_id: the session to run in (its id, e.g. \"ctx-…\"); default: the "
     "language's own session (\"python\", \"javascript\" or \"bash\"), created on first "
     "use."},
    ARG_END};

static const struct mcp_arg timeout_args[] = {
    ARG_SANDBOX_ID,
    {"ttl", NB_JT_INT, 1, NULL,
     "Seconds from now until the sandbox is destroyed: more than it has left extends its life, "
     "less shortens it (at least 1, at most ${max_ttl} per call; calls can repeat)."},
    ARG_END};

static const struct mcp_arg start_args[] = {
    ARG_SANDBOX_ID,
    {"command", NB_JT_STRING, 1, NULL,
     "Shell command to start in the background, run as /bin/sh -c COMMAND."},
    {"cwd", NB_JT_STRING, 0, NULL,
     "Absolute directory to run in (default: ${workspace|the workspace directory})."},
    {"env", NB_JT_OBJECT, 0, NULL,
     "Extra environment variables for this process, as {\"NAME\": \"value\"}."},
    ARG_END};

#define ARG_PID                                                                              \
    {                                                                                        \
        "pid", NB_JT_INT, 1, NULL,                                                           \
            "The process's pid, as sandbox_start_process or sandbox_list_processes gave it." \
    }

static const struct mcp_arg read_output_args[] = {
    ARG_SANDBOX_ID,
    ARG_PID,
    {"stdout_offset", NB_JT_INT, 0, NULL,
     "Read stdout from this byte offset: the stdout_next of the previous read, so nothing is "
     "missed or repeated (default: 0, the oldest byte kept: the sandbox keeps the last MiB of "
     "each)."},
    {"stderr_offset", NB_JT_INT, 0, NULL,
     "Read stderr from this byte offset: the stderr_next of the previous read (default: 0)."},
    ARG_END};

static const struct mcp_arg stdin_args[] = {
    ARG_SANDBOX_ID,
    ARG_PID,
    {"data", NB_JT_STRING, 1, NULL,
     "Bytes for the process's standard input: UTF-8 text (add the \\n a line needs), or base64 "
     "when encoding is \"base64\". May be empty with eof."},
    {"encoding", NB_JT_STRING, 0, "utf-8|base64", "How data is given (default: \"utf-8\")."},
    {"eof", NB_JT_BOOL, 0, NULL, "true: close the process's stdin after data (default: false)."},
    ARG_END};

static const struct mcp_arg kill_args[] = {
    ARG_SANDBOX_ID,
    ARG_PID,
    {"signal", NB_JT_STRING, 0, "KILL|TERM|INT|HUP|QUIT|USR1|USR2|STOP|CONT",
     "Signal for the process's group (default: KILL). Signalling a process that already "
     "ended forgets it."},
    ARG_END};

static const struct mcp_arg delete_args[] = {
    ARG_SANDBOX_ID,
    {"path", NB_JT_STRING, 1, NULL,
     "File or directory to delete: absolute, or relative to ${workspace|the workspace "
     "directory}."},
    {"recursive", NB_JT_BOOL, 0, NULL,
     "true: delete a directory with everything in it (default: false, a directory must be "
     "empty)."},
    ARG_END};

static const struct mcp_arg mkdir_args[] = {
    ARG_SANDBOX_ID,
    {"path", NB_JT_STRING, 1, NULL,
     "Directory to create, with its missing parents: absolute, or relative to ${workspace|the "
     "workspace directory}. An existing directory is fine."},
    ARG_END};

static const struct mcp_arg move_args[] = {
    ARG_SANDBOX_ID,
    {"from", NB_JT_STRING, 1, NULL,
     "File or directory to move or rename: absolute, or relative to ${workspace|the workspace "
     "directory}."},
    {"to", NB_JT_STRING, 1, NULL, "Its new path (an existing file there is replaced)."},
    ARG_END};

static const struct mcp_arg close_port_args[] = {
    ARG_SANDBOX_ID,
    {"port", NB_JT_INT, 1, NULL, "The sandbox port to close, as sandbox_open_port opened it."},
    ARG_END};

/* Output schemas: what structuredContent holds (from protocol 2025-06-18 on). */
/* clang-format off */
#define OS(props, req) "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" req "]}"
#define P_STR(n) "\"" n "\":{\"type\":\"string\"}"
#define P_INT(n) "\"" n "\":{\"type\":\"integer\"}"
#define P_NUM(n) "\"" n "\":{\"type\":\"number\"}"
#define P_BOOL(n) "\"" n "\":{\"type\":\"boolean\"}"
#define P_OBJ(n) "\"" n "\":{\"type\":\"object\"}"
#define P_ARR(n) "\"" n "\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}"
#define P_NINT(n) "\"" n "\":{\"type\":[\"integer\",\"null\"]}"
static const char os_create[] = OS(P_STR("sandboxId") "," P_STR("image") "," P_STR("status") ","
    P_STR("network") "," P_INT("memory") "," P_NUM("cpus") "," P_INT("pids") "," P_INT("ttl") ","
    P_INT("expires_at") "," P_OBJ("metadata"), "\"sandboxId\"");
static const char os_exec[] = OS(P_INT("exit_code") "," P_BOOL("timed_out") "," P_BOOL("truncated")
    "," P_STR("stdout") "," P_STR("stderr") "," P_INT("duration_ms") "," P_BOOL("oom_killed"),
    "\"exit_code\",\"timed_out\",\"truncated\",\"stdout\",\"stderr\"");
static const char os_write[] = OS(P_STR("path") "," P_STR("type") "," P_INT("size"), "\"path\"");
static const char os_read[] = OS(P_STR("path") "," P_STR("type") "," P_INT("size") ","
    P_BOOL("binary"), "\"path\",\"type\"");
static const char os_listing[] = OS(P_STR("path") "," P_ARR("entries") "," P_BOOL("truncated"),
    "\"path\",\"entries\"");
static const char os_port[] = OS(P_STR("url") "," P_STR("host") "," P_INT("hostport") ","
    P_INT("sandboxport") "," P_INT("expires_at") "," P_INT("duration"), "\"url\",\"sandboxport\"");
static const char os_list[] = OS(P_ARR("sandboxes"), "\"sandboxes\"");
static const char os_destroy[] = OS(P_STR("sandboxId") "," P_BOOL("destroyed"),
    "\"sandboxId\",\"destroyed\"");
static const char os_state[] = OS(P_STR("sandboxId") "," P_STR("state") "," P_INT("ttl_remaining"),
    "\"state\"");
static const char os_snapshot[] = OS(P_STR("name") "," P_STR("status") "," P_STR("kind") ","
    P_STR("image") "," P_STR("parent") "," P_STR("parent_template") "," P_INT("size") ","
    P_INT("created_at"), "\"name\"");
static const char os_run[] = OS(P_INT("exit_code") "," P_BOOL("timed_out") "," P_BOOL("truncated")
    "," P_STR("stdout") "," P_STR("stderr") "," P_STR("status") "," P_STR("context") ","
    P_ARR("results"), "");
static const char os_timeout[] = OS(P_STR("sandboxId") "," P_INT("expires_at") "," P_INT("ttl"),
    "\"expires_at\",\"ttl\"");
static const char os_start[] = OS(P_INT("pid"), "\"pid\"");
static const char os_procs[] = OS(P_ARR("processes"), "\"processes\"");
static const char os_proc[] = OS(P_INT("pid") "," P_BOOL("running") "," P_NINT("exit_code") ","
    P_STR("stdout") "," P_STR("stderr") "," P_INT("stdout_next") "," P_INT("stderr_next"),
    "\"pid\",\"running\"");
static const char os_stdin[] = OS(P_INT("written"), "\"written\"");
static const char os_kill[] = OS(P_INT("pid") "," P_STR("signal"), "\"pid\",\"signal\"");
static const char os_delete[] = OS(P_STR("path") "," P_BOOL("deleted"), "\"path\",\"deleted\"");
static const char os_mkdir[] = OS(P_STR("path"), "\"path\"");
static const char os_move[] = OS(P_STR("from") "," P_STR("path"), "\"path\"");
static const char os_ports[] = OS(P_ARR("ports"), "\"ports\"");
static const char os_close[] = OS(P_INT("sandboxport") "," P_BOOL("closed"),
    "\"sandboxport\",\"closed\"");
/* clang-format on */

static const struct mcp_tool tools[] = {
    {"sandbox_create", "Create a sandbox",
     "Create an isolated Linux sandbox (a container with python3 and a POSIX shell, no "
     "network by default) and return its sandbox_id. Use the id with the other sandbox_* "
     "tools; the sandbox keeps its files in ${workspace|its workspace directory} between "
     "calls until sandbox_destroy or until its ttl (default: ${default_ttl}) runs out. Call "
     "this once per task and reuse the sandbox.",
     create_args, 0, tool_sandbox_create, os_create},
    {"sandbox_exec", "Run a shell command in a sandbox",
     "Run a shell command in a sandbox and wait for it to finish. Returns the exit code, "
     "whether it timed out (it is then killed), whether the output was truncated (stdout and "
     "stderr together are capped at ${max_output}), and stdout and stderr separately. A "
     "non-zero exit code is a normal result, not a tool error. To start a server that "
     "outlives the command, detach it: setsid nohup CMD >/tmp/log 2>&1 &",
     exec_args, 0, tool_sandbox_exec, os_exec},
    {"sandbox_write_file", "Write a file in a sandbox",
     "Create or replace a file in a sandbox with the given content (text, or base64 for "
     "binary data).",
     write_args, HINT_IDEMPOTENT, tool_sandbox_write_file, os_write},
    {"sandbox_read_file", "Read a file from a sandbox",
     "Return a file's content from a sandbox: as text when it is UTF-8, otherwise as base64 "
     "with a note saying so.",
     read_args, HINT_READ_ONLY, tool_sandbox_read_file, os_read},
    {"sandbox_list_files", "List a directory in a sandbox",
     "List a directory in a sandbox: one line per entry with its type (file, dir, symlink, "
     "other), size, permissions, modification time (UTC) and name.",
     list_files_args, HINT_READ_ONLY, tool_sandbox_list_files, os_listing},
    {"sandbox_open_port", "Expose a sandbox port",
     "Make a TCP port of a sandbox reachable from outside for a while and return its URL "
     "(through the nanobox server's web front) and host:port (plain TCP). Start the server "
     "in the sandbox first, detached, with sandbox_exec.",
     port_args, 0, tool_sandbox_open_port, os_port},
    {"sandbox_list", "List sandboxes",
     "List the live sandboxes with their ids, image, time left and metadata, optionally only "
     "those whose metadata matches.",
     list_args, HINT_READ_ONLY, tool_sandbox_list, os_list},
    {"sandbox_destroy", "Destroy a sandbox",
     "Destroy a sandbox now: its processes are killed, its files and open ports are gone.",
     destroy_args, HINT_DESTRUCTIVE | HINT_IDEMPOTENT, tool_sandbox_destroy, os_destroy},
    {"sandbox_pause", "Pause a sandbox",
     "Freeze every process of a sandbox to pick it up later with sandbox_resume: memory, "
     "processes and files stay as they are. Its ttl stops while it is paused, but a sandbox "
     "paused longer than ${max_pause} is destroyed. Commands, files and code calls fail while "
     "it is paused unless it was created with auto_resume. Pausing a paused sandbox changes "
     "nothing.",
     destroy_args, HINT_IDEMPOTENT, tool_sandbox_pause, os_state},
    {"sandbox_resume", "Resume a sandbox",
     "Thaw a paused sandbox: its processes go on where they were, with the ttl it had left. "
     "Resuming a running sandbox changes nothing.",
     destroy_args, HINT_IDEMPOTENT, tool_sandbox_resume, os_state},
    {"sandbox_snapshot", "Snapshot a sandbox",
     "Save a sandbox's files as a new template: ${workspace} (its home, with what pip install "
     "--user put there) and /tmp, byte for byte. sandbox_create with template set to the "
     "returned name starts a sandbox with them. The sandbox keeps running (a paused one stays "
     "paused); running processes and memory are not saved.",
     snapshot_args, 0, tool_sandbox_snapshot, os_snapshot},
    {"run_code", "Run code",
     "Run code and return what it printed. Without sandbox_id: a Python or shell program runs "
     "once in a fresh sandbox that is destroyed afterwards; the answer has its exit code, "
     "stdout, stderr and whether it timed out or its output was truncated (capped at "
     "${max_output}), and nothing persists between calls. With sandbox_id: the code runs in "
     "that sandbox's interpreter session (a Jupyter kernel for python; javascript and bash "
     "too), which keeps variables, imports and definitions between calls like notebook cells; "
     "the answer has stdout, stderr, the value of the last expression, each figure or image "
     "(matplotlib plots) as an image, HTML (e.g. a pandas table) as text when there is no "
     "plain text, and an exception's traceback as an error result. Create the sandbox once "
     "with sandbox_create (image nanobox-python:latest) and reuse its id.",
     run_args, 0, tool_run_code, os_run},
    {"sandbox_set_timeout", "Extend or shorten a sandbox's life",
     "Set a sandbox to be destroyed ttl seconds from now: a longer ttl than it has left keeps "
     "it (and its files) alive longer, a shorter one ends it sooner. Returns the new expiry.",
     timeout_args, HINT_IDEMPOTENT, tool_sandbox_set_timeout, os_timeout},
    {"sandbox_start_process", "Start a background process in a sandbox",
     "Start a shell command in the background and return its pid at once: for servers, "
     "watchers and long jobs. It runs until it exits, is killed (sandbox_kill_process) or the "
     "sandbox goes; read its output with sandbox_read_process_output, feed its stdin with "
     "sandbox_write_process_stdin. A sandbox keeps at most 64 of them, running or ended and "
     "not read yet.",
     start_args, 0, tool_sandbox_start_process, os_start},
    {"sandbox_list_processes", "List background processes",
     "List a sandbox's background processes: pid, command, running or its exit code, and how "
     "much output each has written.",
     destroy_args, HINT_READ_ONLY, tool_sandbox_list_processes, os_procs},
    {"sandbox_read_process_output", "Read a background process's output",
     "Return a background process's state (running, or its exit code) and its stdout and "
     "stderr from the given offsets, with the offsets to pass next time (stdout_next, "
     "stderr_next) so that polling never misses or repeats output.",
     read_output_args, HINT_READ_ONLY, tool_sandbox_read_process_output, os_proc},
    {"sandbox_write_process_stdin", "Write to a background process's stdin",
     "Send bytes to a background process's standard input (a REPL, a prompt), and optionally "
     "close it (eof).",
     stdin_args, 0, tool_sandbox_write_process_stdin, os_stdin},
    {"sandbox_kill_process", "Signal a background process",
     "Send a signal (default KILL) to a background process and its process group. Signalling "
     "one that already ended forgets it (it leaves sandbox_list_processes).",
     kill_args, HINT_DESTRUCTIVE | HINT_IDEMPOTENT, tool_sandbox_kill_process, os_kill},
    {"sandbox_delete_file", "Delete a file in a sandbox",
     "Delete a file, or a directory (empty, or with everything in it when recursive is true).",
     delete_args, HINT_DESTRUCTIVE | HINT_IDEMPOTENT, tool_sandbox_delete_file, os_delete},
    {"sandbox_make_dir", "Create a directory in a sandbox",
     "Create a directory and any missing parents; an existing directory is fine.", mkdir_args,
     HINT_IDEMPOTENT, tool_sandbox_make_dir, os_mkdir},
    {"sandbox_move_file", "Move or rename a file in a sandbox",
     "Move or rename a file or directory within a sandbox (an existing file at the target is "
     "replaced).",
     move_args, HINT_DESTRUCTIVE, tool_sandbox_move_file, os_move},
    {"sandbox_list_ports", "List a sandbox's open ports",
     "List the ports of a sandbox opened with sandbox_open_port: URL, host:port and when each "
     "closes.",
     destroy_args, HINT_READ_ONLY, tool_sandbox_list_ports, os_ports},
    {"sandbox_close_port", "Close a sandbox port",
     "Close a port opened with sandbox_open_port now: its URL and host port stop answering.",
     close_port_args, HINT_DESTRUCTIVE | HINT_IDEMPOTENT, tool_sandbox_close_port, os_close},
};
#define N_TOOLS (sizeof(tools) / sizeof(tools[0]))

/* -------------------------------------------------------------- helpers */

int mcp_version_supported(const char *version)
{
    for (size_t i = 0; mcp_versions[i] != NULL; i++)
        if (!strcmp(version, mcp_versions[i]))
            return 1;
    return 0;
}

void mcp_session_init(struct mcp_session *s, const struct mcp_backend *backend)
{
    memset(s, 0, sizeof(*s));
    s->backend = backend;
    snprintf(s->version, sizeof(s->version), "%s", MCP_VERSION_LATEST);
}

/* The config of the server the backend reaches, or NULL. */
static const struct nb_conf *session_conf(const struct mcp_session *s)
{
    return s->backend != NULL ? s->backend->conf : NULL;
}

/* Where relative file paths start: the config's workspace, or the usual one. */
static const char *session_workspace(const struct mcp_session *s)
{
    const struct nb_conf *c = session_conf(s);
    return c != NULL && c->workspace[0] ? c->workspace : MCP_WORKSPACE;
}

/* sandbox_open_port's duration when none is given: ours, within the server's cap. */
static unsigned port_duration(const struct mcp_session *s)
{
    const struct nb_conf *c = session_conf(s);
    if (c != NULL && c->max_port_duration > 0 && c->max_port_duration < MCP_DEFAULT_PORT_DURATION)
        return c->max_port_duration;
    return MCP_DEFAULT_PORT_DURATION;
}

/* ------------------------------------------------------- descriptions */

/* "1800 seconds (30 minutes)": the API's unit, and one a reader takes in. */
static void put_seconds(struct nb_buf *b, unsigned long long secs)
{
    /* clang-format off */
    static const struct { unsigned long long secs; const char *one, *many; } units[] = {
        {86400, "day", "days"}, {3600, "hour", "hours"}, {60, "minute", "minutes"},
    };
    /* clang-format on */

    nb_buf_printf(b, "%llu second%s", secs, secs == 1 ? "" : "s");
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (secs >= units[i].secs && secs % units[i].secs == 0) {
            unsigned long long n = secs / units[i].secs;
            nb_buf_printf(b, " (%llu %s)", n, n == 1 ? units[i].one : units[i].many);
            break;
        }
    }
}

/* "256 MiB" when a whole number of a unit, else bytes. */
static void put_bytes(struct nb_buf *b, unsigned long long bytes)
{
    static const char *const units[] = {"GiB", "MiB", "KiB"};

    for (size_t i = 0; i < 3; i++) {
        unsigned long long unit = 1ULL << (10 * (3 - i));
        if (bytes >= unit && bytes % unit == 0) {
            nb_buf_printf(b, "%llu %s", bytes / unit, units[i]);
            return;
        }
    }
    nb_buf_printf(b, "%llu bytes", bytes);
}

/*
 * The value of the setting name[0..len) in c, appended to b. Returns -1 for
 * a name this table does not know (a template's typo: tests catch it, as
 * the "${" it leaves in tools/list).
 */
static int put_setting(struct nb_buf *b, const char *name, size_t len, const struct nb_conf *c,
                       const struct mcp_session *s)
{
#define IS(n) (len == sizeof(n) - 1 && !memcmp(name, n, len))
    if (IS("default_ttl"))
        put_seconds(b, c->default_ttl);
    else if (IS("max_ttl"))
        put_seconds(b, c->max_ttl);
    else if (IS("exec_timeout"))
        put_seconds(b, c->exec_timeout);
    else if (IS("exec_timeout_max"))
        put_seconds(b, c->exec_timeout_max);
    else if (IS("max_pause"))
        put_seconds(b, c->max_pause);
    else if (IS("max_port_duration"))
        put_seconds(b, c->max_port_duration);
    else if (IS("port_duration"))
        put_seconds(b, port_duration(s));
    else if (IS("memory"))
        put_bytes(b, c->memory);
    else if (IS("max_output"))
        put_bytes(b, c->max_output);
    else if (IS("cpus"))
        nb_buf_printf(b, "%g", (double)c->nano_cpus / 1e9);
    else if (IS("pids"))
        nb_buf_printf(b, "%lld", (long long)c->pids);
    else if (IS("image"))
        nb_buf_printf(b, "%s", c->n_images > 0 ? c->images[0] : "none");
    else if (IS("images")) {
        for (unsigned i = 0; i < c->n_images && i < NB_CONF_MAX_IMAGES; i++)
            nb_buf_printf(b, "%s%s", i > 0 ? ", " : "", c->images[i]);
    } else if (IS("workspace"))
        nb_buf_printf(b, "%s", session_workspace(s));
    else if (IS("allow_bridge"))
        nb_buf_printf(b, "%s",
                      c->allow_bridge ? "this server allows it" : "this server does not allow it");
    else
        return -1;
    return 0;
#undef IS
}

/*
 * Append template tmpl with each ${name} filled in from the session's
 * config; without one, with the text after '|' in ${name|text}, or "the
 * server's NAME setting". The result is capped at MCP_MAX_DESCRIPTION.
 */
static void put_description(struct nb_buf *b, const char *tmpl, const struct mcp_session *s)
{
    const struct nb_conf *c = session_conf(s);
    const char *p = tmpl, *open;

    while ((open = strstr(p, "${")) != NULL) {
        const char *name = open + 2, *close = strchr(name, '}');
        size_t nlen;
        const char *bar;

        if (close == NULL)
            break;
        bar = memchr(name, '|', (size_t)(close - name));
        nlen = (size_t)((bar != NULL ? bar : close) - name);
        nb_buf_append(b, p, (size_t)(open - p));
        if (c != NULL) {
            if (put_setting(b, name, nlen, c, s) != 0)
                nb_buf_append(b, open, (size_t)(close + 1 - open)); /* leave it visible */
        } else if (bar != NULL) {
            nb_buf_append(b, bar + 1, (size_t)(close - bar - 1));
        } else {
            nb_buf_printf(b, "the server's %.*s setting", (int)nlen, name);
        }
        p = close + 1;
    }
    nb_buf_append(b, p, strlen(p));
}

/* "key": the template filled in, as a JSON string. */
static void gen_description(yajl_gen g, const char *key, const char *tmpl,
                            const struct mcp_session *s)
{
    struct nb_buf d;

    nb_buf_init(&d, MCP_MAX_DESCRIPTION);
    put_description(&d, tmpl, s);
    nb_json_cstr(g, key);
    nb_json_str(g, d.data != NULL ? d.data : "", d.len);
    nb_buf_free(&d);
}

/* Protocol versions compare as dates. */
static int version_at_least(const struct mcp_session *s, const char *v)
{
    return strcmp(s->version, v) >= 0;
}

/* Member key of object o, or NULL. */
static yajl_val member(yajl_val o, const char *key)
{
    if (o == NULL || !YAJL_IS_OBJECT(o))
        return NULL;
    for (size_t i = 0; i < o->u.object.len; i++)
        if (!strcmp(o->u.object.keys[i], key))
            return o->u.object.values[i];
    return NULL;
}

static const char *member_str(yajl_val o, const char *key)
{
    return nb_json_string(member(o, key));
}

/* Whether len bytes at p are UTF-8 text a model can read as is. */
static int is_text(const char *p, size_t len)
{
    size_t fixed_len;
    char *fixed;
    int ok;

    if (memchr(p, '\0', len) != NULL)
        return 0;
    fixed = nb_utf8_repair(p, len, &fixed_len);
    ok = fixed_len == len; /* each bad byte grows to U+FFFD's 3 */
    free(fixed);
    return ok;
}

/* v as text: strings as they are, numbers as the API wrote them. */
static void put_value(struct nb_buf *b, yajl_val v)
{
    if (v == NULL || YAJL_IS_NULL(v)) {
        nb_buf_printf(b, "null");
    } else if (YAJL_IS_STRING(v)) {
        nb_buf_printf(b, "%s", v->u.string);
    } else if (YAJL_IS_NUMBER(v)) {
        nb_buf_printf(b, "%s", YAJL_GET_NUMBER(v));
    } else if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v)) {
        nb_buf_printf(b, "%s", YAJL_IS_TRUE(v) ? "true" : "false");
    } else {
        yajl_gen g = nb_json_gen();
        char *text;
        nb_json_tree(g, v);
        text = nb_json_gen_take(g);
        nb_buf_printf(b, "%s", text);
        free(text);
    }
}

/* "key: value\n" for each of keys present in o. */
static void put_fields(struct nb_buf *b, yajl_val o, const char *const *keys)
{
    for (; *keys != NULL; keys++) {
        yajl_val v = member(o, *keys);
        if (v == NULL)
            continue;
        nb_buf_printf(b, "%s: ", *keys);
        put_value(b, v);
        nb_buf_printf(b, "\n");
    }
}

/* Unix seconds as "2025-11-29 18:40:12 UTC". */
static void put_time(struct nb_buf *b, yajl_val v)
{
    struct tm tm;
    time_t when;
    char text[64];

    if (v == NULL || !YAJL_IS_INTEGER(v)) {
        put_value(b, v);
        return;
    }
    when = (time_t)YAJL_GET_INTEGER(v);
    if (gmtime_r(&when, &tm) == NULL ||
        strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) {
        put_value(b, v);
        return;
    }
    nb_buf_printf(b, "%s", text);
}

/* ------------------------------------------------------------ tool calls */

static yajl_val arg(struct tool_call *t, const char *name)
{
    for (size_t i = 0; t->tool->args[i].name != NULL; i++)
        if (!strcmp(t->tool->args[i].name, name))
            return t->f[i].val;
    return NULL;
}

static const char *arg_str(struct tool_call *t, const char *name)
{
    return nb_json_string(arg(t, name));
}

static void tool_fail(struct tool_call *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void items_free(struct tool_call *t)
{
    for (size_t i = 0; i < t->n_items; i++)
        nb_buf_free(&t->items[i].data);
    free(t->items);
    t->items = NULL;
    t->n_items = 0;
}

/* Make t an isError result saying why. */
static void tool_fail(struct tool_call *t, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    nb_buf_reset(&t->text);
    nb_buf_printf(&t->text, "%s", msg);
    items_free(t);
    t->is_error = 1;
    yajl_tree_free(t->structured);
    t->structured = NULL;
}

static struct content_item *item_push(struct tool_call *t, const char *mime)
{
    struct content_item *it;

    t->items = nb_xrealloc(t->items, (t->n_items + 1) * sizeof(*t->items));
    it = &t->items[t->n_items++];
    it->mime = mime;
    nb_buf_init(&it->data, MCP_MAX_TEXT);
    return it;
}

/* Where the next text goes: content[0] until an image came, then the text item after it. */
static struct nb_buf *text_out(struct tool_call *t)
{
    if (t->n_items == 0)
        return &t->text;
    if (t->items[t->n_items - 1].mime == NULL)
        return &t->items[t->n_items - 1].data;
    return &item_push(t, NULL)->data;
}

/* An image content item: b64 as the API gave it, without the line breaks some kernels add. */
static void add_image(struct tool_call *t, const char *mime, const char *b64)
{
    struct content_item *it = item_push(t, mime);

    while (*b64 != '\0') {
        size_t n = strcspn(b64, "\r\n \t");
        nb_buf_append(&it->data, b64, n);
        b64 += n;
        b64 += strspn(b64, "\r\n \t");
    }
}

/* An API call's outcome. */
struct api_answer {
    long status;
    struct nb_buf body;
    yajl_val json; /* body parsed when it is JSON, else NULL */
};

static void api_answer_free(struct api_answer *a)
{
    yajl_tree_free(a->json);
    a->json = NULL;
    nb_buf_free(&a->body);
}

/*
 * One API call for t. Returns 0 for a 2xx answer; otherwise -1 after making
 * t an isError result with the API's message (or why no answer came).
 */
static int watch_tick(void *arg, long long done, long long total);

/*
 * One API call of tool call t. A long call's (a progressToken, outside
 * exec_watched's polling) is watched: the backend ticks while it waits, so
 * the client gets progress and a cancellation drops the call.
 */
static int api_call(struct tool_call *t, const char *method, const char *path, const char *body,
                    size_t body_len, const char *content_type, struct api_answer *a)
{
    const struct mcp_backend *be = t->s->backend;
    struct mcp_watch w = {watch_tick, &t->watch};
    int watched = t->progress_token != NULL && !t->polling && be != NULL && be->notify != NULL;
    char err[256];

    memset(a, 0, sizeof(*a));
    nb_buf_init(&a->body, MCP_MAX_ANSWER);
    if (be == NULL || be->call == NULL) {
        tool_fail(t, "internal error: this MCP server has no API backend");
        return -1;
    }
    if (be->call(be->ctx, method, path, body, body_len, content_type, &a->status, &a->body,
                 watched ? &w : NULL) != 0) {
        tool_fail(t, "%s", a->body.len > 0 ? a->body.data : "no answer from the nanobox server");
        return -1;
    }
    if (a->body.len > 0 &&
        nb_json_parse(a->body.data, a->body.len, MCP_MAX_DEPTH, &a->json, err, sizeof(err)) != 0)
        a->json = NULL;
    if (a->status / 100 == 2)
        return 0;

    if (member(a->json, "error") != NULL) {
        const char *code = member_str(a->json, "code");
        tool_fail(t, "error: %s (code %s, HTTP %ld)", member_str(a->json, "error"),
                  code[0] ? code : "none", a->status);
        if (a->status == 404 && !strcmp(code, "no_route"))
            nb_buf_printf(&t->text,
                          "\nThis nanobox server does not serve %s yet, so %s "
                          "cannot work with it.",
                          method, t->tool->name);
    } else {
        tool_fail(t,
                  "error: the nanobox server answered HTTP %ld without a nanobox error "
                  "message",
                  a->status);
    }
    return -1;
}

/* "/sandbox/ID" + suffix, the id %-encoded. */
static void sandbox_path(struct nb_buf *p, struct tool_call *t, const char *suffix)
{
    nb_buf_init(p, 8192);
    nb_buf_printf(p, "/sandbox/");
    nb_url_escape_path(p, arg_str(t, "sandbox_id"));
    nb_buf_printf(p, "%s", suffix);
}

/* ".../files?path=P" (the API takes a relative P from the workspace). */
static void files_path(struct nb_buf *p, struct tool_call *t, const char *path)
{
    sandbox_path(p, t, "/files?path=");
    nb_url_escape_path(p, path);
}

/* A request body holding the tool's given arguments, but the one named skip. */
static char *body_from_args(struct tool_call *t, const char *skip)
{
    yajl_gen g = nb_json_gen();

    yajl_gen_map_open(g);
    for (size_t i = 0; t->tool->args[i].name != NULL; i++) {
        if (t->f[i].val == NULL || (skip != NULL && !strcmp(skip, t->tool->args[i].name)))
            continue;
        nb_json_cstr(g, t->tool->args[i].name);
        nb_json_tree(g, t->f[i].val);
    }
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

/* Hand the parsed answer over as structuredContent. */
static void keep_structured(struct tool_call *t, struct api_answer *a, const char *omit)
{
    if (a->json == NULL || !YAJL_IS_OBJECT(a->json))
        return;
    yajl_tree_free(t->structured);
    t->structured = a->json;
    t->structured_omit = omit;
    a->json = NULL;
}

/* structuredContent built here: the object g generated. */
static void set_structured(struct tool_call *t, yajl_gen g)
{
    char *text = nb_json_gen_take(g), err[128];
    yajl_val v = NULL;

    if (nb_json_parse(text, strlen(text), MCP_MAX_DEPTH, &v, err, sizeof(err)) == 0) {
        yajl_tree_free(t->structured);
        t->structured = v;
        t->structured_omit = NULL;
    }
    free(text);
}

/* A size for a person: "812 bytes", "256 MiB", "1.5 KiB". */
static void put_size(struct nb_buf *b, unsigned long long bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    double x;
    size_t i;

    if (bytes < 1024) {
        nb_buf_printf(b, "%llu byte%s", bytes, bytes == 1 ? "" : "s");
        return;
    }
    x = (double)bytes / 1024.0;
    for (i = 0; x >= 1024.0 && i + 1 < sizeof(units) / sizeof(units[0]); i++)
        x /= 1024.0;
    if (x == (double)(long long)x)
        nb_buf_printf(b, "%lld %s", (long long)x, units[i]);
    else
        nb_buf_printf(b, "%.1f %s", x, units[i]);
}

/* The API's byte count v as a size; anything else as it came. */
static void put_size_val(struct nb_buf *b, yajl_val v)
{
    if (v != NULL && YAJL_IS_INTEGER(v) && YAJL_GET_INTEGER(v) >= 0)
        put_size(b, (unsigned long long)YAJL_GET_INTEGER(v));
    else
        put_value(b, v);
}

/* exec's and run's answer as text (both have the same fields). */
static void put_exec_result(struct tool_call *t, yajl_val r)
{
    static const char *const flags[] = {"exit_code", "timed_out", "truncated", NULL};
    yajl_val out = member(r, "stdout"), err = member(r, "stderr");

    put_fields(&t->text, r, flags);
    nb_buf_printf(&t->text, "--- stdout ---\n%s", nb_json_string(out));
    if (YAJL_IS_STRING(out) && out->u.string[0] != '\0' &&
        out->u.string[strlen(out->u.string) - 1] != '\n')
        nb_buf_printf(&t->text, "\n");
    nb_buf_printf(&t->text, "--- stderr ---\n%s", nb_json_string(err));
}

static void tool_sandbox_create(struct tool_call *t)
{
    static const char *const keys[] = {"image", "status", "network", NULL};
    static const char *const keys2[] = {"cpus", "pids", "ttl", NULL};
    struct api_answer a;
    char *body = body_from_args(t, NULL);

    if (api_call(t, "POST", "/sandbox", body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Created sandbox %s.\n", member_str(a.json, "sandboxId"));
        nb_buf_printf(&t->text, "sandbox_id: %s\n", member_str(a.json, "sandboxId"));
        put_fields(&t->text, a.json, keys);
        nb_buf_printf(&t->text, "memory: ");
        put_size_val(&t->text, member(a.json, "memory"));
        nb_buf_printf(&t->text, "\n");
        put_fields(&t->text, a.json, keys2);
        nb_buf_printf(&t->text, "expires_at: ");
        put_time(&t->text, member(a.json, "expires_at"));
        nb_buf_printf(&t->text, "\nmetadata: ");
        put_value(&t->text, member(a.json, "metadata"));
        nb_buf_printf(&t->text, "\nCommands run in %s, which keeps its files between calls.",
                      session_workspace(t->s));
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    free(body);
}

/* ------------------------------------------------------- long calls */

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Whether t was cancelled (notifications/cancelled, or the client left). */
static int call_cancelled(struct tool_call *t)
{
    const struct mcp_backend *be = t->s->backend;

    if (!t->cancelled && be->is_cancelled != NULL && t->id_json != NULL &&
        be->is_cancelled(be->ctx, t->id_json))
        t->cancelled = 1;
    return t->cancelled;
}

/* notifications/progress: progress of total (0: none), and msg; a client that is gone
 * cancels t. */
static void send_progress(struct tool_call *t, long long progress, double total, const char *msg)
{
    const struct mcp_backend *be = t->s->backend;
    yajl_gen g = nb_json_gen();
    char *text;

    yajl_gen_map_open(g);
    nb_json_kv_str(g, "jsonrpc", "2.0");
    nb_json_kv_str(g, "method", "notifications/progress");
    nb_json_cstr(g, "params");
    yajl_gen_map_open(g);
    nb_json_cstr(g, "progressToken");
    nb_json_tree(g, t->progress_token);
    nb_json_kv_int(g, "progress", progress);
    if (total > 0) {
        nb_json_cstr(g, "total");
        yajl_gen_double(g, total);
    }
    nb_json_kv_str(g, "message", msg);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    text = nb_json_gen_take(g);
    if (be->notify(be->ctx, text, strlen(text)) != 0)
        t->cancelled = 1;
    free(text);
}

/* Start t's watch: progress in seconds of total (0: unknown), or with moved
 * ("sent", "received") in bytes of total. */
static void watch_start(struct tool_call *t, double total, const char *ends, const char *moved)
{
    struct call_watch *w = &t->watch;

    w->t = t;
    w->start = nb_clock_mono_ms();
    w->next = moved != NULL ? w->start : w->start + MCP_PROGRESS_EVERY_MS;
    w->total = total;
    w->ends = ends;
    w->moved = moved;
    w->done = 0;
}

/* A transfer's bytes as progress, when they grew (progress must increase). */
static void watch_bytes(struct call_watch *w, long long done, long long total)
{
    struct nb_buf msg;

    if (done <= w->done || w->t->progress_token == NULL || w->t->s->backend->notify == NULL)
        return;
    if (total > 0)
        w->total = (double)total;
    nb_buf_init(&msg, 256);
    nb_buf_printf(&msg, "%s: ", w->t->tool->name);
    put_size(&msg, (unsigned long long)done);
    if (w->total > 0) {
        nb_buf_printf(&msg, " of ");
        put_size(&msg, (unsigned long long)w->total);
    }
    nb_buf_printf(&msg, " %s", w->moved);
    send_progress(w->t, done, w->total, msg.data);
    nb_buf_free(&msg);
    w->done = done;
}

/*
 * The tick of t's watch (struct mcp_watch's, and the watched exec's once
 * per poll): a progress when one is due, then 1 when the call is to stop
 * (cancelled, or the client is gone).
 */
static int watch_tick(void *arg, long long done, long long total)
{
    struct call_watch *w = arg;
    struct tool_call *t = w->t;
    int64_t now = nb_clock_mono_ms();
    char msg[192];

    if (call_cancelled(t))
        return 1;
    if (t->progress_token == NULL || t->s->backend->notify == NULL)
        return 0;
    if (w->moved != NULL) {
        /* the last bytes at once: a progress next to the reply may be lost (the
         * TypeScript SDK forgets a request's progress handler with its reply) */
        if (done >= 0 && (now >= w->next || done == total)) {
            watch_bytes(w, done, total);
            w->next = now + MCP_BYTES_EVERY_MS;
        }
    } else if (now >= w->next) {
        long long secs = (long long)((now - w->start) / 1000);
        if (w->total > 0)
            snprintf(msg, sizeof(msg), "%s: running for %lld s (%s at %g s)", t->tool->name, secs,
                     w->ends, w->total);
        else
            snprintf(msg, sizeof(msg), "%s: running for %lld s", t->tool->name, secs);
        send_progress(t, secs, w->total, msg);
        w->next += MCP_PROGRESS_EVERY_MS;
    }
    return t->cancelled;
}

/* Append s to b within *room bytes; 1 when some of it did not fit. */
static int keep_output(struct nb_buf *b, const char *s, size_t *room)
{
    size_t n = strlen(s), take = n < *room ? n : *room;

    nb_buf_append(b, s, take);
    *room -= take;
    return take < n;
}

/*
 * sandbox_exec with a progressToken: the command starts in the background
 * (POST exec, "background": true) and is polled until it ends
 * (GET .../processes/{pid} from the offsets the last answer gave), with a
 * notifications/progress every MCP_PROGRESS_EVERY_MS. The timeout is
 * enforced here (DELETE .../processes/{pid}?signal=KILL), as on cancellation.
 * The answer has the foreground exec's fields but output (stdout and
 * stderr interleaved) and oom_killed; its entry is forgotten at the end.
 */
static void exec_watched(struct tool_call *t)
{
    const struct nb_conf *c = session_conf(t->s);
    yajl_val targ = arg(t, "timeout");
    double timeout = targ != NULL ? nb_json_double(targ)
                     : c != NULL  ? c->exec_timeout
                                  : MCP_EXEC_TIMEOUT;
    size_t room = c != NULL && c->max_output > 0 ? (size_t)c->max_output : MCP_MAX_OUTPUT;
    int64_t start = nb_clock_mono_ms(), deadline = start + (int64_t)(timeout * 1000.0), wait = 20,
            killed_at = 0;
    long long out_off = 0, err_off = 0, exit_code = -1, pid;
    int timed_out = 0, truncated = 0, killed = 0, ended = 0, rc;
    struct nb_buf path, proc, out, err;
    struct api_answer a;
    yajl_gen g = nb_json_gen();
    char *body;

    yajl_gen_map_open(g);
    for (size_t i = 0; t->tool->args[i].name != NULL; i++) {
        if (t->f[i].val == NULL || !strcmp(t->tool->args[i].name, "sandbox_id"))
            continue;
        nb_json_cstr(g, t->tool->args[i].name);
        nb_json_tree(g, t->f[i].val);
    }
    nb_json_kv_bool(g, "background", 1);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    t->polling = 1; /* this loop ticks the watch itself */
    watch_start(t, timeout, "killed", NULL);
    sandbox_path(&path, t, "/exec");
    nb_buf_init(&out, MCP_MAX_TEXT);
    nb_buf_init(&err, MCP_MAX_TEXT);
    nb_buf_init(&proc, 8192);
    if (api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) != 0) {
        api_answer_free(&a);
        goto out;
    }
    pid = nb_json_int(member(a.json, "pid"));
    api_answer_free(&a);
    sandbox_path(&proc, t, "/processes/");
    nb_buf_printf(&proc, "%lld", pid);

    while (!ended) {
        int64_t now;
        yajl_val st;

        nb_buf_reset(&path);
        nb_buf_printf(&path, "%s?stdout_offset=%lld&stderr_offset=%lld", proc.data, out_off,
                      err_off);
        if (api_call(t, "GET", path.data, NULL, 0, NULL, &a) != 0) {
            api_answer_free(&a);
            /* a cancellation may cut the poll short (stdio drops a cancelled call's
             * connection): the command is killed all the same */
            if (killed || !call_cancelled(t))
                break;
        } else {
            /* output older than the offset asked for is gone: the agent keeps the last MiB */
            truncated |= nb_json_int(member(a.json, "stdout_offset")) > out_off ||
                         nb_json_int(member(a.json, "stderr_offset")) > err_off;
            truncated |= keep_output(&out, member_str(a.json, "stdout"), &room);
            truncated |= keep_output(&err, member_str(a.json, "stderr"), &room);
            out_off = nb_json_int(member(a.json, "stdout_next"));
            err_off = nb_json_int(member(a.json, "stderr_next"));
            st = member(a.json, "running");
            ended = st != NULL && YAJL_IS_FALSE(st);
            if (ended)
                exit_code = member(a.json, "exit_code") != NULL &&
                                    YAJL_IS_INTEGER(member(a.json, "exit_code"))
                                ? YAJL_GET_INTEGER(member(a.json, "exit_code"))
                                : -1;
            api_answer_free(&a);
            if (ended)
                break;
        }
        now = nb_clock_mono_ms();
        if (!killed && (call_cancelled(t) || now >= deadline)) {
            timed_out = !t->cancelled;
            killed = 1;
            killed_at = now;
            nb_buf_reset(&path);
            nb_buf_printf(&path, "%s?signal=KILL", proc.data);
            rc = api_call(t, "DELETE", path.data, NULL, 0, NULL, &a);
            api_answer_free(&a);
            if (rc != 0)
                break;
            wait = 20;
        } else if (killed && now >= killed_at + 10000) {
            break; /* killed 10 s ago and still listed as running: answer what we have */
        }
        if (!killed && now >= t->watch.next && watch_tick(&t->watch, -1, -1))
            continue; /* a client gone is a cancellation: kill at once */
        sleep_ms(wait);
        wait = wait * 2 > MCP_POLL_MAX_MS ? MCP_POLL_MAX_MS : wait * 2;
    }
    if (ended || killed) { /* forget the entry (an ended process's DELETE does); best effort */
        const struct mcp_backend *be = t->s->backend;
        struct nb_buf ignored;
        long status;
        nb_buf_init(&ignored, 65536);
        be->call(be->ctx, "DELETE", proc.data, NULL, 0, NULL, &status, &ignored, NULL);
        nb_buf_free(&ignored);
    }
    if (t->is_error || t->cancelled)
        goto out;

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "exit_code", timed_out ? 137 : exit_code);
    nb_json_kv_bool(g, "timed_out", timed_out);
    nb_json_kv_bool(g, "truncated", truncated);
    nb_json_cstr(g, "stdout");
    nb_json_str(g, out.data != NULL ? out.data : "", out.len);
    nb_json_cstr(g, "stderr");
    nb_json_str(g, err.data != NULL ? err.data : "", err.len);
    nb_json_kv_int(g, "duration_ms", nb_clock_mono_ms() - start);
    nb_json_kv_int(g, "pid", pid);
    yajl_gen_map_close(g);
    set_structured(t, g);
    put_exec_result(t, t->structured);
out:
    nb_buf_free(&proc);
    nb_buf_free(&out);
    nb_buf_free(&err);
    nb_buf_free(&path);
    free(body);
}

static void tool_sandbox_exec(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    char *body;

    if (t->progress_token != NULL) {
        exec_watched(t);
        return;
    }
    body = body_from_args(t, "sandbox_id");

    sandbox_path(&path, t, "/exec");
    if (api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        put_exec_result(t, a.json);
        keep_structured(t, &a, "output"); /* stdout + stderr again */
    }
    api_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

/* text, ended by a newline unless empty */
static void put_block(struct nb_buf *b, const char *text)
{
    size_t n = strlen(text);

    nb_buf_append(b, text, n);
    if (n > 0 && text[n - 1] != '\n')
        nb_buf_append(b, "\n", 1);
}

/* The MIME types of a result that become MCP image content. */
static const char *const image_mimes[] = {"image/png", "image/jpeg", NULL};

/* A chart's JSON up to this many bytes goes out whole; a bigger one as its brief. */
#define MCP_CHART_TEXT 4096

/*
 * A chart with each element's "points" as "n_points" (their count), sub-charts
 * alike: what the chart is and holds, in a few hundred bytes.
 */
static void chart_brief(yajl_gen g, yajl_val v)
{
    if (!YAJL_IS_OBJECT(v)) {
        nb_json_tree(g, v);
        return;
    }
    yajl_gen_map_open(g);
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *key = v->u.object.keys[i];
        yajl_val x = v->u.object.values[i];
        if (!strcmp(key, "points") && YAJL_IS_ARRAY(x)) {
            nb_json_kv_int(g, "n_points", (long long)x->u.array.len);
        } else if (!strcmp(key, "elements") && YAJL_IS_ARRAY(x)) {
            nb_json_cstr(g, key);
            yajl_gen_array_open(g);
            for (size_t k = 0; k < x->u.array.len; k++)
                chart_brief(g, x->u.array.values[k]);
            yajl_gen_array_close(g);
        } else {
            nb_json_cstr(g, key);
            nb_json_tree(g, x);
        }
    }
    yajl_gen_map_close(g);
}

/* A figure's chart (what it plots, as data) as text: whole when small, else its brief. */
static void put_chart(struct tool_call *t, yajl_val chart)
{
    yajl_gen g = nb_json_gen();
    char *text;

    nb_json_tree(g, chart);
    text = nb_json_gen_take(g);
    if (strlen(text) <= MCP_CHART_TEXT) {
        nb_buf_printf(text_out(t), "--- chart ---\n");
    } else {
        free(text);
        g = nb_json_gen();
        chart_brief(g, chart);
        text = nb_json_gen_take(g);
        nb_buf_printf(text_out(t), "--- chart (points counted; in full in the structured "
                                   "result) ---\n");
    }
    put_block(text_out(t), text);
    free(text);
}

/*
 * One result of a code run ({"is_main_result", "data": {MIME: value},
 * "chart"?}): its text/plain as text; without one, the first other text
 * form, labelled with its type (so HTML, a pandas table, reads as HTML); a
 * figure's chart as JSON; each PNG or JPEG as an image item.
 */
static void put_code_result(struct tool_call *t, yajl_val res)
{
    static const char *const text_mimes[] = {"text/markdown",    "text/html",     "text/latex",
                                             "application/json", "image/svg+xml", NULL};
    yajl_val data = member(res, "data"), plain = member(data, "text/plain");
    const char *label = YAJL_IS_TRUE(member(res, "is_main_result")) ? "result" : "display";
    int images = 0;
    size_t i;

    if (data == NULL || !YAJL_IS_OBJECT(data))
        return;
    for (i = 0; image_mimes[i] != NULL; i++)
        images += YAJL_IS_STRING(member(data, image_mimes[i]));
    for (i = 0; text_mimes[i] != NULL && member(data, text_mimes[i]) == NULL; i++)
        ;
    if (images > 0 && text_mimes[i] != NULL && !strcmp(text_mimes[i], "image/svg+xml"))
        i++; /* the image says it better than its SVG source */
    if (YAJL_IS_STRING(plain)) {
        nb_buf_printf(text_out(t), "--- %s ---\n", label);
        put_block(text_out(t), plain->u.string);
    } else if (text_mimes[i] != NULL) {
        struct nb_buf v;
        nb_buf_init(&v, MCP_MAX_TEXT);
        put_value(&v, member(data, text_mimes[i]));
        nb_buf_printf(text_out(t), "--- %s (%s) ---\n", label, text_mimes[i]);
        put_block(text_out(t), v.data != NULL ? v.data : "");
        nb_buf_free(&v);
    } else if (images == 0) {
        nb_buf_printf(text_out(t), "--- %s ---\n(no text form; its types:", label);
        for (size_t k = 0; k < data->u.object.len; k++)
            nb_buf_printf(text_out(t), " %s", data->u.object.keys[k]);
        nb_buf_printf(text_out(t), ")\n");
    }
    if (member(res, "chart") != NULL && YAJL_IS_OBJECT(member(res, "chart")))
        put_chart(t, member(res, "chart"));
    for (i = 0; image_mimes[i] != NULL; i++) {
        yajl_val img = member(data, image_mimes[i]);
        if (YAJL_IS_STRING(img))
            add_image(t, image_mimes[i], img->u.string);
    }
}

/* The collected answer of POST /sandbox/{id}/code: text, images, and the error if any. */
static void put_code_answer(struct tool_call *t, yajl_val r)
{
    static const char *const keys[] = {"status", "context", "language", "execution_count", NULL};
    const char *out = member_str(r, "stdout"), *err = member_str(r, "stderr");
    yajl_val results = member(r, "results"), error = member(r, "error");
    int any = 0;

    put_fields(&t->text, r, keys);
    if (YAJL_IS_TRUE(member(r, "timed_out")))
        nb_buf_printf(&t->text, "timed_out: true (the code was interrupted)\n");
    if (YAJL_IS_TRUE(member(r, "truncated")))
        nb_buf_printf(&t->text, "truncated: true (output past the server's cap was dropped)\n");
    if (YAJL_IS_TRUE(member(r, "kernel_restarted")))
        nb_buf_printf(&t->text, "kernel_restarted: true (the session's kernel had died: a new one "
                                "ran this code, and what earlier calls defined is gone)\n");
    if (out[0] != '\0') {
        nb_buf_printf(&t->text, "--- stdout ---\n");
        put_block(&t->text, out);
        any = 1;
    }
    if (err[0] != '\0') {
        nb_buf_printf(&t->text, "--- stderr ---\n");
        put_block(&t->text, err);
        any = 1;
    }
    for (size_t i = 0; results != NULL && YAJL_IS_ARRAY(results) && i < results->u.array.len; i++) {
        put_code_result(t, results->u.array.values[i]);
        any = 1;
    }
    if (error != NULL && YAJL_IS_OBJECT(error)) {
        const char *tb = member_str(error, "traceback");
        nb_buf_printf(text_out(t), "--- error ---\n%s: %s\n", member_str(error, "name"),
                      member_str(error, "value"));
        put_block(text_out(t), tb);
        t->is_error = 1; /* the code raised: the model reads why */
        any = 1;
    }
    if (!any)
        nb_buf_printf(&t->text, "(no output)\n");
}

/* Remove member key from object o, if there. */
static void drop_member(yajl_val o, const char *key)
{
    for (size_t i = 0; o != NULL && YAJL_IS_OBJECT(o) && i < o->u.object.len; i++) {
        size_t after = o->u.object.len - i - 1;
        char *owned; /* yajl allocated the key: const only to its readers */
        if (strcmp(o->u.object.keys[i], key) != 0)
            continue;
        memcpy(&owned, &o->u.object.keys[i], sizeof(owned));
        free(owned);
        yajl_tree_free(o->u.object.values[i]);
        memmove(&o->u.object.keys[i], &o->u.object.keys[i + 1], after * sizeof(char *));
        memmove(&o->u.object.values[i], &o->u.object.values[i + 1], after * sizeof(yajl_val));
        o->u.object.len--;
        return;
    }
}

/* The timeout a code run gets: its argument, else the config's; 0 when unknown (stdio). */
static double code_timeout(struct tool_call *t)
{
    const struct nb_conf *c = session_conf(t->s);
    return arg(t, "timeout") != NULL ? nb_json_double(arg(t, "timeout"))
           : c != NULL               ? c->exec_timeout
                                     : 0;
}

/* run_code with a sandbox_id: a cell of the sandbox's session (POST /sandbox/{id}/code). */
static void run_in_sandbox(struct tool_call *t)
{
    const char *lang = arg(t, "language") != NULL ? arg_str(t, "language") : NULL;
    struct api_answer a;
    struct nb_buf path;
    yajl_val results;
    yajl_gen g;
    char *body;

    if (arg(t, "stdin") != NULL) {
        tool_fail(t, "error: stdin is for a one-off run_code (without sandbox_id); in a session, "
                     "put the data in the code or in a file (sandbox_write_file)");
        return;
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "code", arg_str(t, "code"));
    if (arg(t, "context") != NULL)
        nb_json_kv_str(g, "context", arg_str(t, "context"));
    if (lang != NULL) /* a session's shell is bash */
        nb_json_kv_str(g, "language", !strcmp(lang, "sh") ? "bash" : lang);
    if (arg(t, "timeout") != NULL) {
        nb_json_cstr(g, "timeout");
        nb_json_tree(g, arg(t, "timeout"));
    }
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    watch_start(t, code_timeout(t), "interrupted", NULL);
    sandbox_path(&path, t, "/code");
    if (api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        put_code_answer(t, a.json);
        /* the images are content items already: not twice in the reply */
        results = member(a.json, "results");
        for (size_t i = 0; results != NULL && YAJL_IS_ARRAY(results) && i < results->u.array.len;
             i++)
            for (size_t k = 0; image_mimes[k] != NULL; k++)
                drop_member(member(results->u.array.values[i], "data"), image_mimes[k]);
        keep_structured(t, &a, NULL);
    } else if (!strcmp(member_str(a.json, "code"), "no_kernel")) {
        nb_buf_printf(&t->text, "\nA session needs a sandbox created with image "
                                "nanobox-python:latest (sandbox_create); without sandbox_id, "
                                "run_code runs python or sh once.");
    } else if (!strcmp(member_str(a.json, "code"), "unknown_context")) {
        nb_buf_printf(&t->text, "\nLeave context out to use the language's own session.");
    }
    api_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

static void tool_run_code(struct tool_call *t)
{
    const char *lang = arg(t, "language") != NULL ? arg_str(t, "language") : "python";
    struct api_answer a;
    yajl_gen g;
    char *body;

    if (arg(t, "sandbox_id") != NULL) {
        run_in_sandbox(t);
        return;
    }
    if (arg(t, "context") != NULL) {
        tool_fail(t, "error: context names a session in a sandbox: give its sandbox_id too");
        return;
    }
    if (strcmp(lang, "python") != 0 && strcmp(lang, "sh") != 0) {
        tool_fail(t,
                  "error: a one-off run_code (without sandbox_id) runs python or sh; %s runs "
                  "in a sandbox's session: create one with sandbox_create (image "
                  "nanobox-python:latest) and pass its sandbox_id",
                  lang);
        return;
    }
    /* the one-off run, as POST /run takes it */
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "language", lang);
    nb_json_kv_str(g, "code", arg_str(t, "code"));
    if (arg(t, "timeout") != NULL) {
        nb_json_cstr(g, "timeout");
        nb_json_tree(g, arg(t, "timeout"));
    }
    if (arg(t, "stdin") != NULL)
        nb_json_kv_str(g, "stdin", arg_str(t, "stdin"));
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    watch_start(t, code_timeout(t), "killed", NULL);
    if (api_call(t, "POST", "/run", body, strlen(body), "application/json", &a) == 0) {
        put_exec_result(t, a.json);
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    free(body);
}

static void tool_sandbox_write_file(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path, data;
    const char *content = arg_str(t, "content"), *file = arg_str(t, "path");

    nb_buf_init(&data, MCP_MAX_MESSAGE);
    files_path(&path, t, file);
    if (!strcmp(arg_str(t, "encoding"), "base64")) {
        if (nb_base64_decode(&data, content, strlen(content)) != NB_OK) {
            tool_fail(t, "error: content is not valid base64");
            goto out;
        }
    } else {
        nb_buf_append(&data, content, strlen(content));
    }
    watch_start(t, (double)data.len, NULL, "sent");
    if (api_call(t, "PUT", path.data, data.len > 0 ? data.data : "", data.len,
                 "application/octet-stream", &a) == 0) {
        nb_buf_printf(&t->text, "Wrote ");
        put_size(&t->text, data.len);
        nb_buf_printf(&t->text, " to %s.",
                      YAJL_IS_STRING(member(a.json, "path")) ? member_str(a.json, "path") : file);
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
out:
    nb_buf_free(&data);
    nb_buf_free(&path);
}

/* A files answer that lists a directory: {"path":..., "entries":[...]}. */
static int is_listing(yajl_val j)
{
    yajl_val e = member(j, "entries");
    return e != NULL && YAJL_IS_ARRAY(e) && YAJL_IS_STRING(member(j, "path"));
}

static void put_listing(struct nb_buf *b, yajl_val j)
{
    yajl_val entries = member(j, "entries");
    size_t n = entries->u.array.len;

    nb_buf_printf(b, "%s: %zu entr%s\n", member_str(j, "path"), n, n == 1 ? "y" : "ies");
    if (n > 0)
        nb_buf_printf(b, "%-7s %10s  %-4s  %-23s  %s\n", "type", "size", "mode", "modified",
                      "name");
    for (size_t i = 0; i < n; i++) {
        yajl_val e = entries->u.array.values[i], mode = member(e, "mode");
        const char *type = member_str(e, "type");
        struct nb_buf size;

        nb_buf_init(&size, 64);
        put_size_val(&size, member(e, "size"));
        nb_buf_printf(b, "%-7s %10s  ", type, size.data != NULL ? size.data : "-");
        nb_buf_free(&size);
        if (mode != NULL && YAJL_IS_INTEGER(mode))
            nb_buf_printf(b, "%04llo", (unsigned long long)YAJL_GET_INTEGER(mode) & 07777u);
        else
            put_value(b, mode);
        nb_buf_printf(b, "  ");
        put_time(b, member(e, "mtime"));
        nb_buf_printf(b, "  %s%s\n", member_str(e, "name"), !strcmp(type, "dir") ? "/" : "");
    }
    if (YAJL_IS_TRUE(member(j, "truncated")))
        nb_buf_printf(b, "(the listing was cut short: the directory has more entries)\n");
}

static void tool_sandbox_read_file(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    const char *file = arg_str(t, "path");

    files_path(&path, t, file);
    watch_start(t, 0, NULL, "received");
    if (api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        int binary = a.body.len > 0 && !is_text(a.body.data, a.body.len);

        yajl_gen_map_open(g);
        nb_json_kv_str(g, "path", file);
        nb_json_kv_str(g, "type", is_listing(a.json) ? "dir" : "file");
        if (!is_listing(a.json)) {
            nb_json_kv_int(g, "size", (long long)a.body.len);
            nb_json_kv_bool(g, "binary", binary);
        }
        yajl_gen_map_close(g);
        set_structured(t, g);
        if (is_listing(a.json)) {
            nb_buf_printf(&t->text, "%s is a directory, not a file. ", file);
            put_listing(&t->text, a.json);
        } else if (a.body.len == 0) {
            nb_buf_printf(&t->text, "(%s is empty: 0 bytes)", file);
        } else if (!binary) {
            nb_buf_append(&t->text, a.body.data, a.body.len);
        } else {
            nb_buf_printf(&t->text, "%s is binary (", file);
            put_size(&t->text, a.body.len);
            nb_buf_printf(&t->text, ", not UTF-8 text); its content in base64:\n");
            nb_base64_encode(&t->text, a.body.data, a.body.len);
        }
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

static void tool_sandbox_list_files(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    const char *dir = arg(t, "path") != NULL ? arg_str(t, "path") : session_workspace(t->s);

    files_path(&path, t, dir);
    if (api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        if (is_listing(a.json)) {
            put_listing(&t->text, a.json);
            keep_structured(t, &a, NULL);
        } else {
            tool_fail(t, "error: %s is a file, not a directory: sandbox_read_file reads it", dir);
        }
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

static void tool_sandbox_open_port(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    yajl_val duration = arg(t, "duration");
    yajl_gen g = nb_json_gen();
    char *body;

    yajl_gen_map_open(g);
    nb_json_kv_int(g, "sandboxport", nb_json_int(arg(t, "port")));
    nb_json_kv_int(g, "duration", duration != NULL ? nb_json_int(duration) : port_duration(t->s));
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    sandbox_path(&path, t, "/ephemeralport");
    if (api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "url: %s\n", member_str(a.json, "url"));
        nb_buf_printf(&t->text, "tcp: %s:", member_str(a.json, "host"));
        put_value(&t->text, member(a.json, "hostport"));
        nb_buf_printf(&t->text, "\nsandboxport: ");
        put_value(&t->text, member(a.json, "sandboxport"));
        nb_buf_printf(&t->text, "\nexpires_at: ");
        put_time(&t->text, member(a.json, "expires_at"));
        nb_buf_printf(&t->text, "\nConnections are forwarded to 127.0.0.1:");
        put_value(&t->text, member(a.json, "sandboxport"));
        nb_buf_printf(&t->text, " inside the sandbox.");
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

static void tool_sandbox_list(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    yajl_val meta = arg(t, "metadata"), list;

    nb_buf_init(&path, 65536);
    nb_buf_printf(&path, "/sandbox");
    for (size_t i = 0; meta != NULL && i < meta->u.object.len; i++) {
        if (!YAJL_IS_STRING(meta->u.object.values[i])) {
            tool_fail(t, "error: metadata values must be strings (\"%.64s\" is not)",
                      meta->u.object.keys[i]);
            goto out;
        }
        nb_buf_printf(&path, "%smetadata.", i == 0 ? "?" : "&");
        nb_url_escape_path(&path, meta->u.object.keys[i]);
        nb_buf_printf(&path, "=");
        nb_url_escape_path(&path, meta->u.object.values[i]->u.string);
    }
    if (api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        list = member(a.json, "sandboxes");
        if (list == NULL || !YAJL_IS_ARRAY(list) || list->u.array.len == 0) {
            nb_buf_printf(&t->text, "No live sandboxes%s.", meta != NULL ? " match" : "");
        } else {
            nb_buf_printf(&t->text, "%zu live sandbox%s:\n", list->u.array.len,
                          list->u.array.len == 1 ? "" : "es");
            for (size_t i = 0; i < list->u.array.len; i++) {
                yajl_val sb = list->u.array.values[i];
                nb_buf_printf(&t->text, "%s  image=%s  ttl_remaining=", member_str(sb, "sandboxId"),
                              member_str(sb, "image"));
                put_value(&t->text, member(sb, "ttl_remaining"));
                nb_buf_printf(&t->text, "s  network=%s  metadata=", member_str(sb, "network"));
                put_value(&t->text, member(sb, "metadata"));
                nb_buf_printf(&t->text, "\n");
            }
        }
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
out:
    nb_buf_free(&path);
}

static void tool_sandbox_destroy(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;

    sandbox_path(&path, t, "");
    if (api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Destroyed sandbox %s.", arg_str(t, "sandbox_id"));
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "sandboxId", arg_str(t, "sandbox_id"));
        nb_json_kv_bool(g, "destroyed", 1);
        yajl_gen_map_close(g);
        set_structured(t, g);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

/* POST /sandbox/{id}/pause or /resume: the sandbox's state and TTL left. */
static void pause_or_resume(struct tool_call *t, const char *op)
{
    struct api_answer a;
    struct nb_buf path;

    sandbox_path(&path, t, op);
    if (api_call(t, "POST", path.data, NULL, 0, NULL, &a) == 0) {
        nb_buf_printf(&t->text, "Sandbox %s is %s; ttl_remaining: ", arg_str(t, "sandbox_id"),
                      member_str(a.json, "state"));
        put_value(&t->text, member(a.json, "ttl_remaining"));
        nb_buf_printf(&t->text, "s");
        if (member(a.json, "pause_expires_at") != NULL) {
            nb_buf_printf(&t->text, "; destroyed if still paused at ");
            put_time(&t->text, member(a.json, "pause_expires_at"));
        }
        nb_buf_printf(&t->text, ".");
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

static void tool_sandbox_pause(struct tool_call *t)
{
    pause_or_resume(t, "/pause");
}

static void tool_sandbox_resume(struct tool_call *t)
{
    pause_or_resume(t, "/resume");
}

/* POST /sandbox/{id}/snapshot: the new template. */
static void tool_sandbox_snapshot(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    yajl_gen g = nb_json_gen();
    char *body;

    yajl_gen_map_open(g);
    if (arg(t, "name") != NULL)
        nb_json_kv_str(g, "name", arg_str(t, "name"));
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    sandbox_path(&path, t, "/snapshot");
    if (api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text,
                      "Saved sandbox %s as template \"%s\": sandbox_create with template "
                      "\"%s\" starts from it.",
                      arg_str(t, "sandbox_id"), member_str(a.json, "name"),
                      member_str(a.json, "name"));
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

/* ------------------------------------------- TTL, processes, files, ports */

static void tool_sandbox_set_timeout(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    char *body = body_from_args(t, "sandbox_id");

    sandbox_path(&path, t, "/timeout");
    if (api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Sandbox %s is now destroyed at ", arg_str(t, "sandbox_id"));
        put_time(&t->text, member(a.json, "expires_at"));
        nb_buf_printf(&t->text, ", ");
        put_seconds(&t->text, (unsigned long long)nb_json_int(arg(t, "ttl")));
        nb_buf_printf(&t->text, " from now.");
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

static void tool_sandbox_start_process(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    yajl_gen g = nb_json_gen();
    char *body;

    yajl_gen_map_open(g);
    for (size_t i = 0; t->tool->args[i].name != NULL; i++) {
        if (t->f[i].val == NULL || !strcmp(t->tool->args[i].name, "sandbox_id"))
            continue;
        nb_json_cstr(g, t->tool->args[i].name);
        nb_json_tree(g, t->f[i].val);
    }
    nb_json_kv_bool(g, "background", 1);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    sandbox_path(&path, t, "/exec");
    if (api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Started process ");
        put_value(&t->text, member(a.json, "pid"));
        nb_buf_printf(&t->text, " in the background. Read its output with "
                                "sandbox_read_process_output; stop it with sandbox_kill_process.");
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

/* One process entry as a line: pid, state, command. */
static void put_process(struct nb_buf *b, yajl_val p)
{
    yajl_val cmd = member(p, "command");

    nb_buf_printf(b, "pid ");
    put_value(b, member(p, "pid"));
    if (YAJL_IS_TRUE(member(p, "running"))) {
        nb_buf_printf(b, "  running");
    } else {
        nb_buf_printf(b, "  exited with ");
        put_value(b, member(p, "exit_code"));
    }
    nb_buf_printf(b, "  stdout ");
    put_size_val(b, member(p, "stdout_bytes"));
    nb_buf_printf(b, ", stderr ");
    put_size_val(b, member(p, "stderr_bytes"));
    nb_buf_printf(b, "  command:");
    for (size_t i = 0; cmd != NULL && YAJL_IS_ARRAY(cmd) && i < cmd->u.array.len; i++)
        nb_buf_printf(b, " %s", nb_json_string(cmd->u.array.values[i]));
    nb_buf_printf(b, "\n");
}

static void tool_sandbox_list_processes(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    yajl_val list;

    sandbox_path(&path, t, "/processes");
    if (api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        list = member(a.json, "processes");
        if (list == NULL || !YAJL_IS_ARRAY(list) || list->u.array.len == 0)
            nb_buf_printf(&t->text, "No background processes.");
        for (size_t i = 0; list != NULL && YAJL_IS_ARRAY(list) && i < list->u.array.len; i++)
            put_process(&t->text, list->u.array.values[i]);
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

/* ".../processes/PID" + suffix */
static void process_path(struct nb_buf *p, struct tool_call *t, const char *suffix)
{
    sandbox_path(p, t, "/processes/");
    nb_buf_printf(p, "%lld%s", nb_json_int(arg(t, "pid")), suffix);
}

static void tool_sandbox_read_process_output(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;

    process_path(&path, t, "");
    nb_buf_printf(&path, "?stdout_offset=%lld&stderr_offset=%lld",
                  arg(t, "stdout_offset") ? nb_json_int(arg(t, "stdout_offset")) : 0LL,
                  arg(t, "stderr_offset") ? nb_json_int(arg(t, "stderr_offset")) : 0LL);
    if (api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        put_process(&t->text, a.json);
        nb_buf_printf(&t->text, "stdout_next: ");
        put_value(&t->text, member(a.json, "stdout_next"));
        nb_buf_printf(&t->text, "  stderr_next: ");
        put_value(&t->text, member(a.json, "stderr_next"));
        nb_buf_printf(&t->text, "\n--- stdout ---\n");
        put_block(&t->text, member_str(a.json, "stdout"));
        nb_buf_printf(&t->text, "--- stderr ---\n");
        put_block(&t->text, member_str(a.json, "stderr"));
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

static void tool_sandbox_write_process_stdin(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    char *body;

    { /* the body: data, encoding, eof */
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        for (size_t i = 0; t->tool->args[i].name != NULL; i++) {
            const char *n = t->tool->args[i].name;
            if (t->f[i].val == NULL || !strcmp(n, "sandbox_id") || !strcmp(n, "pid"))
                continue;
            nb_json_cstr(g, n);
            nb_json_tree(g, t->f[i].val);
        }
        yajl_gen_map_close(g);
        body = nb_json_gen_take(g);
    }
    process_path(&path, t, "/stdin");
    if (api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Wrote ");
        put_size_val(&t->text, member(a.json, "written"));
        nb_buf_printf(&t->text, " to the stdin of process %lld%s.", nb_json_int(arg(t, "pid")),
                      YAJL_IS_TRUE(arg(t, "eof")) ? ", then closed it" : "");
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

static void tool_sandbox_kill_process(struct tool_call *t)
{
    const char *sig = arg(t, "signal") != NULL ? arg_str(t, "signal") : "KILL";
    struct api_answer a;
    struct nb_buf path;

    process_path(&path, t, "?signal=");
    nb_buf_printf(&path, "%s", sig);
    if (api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Sent SIG%s to process %lld.", sig, nb_json_int(arg(t, "pid")));
        yajl_gen_map_open(g);
        nb_json_kv_int(g, "pid", nb_json_int(arg(t, "pid")));
        nb_json_kv_str(g, "signal", sig);
        yajl_gen_map_close(g);
        set_structured(t, g);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

static void tool_sandbox_delete_file(struct tool_call *t)
{
    const char *file = arg_str(t, "path");
    struct api_answer a;
    struct nb_buf path;

    files_path(&path, t, file);
    if (YAJL_IS_TRUE(arg(t, "recursive")))
        nb_buf_printf(&path, "&recursive=1");
    if (api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Deleted %s.", file);
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "path", file);
        nb_json_kv_bool(g, "deleted", 1);
        yajl_gen_map_close(g);
        set_structured(t, g);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

/* POST .../files/OP with the tool's arguments but sandbox_id. */
static int files_op(struct tool_call *t, const char *op, struct api_answer *a)
{
    struct nb_buf path;
    char *body = body_from_args(t, "sandbox_id");
    int rc;

    sandbox_path(&path, t, op);
    rc = api_call(t, "POST", path.data, body, strlen(body), "application/json", a);
    nb_buf_free(&path);
    free(body);
    return rc;
}

static void tool_sandbox_make_dir(struct tool_call *t)
{
    struct api_answer a;

    if (files_op(t, "/files/mkdir", &a) == 0) {
        nb_buf_printf(&t->text, "Directory %s is there.",
                      YAJL_IS_STRING(member(a.json, "path")) ? member_str(a.json, "path")
                                                             : arg_str(t, "path"));
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
}

static void tool_sandbox_move_file(struct tool_call *t)
{
    struct api_answer a;

    if (files_op(t, "/files/move", &a) == 0) {
        nb_buf_printf(&t->text, "Moved %s to %s.", arg_str(t, "from"),
                      YAJL_IS_STRING(member(a.json, "path")) ? member_str(a.json, "path")
                                                             : arg_str(t, "to"));
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
}

static void tool_sandbox_list_ports(struct tool_call *t)
{
    struct api_answer a;
    struct nb_buf path;
    yajl_val list;

    sandbox_path(&path, t, "/ports");
    if (api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        list = member(a.json, "ports");
        if (list == NULL || !YAJL_IS_ARRAY(list) || list->u.array.len == 0)
            nb_buf_printf(&t->text, "No open ports.");
        for (size_t i = 0; list != NULL && YAJL_IS_ARRAY(list) && i < list->u.array.len; i++) {
            yajl_val p = list->u.array.values[i];
            nb_buf_printf(&t->text, "port ");
            put_value(&t->text, member(p, "sandboxport"));
            nb_buf_printf(&t->text, "  url: %s  tcp: %s:", member_str(p, "url"),
                          member_str(p, "host"));
            put_value(&t->text, member(p, "hostport"));
            nb_buf_printf(&t->text, "  closes at ");
            put_time(&t->text, member(p, "expires_at"));
            nb_buf_printf(&t->text, "\n");
        }
        keep_structured(t, &a, NULL);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

static void tool_sandbox_close_port(struct tool_call *t)
{
    long long port = nb_json_int(arg(t, "port"));
    struct api_answer a;
    struct nb_buf path;
    char suffix[32];

    snprintf(suffix, sizeof(suffix), "/ports/%lld", port);
    sandbox_path(&path, t, suffix);
    if (api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Closed port %lld.", port);
        yajl_gen_map_open(g);
        nb_json_kv_int(g, "sandboxport", port);
        nb_json_kv_bool(g, "closed", 1);
        yajl_gen_map_close(g);
        set_structured(t, g);
    }
    api_answer_free(&a);
    nb_buf_free(&path);
}

/* ---------------------------------------------------------------- schema */

static void gen_type(yajl_gen g, unsigned types)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {
        {NB_JT_STRING, "string"}, {NB_JT_INT, "integer"},   {NB_JT_NUMBER, "number"},
        {NB_JT_BOOL, "boolean"},  {NB_JT_OBJECT, "object"}, {NB_JT_ARRAY, "array"},
    };
    size_t n = 0;

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        n += (types & names[i].bit) != 0;
    nb_json_cstr(g, "type");
    if (n > 1)
        yajl_gen_array_open(g);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (types & names[i].bit)
            nb_json_cstr(g, names[i].name);
    if (n > 1)
        yajl_gen_array_close(g);
}

static void gen_input_schema(yajl_gen g, const struct mcp_tool *tool, const struct mcp_session *s)
{
    nb_json_cstr(g, "inputSchema");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "type", "object");
    nb_json_cstr(g, "properties");
    yajl_gen_map_open(g);
    for (const struct mcp_arg *a = tool->args; a->name != NULL; a++) {
        nb_json_cstr(g, a->name);
        yajl_gen_map_open(g);
        gen_type(g, a->types);
        if (a->types & NB_JT_OBJECT) {
            nb_json_cstr(g, "additionalProperties");
            yajl_gen_map_open(g);
            nb_json_kv_str(g, "type", "string");
            yajl_gen_map_close(g);
        }
        if (a->choices != NULL) {
            const char *p = a->choices, *bar;
            nb_json_cstr(g, "enum");
            yajl_gen_array_open(g);
            for (; (bar = strchr(p, '|')) != NULL; p = bar + 1)
                nb_json_str(g, p, (size_t)(bar - p));
            nb_json_cstr(g, p);
            yajl_gen_array_close(g);
        }
        gen_description(g, "description", a->description, s);
        yajl_gen_map_close(g);
    }
    yajl_gen_map_close(g);
    nb_json_cstr(g, "required");
    yajl_gen_array_open(g);
    for (const struct mcp_arg *a = tool->args; a->name != NULL; a++)
        if (a->required)
            nb_json_cstr(g, a->name);
    yajl_gen_array_close(g);
    nb_json_kv_bool(g, "additionalProperties", 0);
    yajl_gen_map_close(g);
}

/* -------------------------------------------------------------- replies */

/* Append to out, or undo everything appended since start and say why. */
static void reply_text(struct nb_buf *out, size_t start, const char *id_json, const char *key,
                       const char *value_json)
{
    if (nb_buf_printf(out, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"%s\":", id_json, key) == NB_OK &&
        nb_buf_append(out, value_json, strlen(value_json)) == NB_OK &&
        nb_buf_append(out, "}", 1) == NB_OK)
        return;
    out->len = start;
    if (out->data != NULL)
        out->data[start] = '\0';
    nb_buf_printf(out,
                  "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":"
                  "\"the reply is larger than this transport's cap\"}}",
                  id_json, MCP_INTERNAL_ERROR);
}

static char *id_text(yajl_val id)
{
    yajl_gen g = nb_json_gen();
    nb_json_tree(g, id);
    return nb_json_gen_take(g);
}

static void reply_result(struct nb_buf *out, yajl_val id, yajl_gen result)
{
    char *idj = id_text(id), *res = nb_json_gen_take(result);
    reply_text(out, out->len, idj, "result", res);
    free(idj);
    free(res);
}

static void reply_error(struct nb_buf *out, yajl_val id, int code, const char *message)
{
    yajl_gen g = nb_json_gen();
    char *idj = id_text(id), *err;

    yajl_gen_map_open(g);
    nb_json_kv_int(g, "code", code);
    nb_json_kv_str(g, "message", message);
    yajl_gen_map_close(g);
    err = nb_json_gen_take(g);
    reply_text(out, out->len, idj, "error", err);
    free(idj);
    free(err);
}

void mcp_error_reply(struct nb_buf *out, int code, const char *message)
{
    reply_error(out, NULL, code, message);
}

/* ------------------------------------------------------------- methods */

static int do_initialize(struct mcp_session *s, yajl_val id, yajl_val params, int in_batch,
                         struct nb_buf *out)
{
    yajl_val asked = member(params, "protocolVersion");
    yajl_gen g;

    if (in_batch) {
        reply_error(out, id, MCP_INVALID_REQUEST, "initialize must not be part of a batch");
        return MCP_REPLY;
    }
    if (asked == NULL || !YAJL_IS_STRING(asked)) {
        reply_error(
            out, id, MCP_INVALID_PARAMS,
            "initialize needs params.protocolVersion, a string such as \"" MCP_VERSION_LATEST "\"");
        return MCP_REPLY;
    }
    /* the client's version when we speak it, else our latest: the client decides */
    snprintf(s->version, sizeof(s->version), "%s",
             mcp_version_supported(asked->u.string) ? asked->u.string : MCP_VERSION_LATEST);
    s->initialized = 1;
    s->last = MCP_MSG_INITIALIZE;

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "protocolVersion", s->version);
    nb_json_cstr(g, "capabilities");
    yajl_gen_map_open(g);
    nb_json_cstr(g, "tools");
    yajl_gen_map_open(g);
    nb_json_kv_bool(g, "listChanged", 0);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    nb_json_cstr(g, "serverInfo");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", "nanobox");
    if (version_at_least(s, "2025-06-18"))
        nb_json_kv_str(g, "title", "nanobox sandboxes");
    nb_json_kv_str(g, "version", PACKAGE_VERSION);
    yajl_gen_map_close(g);
    gen_description(g, "instructions", server_instructions, s);
    yajl_gen_map_close(g);
    reply_result(out, id, g);
    return MCP_REPLY;
}

static int do_tools_list(struct mcp_session *s, yajl_val id, struct nb_buf *out)
{
    yajl_gen g = nb_json_gen();

    yajl_gen_map_open(g);
    nb_json_cstr(g, "tools");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < N_TOOLS; i++) {
        const struct mcp_tool *tool = &tools[i];
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "name", tool->name);
        if (version_at_least(s, "2025-06-18"))
            nb_json_kv_str(g, "title", tool->title);
        gen_description(g, "description", tool->description, s);
        gen_input_schema(g, tool, s);
        if (version_at_least(s, "2025-06-18") && tool->output_schema != NULL) {
            yajl_val os = NULL;
            char err[128];
            if (nb_json_parse(tool->output_schema, strlen(tool->output_schema), MCP_MAX_DEPTH, &os,
                              err, sizeof(err)) == 0) {
                nb_json_cstr(g, "outputSchema");
                nb_json_tree(g, os);
            } else {
                nb_error("MCP: the output schema of %s is not JSON: %s", tool->name, err);
            }
            yajl_tree_free(os);
        }
        if (version_at_least(s, "2025-03-26")) {
            nb_json_cstr(g, "annotations");
            yajl_gen_map_open(g);
            nb_json_kv_str(g, "title", tool->title);
            nb_json_kv_bool(g, "readOnlyHint", (tool->hints & HINT_READ_ONLY) != 0);
            nb_json_kv_bool(g, "destructiveHint", (tool->hints & HINT_DESTRUCTIVE) != 0);
            nb_json_kv_bool(g, "idempotentHint", (tool->hints & HINT_IDEMPOTENT) != 0);
            nb_json_kv_bool(g, "openWorldHint", 0);
            yajl_gen_map_close(g);
        }
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    reply_result(out, id, g);
    return MCP_REPLY;
}

/* The arguments against the tool's list; 0, or -1 with t an isError result. */
static int check_args(struct tool_call *t, yajl_val args)
{
    char err[256];
    size_t n = 0;

    for (; t->tool->args[n].name != NULL; n++) {
        if (n == MCP_MAX_ARGS)
            abort(); /* a tool with more arguments than MCP_MAX_ARGS: raise it */
        t->f[n].name = t->tool->args[n].name;
        t->f[n].types = t->tool->args[n].types | (t->tool->args[n].required ? 0 : NB_JT_NULL);
    }
    if (nb_json_fields(args, t->f, n, err, sizeof(err)) != 0) {
        tool_fail(t, "error: bad arguments for %s: %s", t->tool->name, err);
        nb_buf_printf(&t->text, ". Its arguments are:");
        for (size_t i = 0; i < n; i++)
            nb_buf_printf(&t->text, " %s%s", t->f[i].name, t->tool->args[i].required ? "*" : "");
        nb_buf_printf(&t->text, " (* required).");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const struct mcp_arg *a = &t->tool->args[i];
        if (a->required && t->f[i].val == NULL) {
            tool_fail(t, "error: %s needs the argument \"%s\": ", t->tool->name, a->name);
            put_description(&t->text, a->description, t->s);
            return -1;
        }
        if (a->choices != NULL && t->f[i].val != NULL) {
            const char *v = nb_json_string(t->f[i].val), *p = a->choices;
            size_t vl = strlen(v);
            int found = 0;
            while (!found && *p) {
                size_t pl = strcspn(p, "|");
                found = pl == vl && !strncmp(p, v, vl);
                p += pl + (p[pl] == '|');
            }
            if (!found) {
                char list[128];
                size_t k = 0;
                for (p = a->choices; *p && k + 3 < sizeof(list); p++)
                    k += (size_t)snprintf(list + k, sizeof(list) - k, *p == '|' ? ", " : "%c", *p);
                tool_fail(t, "error: argument \"%s\" of %s must be one of %s, not \"%.64s\"",
                          a->name, t->tool->name, list, v);
                return -1;
            }
        }
    }
    return 0;
}

static int do_tools_call(struct mcp_session *s, yajl_val id, yajl_val params, struct nb_buf *out)
{
    yajl_val name = member(params, "name"), args = member(params, "arguments");
    yajl_val token = member(member(params, "_meta"), "progressToken");
    struct tool_call t = {.s = s};
    char *idj;
    char msg[256];
    yajl_gen g;

    if (name == NULL || !YAJL_IS_STRING(name)) {
        reply_error(out, id, MCP_INVALID_PARAMS, "tools/call needs params.name, a tool's name");
        return MCP_REPLY;
    }
    if (args != NULL && !YAJL_IS_OBJECT(args) && !YAJL_IS_NULL(args)) {
        reply_error(out, id, MCP_INVALID_PARAMS, "params.arguments must be an object");
        return MCP_REPLY;
    }
    for (size_t i = 0; i < N_TOOLS && t.tool == NULL; i++)
        if (!strcmp(tools[i].name, name->u.string))
            t.tool = &tools[i];
    if (t.tool == NULL) {
        snprintf(msg, sizeof(msg), "unknown tool \"%.64s\" (tools/list names the tools)",
                 name->u.string);
        reply_error(out, id, MCP_INVALID_PARAMS, msg);
        return MCP_REPLY;
    }

    if (token != NULL && (YAJL_IS_STRING(token) || YAJL_IS_INTEGER(token)))
        t.progress_token = token;
    watch_start(&t, 0, NULL, NULL); /* seconds, no total: a tool may say more */
    idj = id_text(id);
    t.id_json = idj;
    nb_buf_init(&t.text, MCP_MAX_TEXT);
    if (check_args(&t, args != NULL && YAJL_IS_OBJECT(args) ? args : NULL) == 0)
        t.tool->run(&t);
    free(idj);
    t.id_json = NULL;
    if (t.cancelled) { /* the client gave up on it: the spec wants no reply */
        s->last = MCP_MSG_CANCELLED;
        yajl_tree_free(t.structured);
        items_free(&t);
        nb_buf_free(&t.text);
        return MCP_NO_REPLY;
    }

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "content");
    yajl_gen_array_open(g);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "type", "text");
    nb_json_cstr(g, "text");
    nb_json_str(g, t.text.data != NULL ? t.text.data : "", t.text.len);
    yajl_gen_map_close(g);
    for (size_t i = 0; i < t.n_items; i++) {
        const struct content_item *it = &t.items[i];
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "type", it->mime != NULL ? "image" : "text");
        nb_json_cstr(g, it->mime != NULL ? "data" : "text");
        nb_json_str(g, it->data.data != NULL ? it->data.data : "", it->data.len);
        if (it->mime != NULL)
            nb_json_kv_str(g, "mimeType", it->mime);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    if (t.structured != NULL && !t.is_error && version_at_least(s, "2025-06-18")) {
        nb_json_cstr(g, "structuredContent");
        yajl_gen_map_open(g);
        for (size_t i = 0; i < t.structured->u.object.len; i++) {
            if (t.structured_omit != NULL &&
                !strcmp(t.structured->u.object.keys[i], t.structured_omit))
                continue;
            nb_json_cstr(g, t.structured->u.object.keys[i]);
            nb_json_tree(g, t.structured->u.object.values[i]);
        }
        yajl_gen_map_close(g);
    }
    nb_json_kv_bool(g, "isError", t.is_error);
    yajl_gen_map_close(g);
    reply_result(out, id, g);

    yajl_tree_free(t.structured);
    items_free(&t);
    nb_buf_free(&t.text);
    return MCP_REPLY;
}

/* ------------------------------------------------------------- dispatch */

static int handle_one(struct mcp_session *s, yajl_val m, int in_batch, struct nb_buf *out)
{
    yajl_val id, jsonrpc, method, params;
    int has_id;
    char msg[256];

    if (!YAJL_IS_OBJECT(m)) {
        reply_error(out, NULL, MCP_INVALID_REQUEST, "a JSON-RPC message must be an object");
        return MCP_REPLY;
    }
    id = member(m, "id");
    has_id = id != NULL;
    if (has_id && !YAJL_IS_STRING(id) && !YAJL_IS_INTEGER(id)) {
        reply_error(out, NULL, MCP_INVALID_REQUEST, "\"id\" must be a string or an integer");
        return MCP_REPLY;
    }
    jsonrpc = member(m, "jsonrpc");
    if (jsonrpc == NULL || !YAJL_IS_STRING(jsonrpc) || strcmp(jsonrpc->u.string, "2.0") != 0) {
        reply_error(out, id, MCP_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
        return MCP_REPLY;
    }
    method = member(m, "method");
    if (method == NULL) {
        /* a response to a request of ours: we send none, so nothing to match */
        if (member(m, "result") != NULL || member(m, "error") != NULL)
            return MCP_NO_REPLY;
        reply_error(out, id, MCP_INVALID_REQUEST, "a request needs a \"method\"");
        return MCP_REPLY;
    }
    if (!YAJL_IS_STRING(method)) {
        reply_error(out, id, MCP_INVALID_REQUEST, "\"method\" must be a string");
        return MCP_REPLY;
    }
    if (!has_id) {
        /* notifications: initialized, cancelled (calls run to the end), the rest ignored */
        if (!strcmp(method->u.string, "notifications/initialized"))
            s->initialized = 1;
        if (!strcmp(method->u.string, "notifications/cancelled") && s->backend != NULL &&
            s->backend->cancel != NULL) {
            yajl_val req = member(member(m, "params"), "requestId");
            if (req != NULL && (YAJL_IS_STRING(req) || YAJL_IS_INTEGER(req))) {
                char *rid = id_text(req);
                s->backend->cancel(s->backend->ctx, rid);
                free(rid);
            }
        }
        return MCP_NO_REPLY;
    }
    params = member(m, "params");
    if (params != NULL && !YAJL_IS_OBJECT(params)) {
        reply_error(out, id, MCP_INVALID_PARAMS, "\"params\" must be an object");
        return MCP_REPLY;
    }

    if (!strcmp(method->u.string, "initialize"))
        return do_initialize(s, id, params, in_batch, out);
    if (!strcmp(method->u.string, "ping")) {
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        yajl_gen_map_close(g);
        reply_result(out, id, g);
        return MCP_REPLY;
    }
    if (!strcmp(method->u.string, "tools/list"))
        return do_tools_list(s, id, out);
    if (!strcmp(method->u.string, "tools/call"))
        return do_tools_call(s, id, params, out);
    snprintf(msg, sizeof(msg),
             "unknown method \"%.64s\" (this server has initialize, ping, "
             "tools/list and tools/call)",
             method->u.string);
    reply_error(out, id, MCP_METHOD_NOT_FOUND, msg);
    return MCP_REPLY;
}

/* Batches were part of 2025-03-26 (and plain JSON-RPC before it); 2025-06-18 dropped them. */
static int handle_batch(struct mcp_session *s, yajl_val batch, struct nb_buf *out)
{
    struct nb_buf one;
    size_t start = out->len, replies = 0;
    char msg[160];

    if (version_at_least(s, "2025-06-18")) {
        snprintf(msg, sizeof(msg),
                 "JSON-RPC batches are not part of MCP %s: send one message "
                 "at a time",
                 s->version);
        reply_error(out, NULL, MCP_INVALID_REQUEST, msg);
        return MCP_REPLY;
    }
    if (batch->u.array.len == 0) {
        reply_error(out, NULL, MCP_INVALID_REQUEST, "empty batch");
        return MCP_REPLY;
    }
    nb_buf_init(&one, out->cap);
    for (size_t i = 0; i < batch->u.array.len; i++) {
        nb_buf_reset(&one);
        if (handle_one(s, batch->u.array.values[i], 1, &one) != MCP_REPLY)
            continue;
        if (nb_buf_append(out, replies == 0 ? "[" : ",", 1) != NB_OK ||
            nb_buf_append(out, one.data, one.len) != NB_OK) {
            out->len = start;
            if (out->data != NULL)
                out->data[start] = '\0';
            nb_buf_free(&one);
            reply_error(out, NULL, MCP_INTERNAL_ERROR,
                        "the batch's replies are larger than "
                        "this transport's cap");
            return MCP_REPLY;
        }
        replies++;
    }
    nb_buf_free(&one);
    if (replies == 0)
        return MCP_NO_REPLY;
    nb_buf_append(out, "]", 1);
    return MCP_REPLY;
}

int mcp_handle(struct mcp_session *s, const char *msg, size_t len, struct nb_buf *out)
{
    yajl_val root = NULL;
    char err[256];
    int rc;

    s->last = MCP_MSG_OTHER;
    if (nb_json_parse(msg, len, MCP_MAX_DEPTH, &root, err, sizeof(err)) != 0) {
        s->last = MCP_MSG_NOT_JSON;
        reply_error(out, NULL, MCP_PARSE_ERROR, err);
        return MCP_REPLY;
    }
    if (root == NULL) {
        s->last = MCP_MSG_EMPTY;
        return MCP_NO_REPLY; /* a blank line */
    }
    if (nb_json_no_dup_keys(root, err, sizeof(err)) != 0) {
        /* as the REST side refuses it: yajl would keep one of the two silently */
        yajl_val id = YAJL_IS_OBJECT(root) ? member(root, "id") : NULL;
        char why[320];
        snprintf(why, sizeof(why), "invalid request: %s", err);
        reply_error(out,
                    id != NULL && (YAJL_IS_STRING(id) || YAJL_IS_INTEGER(id)) &&
                            !strstr(err, "\"id\"")
                        ? id
                        : NULL,
                    MCP_INVALID_REQUEST, why);
        yajl_tree_free(root);
        return MCP_REPLY;
    }
    rc = YAJL_IS_ARRAY(root) ? handle_batch(s, root, out) : handle_one(s, root, 0, out);
    yajl_tree_free(root);
    return rc;
}
