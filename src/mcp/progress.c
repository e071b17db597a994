/*
 * progress.c - a long MCP tool call (one whose params._meta has a
 * progressToken): its notifications/progress every MCP_PROGRESS_EVERY_MS (in
 * seconds, or a transfer's bytes), and its cancellation (notifications/
 * cancelled, or a client gone). One tick for both: the watched exec's
 * polling loop calls it, and a backend calls it while one API call waits.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "buf.h"
#include "clock.h"
#include "json.h"
#include "mcp.h"
#include "mcp_tool.h"

#define MCP_BYTES_EVERY_MS 500 /* between two progress notifications of a transfer */

/* Whether t was cancelled (notifications/cancelled, or the client left). */
int mcp_cancelled(struct tool_call *t)
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
void mcp_watch_start(struct tool_call *t, double total, const char *ends, const char *moved)
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
    mcp_put_size(&msg, (unsigned long long)done);
    if (w->total > 0) {
        nb_buf_printf(&msg, " of ");
        mcp_put_size(&msg, (unsigned long long)w->total);
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
int mcp_watch_tick(void *arg, long long done, long long total)
{
    struct call_watch *w = arg;
    struct tool_call *t = w->t;
    int64_t now = nb_clock_mono_ms();
    char msg[192];

    if (mcp_cancelled(t))
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
