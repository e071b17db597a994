/*
 * render.c - the API's JSON answers as text a model reads: members, values
 * as the API wrote them, times in UTC, sizes and durations in units a
 * reader takes in.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "json.h"
#include "mcp_tool.h"

/* Member key of object o, or NULL. */
yajl_val mcp_member(yajl_val o, const char *key)
{
    if (o == NULL || !YAJL_IS_OBJECT(o))
        return NULL;
    for (size_t i = 0; i < o->u.object.len; i++)
        if (!strcmp(o->u.object.keys[i], key))
            return o->u.object.values[i];
    return NULL;
}

const char *mcp_member_str(yajl_val o, const char *key)
{
    return nb_json_string(mcp_member(o, key));
}

/* "1800 seconds (30 minutes)": the API's unit, and one a reader takes in. */
void mcp_put_seconds(struct nb_buf *b, unsigned long long secs)
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

/* v as text: strings as they are, numbers as the API wrote them. */
void mcp_put_value(struct nb_buf *b, yajl_val v)
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
void mcp_put_fields(struct nb_buf *b, yajl_val o, const char *const *keys)
{
    for (; *keys != NULL; keys++) {
        yajl_val v = mcp_member(o, *keys);
        if (v == NULL)
            continue;
        nb_buf_printf(b, "%s: ", *keys);
        mcp_put_value(b, v);
        nb_buf_printf(b, "\n");
    }
}

/* Unix seconds as "2025-11-29 18:40:12 UTC". */
void mcp_put_time(struct nb_buf *b, yajl_val v)
{
    struct tm tm;
    time_t when;
    char text[64];

    if (v == NULL || !YAJL_IS_INTEGER(v)) {
        mcp_put_value(b, v);
        return;
    }
    when = (time_t)YAJL_GET_INTEGER(v);
    if (gmtime_r(&when, &tm) == NULL ||
        strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) {
        mcp_put_value(b, v);
        return;
    }
    nb_buf_printf(b, "%s", text);
}

/* A size for a person: "812 bytes", "256 MiB", "1.5 KiB". */
void mcp_put_size(struct nb_buf *b, unsigned long long bytes)
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
void mcp_put_size_val(struct nb_buf *b, yajl_val v)
{
    if (v != NULL && YAJL_IS_INTEGER(v) && YAJL_GET_INTEGER(v) >= 0)
        mcp_put_size(b, (unsigned long long)YAJL_GET_INTEGER(v));
    else
        mcp_put_value(b, v);
}

/* text, ended by a newline unless empty */
void mcp_put_block(struct nb_buf *b, const char *text)
{
    size_t n = strlen(text);

    nb_buf_append(b, text, n);
    if (n > 0 && text[n - 1] != '\n')
        nb_buf_append(b, "\n", 1);
}
