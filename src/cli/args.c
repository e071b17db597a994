/*
 * args.c - see args.h.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "buf.h"
#include "client.h"
#include "json.h"

/* Does word a name option name, alone or as "name=value"? */
static int opt_matches(const char *a, const char *name, const char **inline_val)
{
    size_t n = strlen(name);

    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '\0') {
        *inline_val = NULL;
        return 1;
    }
    if (a[n] == '=') {
        *inline_val = a + n + 1;
        return 1;
    }
    return 0;
}

static void list_push(struct args_list *l, const char *v)
{
    l->v = nb_xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
    l->v[l->n++] = v;
}

int args_parse(struct client *c, const struct cli_cmd *cmd, int argc, char **argv,
               const struct args_opt *opts, size_t n, struct args_pos *pos)
{
    int options = 1;

    pos->n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        size_t k;

        if (!options || a[0] != '-' || a[1] == '\0') { /* "-" is stdin: positional */
            if (pos->stop_after >= 0 && pos->n >= pos->stop_after)
                options = 0;
            pos->v[pos->n++] = argv[i];
            continue;
        }
        if (!strcmp(a, "--")) {
            options = 0;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return cli_help(cmd);
        if (!strcmp(a, "--json")) {
            c->json = 1;
            continue;
        }
        for (k = 0; k < n; k++)
            if (opt_matches(a, opts[k].name, &val))
                break;
        if (k == n)
            return cli_usage_error(cmd, "unknown option %s", a);
        if (opts[k].kind == ARG_FLAG) {
            if (val != NULL)
                return cli_usage_error(cmd, "%s takes no value", opts[k].name);
            *(int *)opts[k].dst = 1;
            continue;
        }
        if (val == NULL) {
            if (i + 1 >= argc)
                return cli_usage_error(cmd, "%s needs a value", opts[k].name);
            val = argv[++i];
        }
        if (opts[k].kind == ARG_VALUE)
            *(const char **)opts[k].dst = val;
        else
            list_push(opts[k].dst, val);
    }
    return ARGS_GO_ON;
}

int args_long(const struct cli_cmd *cmd, const char *what, const char *s, long min, long max,
              long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno == ERANGE || v < min || v > max) {
        cli_usage_error(cmd, "%s must be a whole number from %ld to %ld, not \"%s\"", what, min,
                        max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int args_double(const struct cli_cmd *cmd, const char *what, const char *s, double min, double max,
                double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (s[0] == '\0' || *end != '\0' || errno == ERANGE || !isfinite(v) || v < min || v > max) {
        cli_usage_error(cmd, "%s must be a number from %g to %g, not \"%s\"", what, min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int args_kv(const struct cli_cmd *cmd, const char *what, const char *s)
{
    const char *eq = strchr(s, '=');

    if (eq == NULL || eq == s) {
        cli_usage_error(cmd, "%s takes KEY=VALUE, not \"%s\"", what, s);
        return -1;
    }
    return 0;
}

void args_kv_map(yajl_gen g, const char *key, const struct args_list *l)
{
    if (l->n == 0)
        return;
    nb_json_cstr(g, key);
    yajl_gen_map_open(g);
    for (size_t i = 0; i < l->n; i++) {
        const char *eq = strchr(l->v[i], '=');
        size_t klen = (size_t)(eq - l->v[i]);
        size_t j;
        for (j = i + 1; j < l->n; j++) /* a later K=V for the same K wins */
            if (!strncmp(l->v[j], l->v[i], klen + 1))
                break;
        if (j < l->n)
            continue;
        nb_json_str(g, l->v[i], klen);
        nb_json_cstr(g, eq + 1);
    }
    yajl_gen_map_close(g);
}

void args_list_free(struct args_list *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}
