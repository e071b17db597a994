/*
 * tools.c - the MCP tool table: each tool's name, title, description
 * (written for a model), argument list and output schema, and the
 * server's instructions. tools/list's input schemas are generated from the
 * argument lists, and tools/call's arguments are checked against them
 * (unknown arguments refused, types strict, choices enforced); what only
 * the API can judge (limits, ids) is left to it.
 *
 * Descriptions are templates: ${name} stands for an operator setting,
 * filled in when tools/list is answered (describe.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "json.h"
#include "mcp.h"
#include "mcp_tool.h"

const char mcp_instructions[] =
    "nanobox runs commands in isolated Linux sandboxes (containers, no network unless asked "
    "for). Create one with sandbox_create and pass its sandbox_id to sandbox_exec, "
    "sandbox_write_file, sandbox_read_file, sandbox_list_files and sandbox_open_port. Files "
    "live in ${workspace|the workspace directory (/workspace unless the server sets another)} "
    "and persist between calls until the sandbox is destroyed (sandbox_destroy, or its ttl "
    "runs out). For a one-off snippet, run_code needs no sandbox; with the sandbox_id of a "
    "nanobox-python:latest sandbox it runs code in a session that keeps its variables, like "
    "notebook cells, and returns plots as images.";

/* ------------------------------------------------------------ the tools */

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
    {"volumes", NB_JT_ARRAY, 0, NULL,
     "Persistent volumes of yours to mount, as [{\"name\": \"NAME\", \"path\": \"/data\"}] "
     "(volume_create makes one, volume_list lists them): their files outlive the sandbox and "
     "are shared by every sandbox of yours that mounts them."},
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

static const struct mcp_arg no_args[] = {ARG_END};
static const struct mcp_arg pause_args[] = {
    ARG_SANDBOX_ID,
    {"keep_memory", NB_JT_BOOL, 0, NULL,
     "false: release its memory instead of freezing it: its files are saved and its container "
     "removed; sandbox_resume boots it again from the files, its processes gone (default "
     "true)."},
    ARG_END};

static const struct mcp_arg snapshot_args[] = {
    ARG_SANDBOX_ID,
    {"name", NB_JT_STRING, 0, NULL,
     "Name of the new template: 1 to 63 of a-z, 0-9, '.', '_' and '-' (default: "
     "snap-<the sandbox id's first 8>-<time>)."},
    ARG_END};

static const struct mcp_arg fork_args[] = {
    ARG_SANDBOX_ID,
    {"count", NB_JT_INT, 0, NULL, "How many copies to make (default 1; at most ${fork_max|10})."},
    {"ttl", NB_JT_INT, 0, NULL,
     "Seconds each copy lives (default: ${default_ttl}; at most ${max_ttl})."},
    ARG_END};

static const struct mcp_arg run_args[] = {
    {"language", NB_JT_STRING, 0, "python|sh|javascript|typescript|bash",
     "Without sandbox_id: \"python\" (python3 -c CODE, the default) or \"sh\" (/bin/sh -c "
     "CODE). With sandbox_id: \"python\" (the default), \"javascript\" (node), "
     "\"typescript\" (node, its types erased) or \"bash\" (\"sh\" means bash there); leave "
     "it out when context names a session."},
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
     "language's own session (\"python\", \"javascript\", \"typescript\" or \"bash\"), "
     "created on first use."},
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

static const struct mcp_arg volume_create_args[] = {
    {"name", NB_JT_STRING, 1, NULL,
     "The volume's name: 1 to 63 of A-Z, a-z, 0-9, _, . and -, the first a letter or digit "
     "(yours alone: another key's volumes are not seen)."},
    {"size", NB_JT_INT | NB_JT_STRING, 0, NULL,
     "What it may hold: bytes, or a size like \"512m\" (default ${volume_size_default|the server's "
     "volume_size_default}, at "
     "most ${volume_size_max|the server's volume_size_max}); a write past it fails with \"No space "
     "left on device\"."},
    ARG_END};

