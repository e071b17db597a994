/*
 * args.h - a command's options, matched from a table: "--name VALUE",
 * "--name=VALUE", flags and repeatable options, anywhere among the
 * positional arguments (so "nanobox rm --json ID" and "nanobox rm ID --json"
 * both work). Every command also takes --help/-h and --json.
 */
#ifndef NB_CLI_ARGS_H
#define NB_CLI_ARGS_H

#include <stddef.h>
#include <yajl/yajl_gen.h>

#include "cli.h"

enum args_kind {
    ARG_FLAG,  /* dst: int *, set to 1 */
    ARG_VALUE, /* dst: const char **, the last one given wins */
    ARG_LIST,  /* dst: struct args_list *, every one given, in order */
};

struct args_list {
    const char **v;
    size_t n;
};

struct args_opt {
    const char *name; /* "--timeout" */
    enum args_kind kind;
    void *dst;
};

struct args_pos {
    char **v; /* the positional arguments, in order */
    int n;
    int stop_after; /* once this many are in, the next one (or "--") ends
                        * option parsing: exec's command. -1: never */
};

#define ARGS_GO_ON -1 /* args_parse: carry on with the command */

/*
 * Parse argv[1..argc) against opts (an array of n entries). Returns
 * ARGS_GO_ON, or the exit status the command should return at once: CLI_OK
 * after --help, CLI_USAGE after an unknown option or a missing value (the
 * message was printed). pos->v must hold argc entries.
 */
int args_parse(struct client *c, const struct cli_cmd *cmd, int argc, char **argv,
               const struct args_opt *opts, size_t n, struct args_pos *pos);

/* Number checks for option values: 0, or -1 after a usage error. */
int args_long(const struct cli_cmd *cmd, const char *what, const char *s, long min, long max,
              long *out);
int args_double(const struct cli_cmd *cmd, const char *what, const char *s, double min, double max,
                double *out);
/* "KEY=VALUE" with a non-empty KEY: 0, or -1 after a usage error. */
int args_kv(const struct cli_cmd *cmd, const char *what, const char *s);

/* Write key: {K: V, ...} from a list of "K=V" (checked with args_kv); a key
 * given twice keeps its last value. Nothing when the list is empty. */
void args_kv_map(yajl_gen g, const char *key, const struct args_list *l);

void args_list_free(struct args_list *l);

#endif
