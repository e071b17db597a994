/*
 * describe.c - the MCP descriptions as templates: ${name} stands for an
 * operator setting (default_ttl, exec_timeout_max, ...), filled in from the
 * backend's config when tools/list is answered, so a model reads this
 * server's limits rather than the shipped defaults. Without a config (the
 * stdio front) a setting reads "the server's NAME setting", or the text
 * after '|' in ${name|text}: never a number that may be wrong.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "buf.h"
#include "conf.h"
#include "json.h"
#include "mcp.h"
#include "mcp_tool.h"

#define MCP_MAX_DESCRIPTION 4096 /* bytes of one description, templates filled in */

/* The config of the server the backend reaches, or NULL. */
const struct nb_conf *mcp_conf(const struct mcp_session *s)
{
    return s->backend != NULL ? s->backend->conf : NULL;
}

/* Where relative file paths start: the config's workspace, or the usual one. */
const char *mcp_workspace(const struct mcp_session *s)
{
    const struct nb_conf *c = mcp_conf(s);
    return c != NULL && c->workspace[0] ? c->workspace : MCP_WORKSPACE;
}

/* sandbox_open_port's duration when none is given: ours, within the server's cap. */
unsigned mcp_port_duration(const struct mcp_session *s)
{
    const struct nb_conf *c = mcp_conf(s);
    if (c != NULL && c->max_port_duration > 0 && c->max_port_duration < MCP_DEFAULT_PORT_DURATION)
        return c->max_port_duration;
    return MCP_DEFAULT_PORT_DURATION;
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
        mcp_put_seconds(b, c->default_ttl);
    else if (IS("max_ttl"))
        mcp_put_seconds(b, c->max_ttl);
    else if (IS("exec_timeout"))
        mcp_put_seconds(b, c->exec_timeout);
    else if (IS("exec_timeout_max"))
        mcp_put_seconds(b, c->exec_timeout_max);
    else if (IS("max_pause"))
        mcp_put_seconds(b, c->max_pause);
    else if (IS("fork_max"))
        nb_buf_printf(b, "%u", c->fork_max);
    else if (IS("max_port_duration"))
        mcp_put_seconds(b, c->max_port_duration);
    else if (IS("port_duration"))
        mcp_put_seconds(b, mcp_port_duration(s));
    else if (IS("memory"))
        put_bytes(b, c->memory);
    else if (IS("volume_size_default"))
        put_bytes(b, c->volume_size_default);
    else if (IS("volume_size_max"))
        put_bytes(b, c->volume_size_max);
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
        nb_buf_printf(b, "%s", mcp_workspace(s));
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
void mcp_put_description(struct nb_buf *b, const char *tmpl, const struct mcp_session *s)
{
    const struct nb_conf *c = mcp_conf(s);
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
void mcp_gen_description(yajl_gen g, const char *key, const char *tmpl, const struct mcp_session *s)
{
    struct nb_buf d;

    nb_buf_init(&d, MCP_MAX_DESCRIPTION);
    mcp_put_description(&d, tmpl, s);
    nb_json_cstr(g, key);
    nb_json_str(g, d.data != NULL ? d.data : "", d.len);
    nb_buf_free(&d);
}