static const struct mcp_arg volume_delete_args[] = {
    {"name", NB_JT_STRING, 1, NULL, "The volume's name (or its volumeID)."}, ARG_END};

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
static const char os_fork[] = OS(P_STR("parent") "," P_ARR("sandboxes"), "\"sandboxes\"");
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
static const char os_volume[] = OS(P_STR("name") "," P_STR("volumeID") "," P_INT("size") ","
    P_INT("created_at"), "\"name\",\"volumeID\"");
static const char os_volumes[] = OS(P_ARR("volumes"), "\"volumes\"");
static const char os_volume_delete[] = OS(P_STR("name") "," P_BOOL("deleted"),
    "\"name\",\"deleted\"");
static const char os_close[] = OS(P_INT("sandboxport") "," P_BOOL("closed"),
    "\"sandboxport\",\"closed\"");
/* clang-format on */

const struct mcp_tool mcp_tools[] = {
    {"sandbox_create", "Create a sandbox",
     "Create an isolated Linux sandbox (a container with python3 and a POSIX shell, no "
     "network by default) and return its sandbox_id. Use the id with the other sandbox_* "
     "tools; the sandbox keeps its files in ${workspace|its workspace directory} between "
     "calls until sandbox_destroy or until its ttl (default: ${default_ttl}) runs out. Call "
     "this once per task and reuse the sandbox.",
     create_args, 0, mcp_tool_sandbox_create, os_create},
    {"sandbox_exec", "Run a shell command in a sandbox",
     "Run a shell command in a sandbox and wait for it to finish. Returns the exit code, "
     "whether it timed out (it is then killed), whether the output was truncated (stdout and "
     "stderr together are capped at ${max_output}), and stdout and stderr separately. A "
     "non-zero exit code is a normal result, not a tool error. To start a server that "
     "outlives the command, detach it: setsid nohup CMD >/tmp/log 2>&1 &",
     exec_args, 0, mcp_tool_sandbox_exec, os_exec},
    {"sandbox_write_file", "Write a file in a sandbox",
     "Create or replace a file in a sandbox with the given content (text, or base64 for "
     "binary data).",
     write_args, HINT_IDEMPOTENT, mcp_tool_sandbox_write_file, os_write},
    {"sandbox_read_file", "Read a file from a sandbox",
     "Return a file's content from a sandbox: as text when it is UTF-8, otherwise as base64 "
     "with a note saying so.",
     read_args, HINT_READ_ONLY, mcp_tool_sandbox_read_file, os_read},
    {"sandbox_list_files", "List a directory in a sandbox",
     "List a directory in a sandbox: one line per entry with its type (file, dir, symlink, "
     "other), size, permissions, modification time (UTC) and name.",
     list_files_args, HINT_READ_ONLY, mcp_tool_sandbox_list_files, os_listing},
    {"sandbox_open_port", "Expose a sandbox port",
     "Make a TCP port of a sandbox reachable from outside for a while and return its URL "
     "(through the nanobox server's web front) and host:port (plain TCP). Start the server "
     "in the sandbox first, detached, with sandbox_exec.",
     port_args, 0, mcp_tool_sandbox_open_port, os_port},
    {"sandbox_list", "List sandboxes",
     "List the live sandboxes with their ids, image, time left and metadata, optionally only "
     "those whose metadata matches.",
     list_args, HINT_READ_ONLY, mcp_tool_sandbox_list, os_list},
    {"sandbox_destroy", "Destroy a sandbox",
     "Destroy a sandbox now: its processes are killed, its files and open ports are gone.",
     destroy_args, HINT_DESTRUCTIVE | HINT_IDEMPOTENT, mcp_tool_sandbox_destroy, os_destroy},
    {"sandbox_pause", "Pause a sandbox",
     "Freeze every process of a sandbox to pick it up later with sandbox_resume: memory, "
     "processes and files stay as they are. Its ttl stops while it is paused, but a sandbox "
     "paused longer than ${max_pause} is destroyed. Commands, files and code calls fail while "
     "it is paused unless it was created with auto_resume. Pausing a paused sandbox changes "
     "nothing.",
     pause_args, HINT_IDEMPOTENT, mcp_tool_sandbox_pause, os_state},
    {"sandbox_resume", "Resume a sandbox",
     "Thaw a paused sandbox: its processes go on where they were, with the ttl it had left. "
     "Resuming a running sandbox changes nothing.",
     destroy_args, HINT_IDEMPOTENT, mcp_tool_sandbox_resume, os_state},
    {"sandbox_snapshot", "Snapshot a sandbox",
     "Save a sandbox's files as a new template: ${workspace} (its home, with what pip install "
     "--user put there) and /tmp, byte for byte. sandbox_create with template set to the "
     "returned name starts a sandbox with them. The sandbox keeps running (a paused one stays "
     "paused); running processes and memory are not saved.",
     snapshot_args, 0, mcp_tool_sandbox_snapshot, os_snapshot},
    {"sandbox_fork", "Fork a sandbox",
     "Copy a sandbox into count new ones in one call, to try several approaches from the same "
     "state: each gets its files (${workspace} and /tmp, and what a root installed), its env "
     "and metadata, and returns its own sandbox id. Running processes are not copied: start "
     "servers again in each copy. The sandbox itself keeps running.",
     fork_args, 0, mcp_tool_sandbox_fork, os_fork},
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
     run_args, 0, mcp_tool_run_code, os_run},
    {"sandbox_set_timeout", "Extend or shorten a sandbox's life",
     "Set a sandbox to be destroyed ttl seconds from now: a longer ttl than it has left keeps "
     "it (and its files) alive longer, a shorter one ends it sooner. Returns the new expiry.",
     timeout_args, HINT_IDEMPOTENT, mcp_tool_sandbox_set_timeout, os_timeout},
    {"sandbox_start_process", "Start a background process in a sandbox",
     "Start a shell command in the background and return its pid at once: for servers, "
     "watchers and long jobs. It runs until it exits, is killed (sandbox_kill_process) or the "
     "sandbox goes; read its output with sandbox_read_process_output, feed its stdin with "
     "sandbox_write_process_stdin. A sandbox keeps at most 64 of them, running or ended and "
     "not read yet.",
     start_args, 0, mcp_tool_sandbox_start_process, os_start},
    {"sandbox_list_processes", "List background processes",
     "List a sandbox's background processes: pid, command, running or its exit code, and how "
     "much output each has written.",
     destroy_args, HINT_READ_ONLY, mcp_tool_sandbox_list_processes, os_procs},
    {"sandbox_read_process_output", "Read a background process's output",
     "Return a background process's state (running, or its exit code) and its stdout and "
     "stderr from the given offsets, with the offsets to pass next time (stdout_next, "
     "stderr_next) so that polling never misses or repeats output.",
     read_output_args, HINT_READ_ONLY, mcp_tool_sandbox_read_process_output, os_proc},
    {"sandbox_write_process_stdin", "Write to a background process's stdin",
     "Send bytes to a background process's standard input (a REPL, a prompt), and optionally "
     "close it (eof).",
     stdin_args, 0, mcp_tool_sandbox_write_process_stdin, os_stdin},
    {"sandbox_kill_process", "Signal a background process",
     "Send a signal (default KILL) to a background process and its process group. Signalling "
     "one that already ended forgets it (it leaves sandbox_list_processes).",
     kill_args, HINT_DESTRUCTIVE | HINT_IDEMPOTENT, mcp_tool_sandbox_kill_process, os_kill},
    {"sandbox_delete_file", "Delete a file in a sandbox",
     "Delete a file, or a directory (empty, or with everything in it when recursive is true).",
     delete_args, HINT_DESTRUCTIVE | HINT_IDEMPOTENT, mcp_tool_sandbox_delete_file, os_delete},
    {"sandbox_make_dir", "Create a directory in a sandbox",
     "Create a directory and any missing parents; an existing directory is fine.", mkdir_args,
     HINT_IDEMPOTENT, mcp_tool_sandbox_make_dir, os_mkdir},
    {"sandbox_move_file", "Move or rename a file in a sandbox",
     "Move or rename a file or directory within a sandbox (an existing file at the target is "
     "replaced).",
     move_args, HINT_DESTRUCTIVE, mcp_tool_sandbox_move_file, os_move},
    {"sandbox_list_ports", "List a sandbox's open ports",
     "List the ports of a sandbox opened with sandbox_open_port: URL, host:port and when each "
     "closes.",
     destroy_args, HINT_READ_ONLY, mcp_tool_sandbox_list_ports, os_ports},
    {"sandbox_close_port", "Close a sandbox port",
     "Close a port opened with sandbox_open_port now: its URL and host port stop answering.",
     close_port_args, HINT_DESTRUCTIVE | HINT_IDEMPOTENT, mcp_tool_sandbox_close_port, os_close},
    {"volume_create", "Create a persistent volume",
     "Create a persistent volume: a directory of its own size whose files outlive sandboxes. "
     "Mount it with sandbox_create's volumes argument; several of your sandboxes may mount it "
     "at once and see each other's files.",
     volume_create_args, 0, mcp_tool_volume_create, os_volume},
    {"volume_list", "List persistent volumes", "List your persistent volumes: name, id and size.",
     no_args, HINT_READ_ONLY, mcp_tool_volume_list, os_volumes},
    {"volume_delete", "Delete a persistent volume",
     "Delete a persistent volume and every file in it. Refused while a sandbox has it mounted "
     "(destroy the sandbox first).",
     volume_delete_args, HINT_DESTRUCTIVE, mcp_tool_volume_delete, os_volume_delete},
};

