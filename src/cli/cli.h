/*
 * cli.h - what the files of the nanobox command-line client share: exit
 * statuses, the command table's entry, the helpers and the commands.
 *
 * A command gets argv starting at its own name and returns the process's
 * exit status. Human output goes to stdout and problems to stderr as
 * "nanobox: ..."; with --json, stdout carries the server's JSON as it came.
 */
#ifndef NB_CLI_H
#define NB_CLI_H

#define CLI_OK 0
#define CLI_FAIL 1        /* the server refused, or could not be reached */
#define CLI_USAGE 2       /* bad command line */
#define CLI_TIMED_OUT 124 /* exec/run: the command hit its timeout, as timeout(1) */

struct client;
struct nb_buf;
struct args_pos;

struct cli_cmd {
    const char *name;
    int (*run)(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
    const char *synopsis; /* "nanobox NAME ..." lines */
    const char *summary;  /* one line for "nanobox help" */
    const char *help;     /* what follows the synopsis in "nanobox NAME --help" */
};

/* helpers.c: what several commands share (they call nothing above it) */
#define CLI_UUID_LEN 36 /* characters of a sandbox id */
/* "nanobox NAME --help": the command's usage on stdout; returns CLI_OK. */
int cli_help(const struct cli_cmd *cmd);
/* A bad command line: the message and the synopsis on stderr; CLI_USAGE. */
int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * The sandbox id an argument names, in out (37 bytes): a full UUID as is (in
 * lower case), or the one live sandbox whose id starts with a shorter hex
 * prefix, in any case. CLI_OK, CLI_USAGE for an empty one (cmd's usage
 * error), or CLI_FAIL after saying why.
 */
int sandbox_resolve_id(struct client *c, const struct cli_cmd *cmd, const char *arg, char out[37]);
/* Could arg be a sandbox id: a full UUID, or a shorter hex prefix of one? */
int sandbox_is_id(const char *arg);
/* b initialised to "/sandbox/<id><suffix>", the id %-encoded. */
void sandbox_path(struct nb_buf *b, const char *id, const char *suffix);
/* What code, run and exec share: the text of a file ("-": stdin)
 * appended to code, up to its cap, refused unless UTF-8 without NUL bytes
 * (CLI_OK, else CLI_FAIL after saying why); and the HTTP timeout for code
 * given timeout seconds to run (0: none). */
int cli_read_text(const char *path, struct nb_buf *code);
/* The bytes of a file ("-": stdin) appended to out, up to its cap: CLI_OK,
 * else CLI_FAIL after saying why. */
int cli_read_bytes(const char *path, struct nb_buf *out);
long cli_http_timeout(double timeout);

/* cmd_sandbox.c */
int cmd_create(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_ls(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_info(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_rm(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_ttl(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_pause(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_resume(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

/* cmd_exec.c */
int cmd_exec(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_run(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

/* cmd_shell.c */
int cmd_shell(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

/* cmd_code.c */
int cmd_code(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_contexts(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

/* cmd_keys.c */
int cmd_keys(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

/* cmd_port.c */
int cmd_port(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

/* cmd_files.c */
int cmd_cp(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_mkdir(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_mv(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
/* What "ls ID [PATH]" and "rm ID:PATH..." do (cmd_ls and cmd_rm hand over
 * their positional arguments); files_is_remote: is arg ID:PATH? */
int files_ls(struct client *c, const struct cli_cmd *cmd, struct args_pos *pos);
int files_rm(struct client *c, const struct cli_cmd *cmd, struct args_pos *pos, int recursive);
int files_is_remote(const char *arg);

/* cmd_procs.c */
int cmd_ps(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_logs(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_kill(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

/* cmd_volume.c */
int cmd_volume(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
/* cmd_template.c */
int cmd_template(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_snapshot(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);
int cmd_fork(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

/* cmd_mcp.c */
int cmd_mcp(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

#endif