const size_t mcp_n_tools = sizeof(mcp_tools) / sizeof(mcp_tools[0]);

const struct mcp_tool *mcp_tool_find(const char *name)
{
    for (size_t i = 0; i < mcp_n_tools; i++)
        if (!strcmp(mcp_tools[i].name, name))
            return &mcp_tools[i];
    return NULL;
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

void mcp_gen_input_schema(yajl_gen g, const struct mcp_tool *tool, const struct mcp_session *s)
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
        if (a->types & NB_JT_ARRAY) {
            nb_json_cstr(g, "items");
            yajl_gen_map_open(g);
            nb_json_kv_str(g, "type", "object");
            yajl_gen_map_close(g);
        }
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
        mcp_gen_description(g, "description", a->description, s);
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

/* The arguments against the tool's list; 0, or -1 with t an isError result. */
int mcp_check_args(struct tool_call *t, yajl_val args)
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
        mcp_fail(t, "error: bad arguments for %s: %s", t->tool->name, err);
        nb_buf_printf(&t->text, ". Its arguments are:");
        for (size_t i = 0; i < n; i++)
            nb_buf_printf(&t->text, " %s%s", t->f[i].name, t->tool->args[i].required ? "*" : "");
        nb_buf_printf(&t->text, " (* required).");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const struct mcp_arg *a = &t->tool->args[i];
        if (a->required && t->f[i].val == NULL) {
            mcp_fail(t, "error: %s needs the argument \"%s\": ", t->tool->name, a->name);
            mcp_put_description(&t->text, a->description, t->s);
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
                mcp_fail(t, "error: argument \"%s\" of %s must be one of %s, not \"%.64s\"",
                         a->name, t->tool->name, list, v);
                return -1;
            }
        }
    }
    return 0;
}
