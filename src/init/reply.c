/*
 * reply.c - see reply.h: each call goes through the table conn.c set in
 * the connection; an error's message is formatted here.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdarg.h>
#include <stdio.h>

#include "reply.h"

#define REPLY_ERRMSG_MAX 512

int init_reply_room(const struct init_conn *c, uint32_t body_len)
{
    return c->reply->room(c, body_len);
}

void init_reply_wait_room(struct init_conn *c)
{
    c->reply->wait_room(c);
}

int init_reply_send(struct init_conn *c, uint8_t type, const void *body, uint32_t len)
{
    return c->reply->send(c, type, body, len);
}

void init_reply_error(struct init_conn *c, int err, const char *fmt, ...)
{
    char msg[REPLY_ERRMSG_MAX];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (n >= REPLY_ERRMSG_MAX)
        n = REPLY_ERRMSG_MAX - 1;
    c->reply->error(c, err, msg, (size_t)n);
}

void init_reply_finish(struct init_conn *c)
{
    c->reply->finish(c);
}

void init_reply_resume_input(struct init_conn *c)
{
    c->reply->resume_input(c);
}

size_t init_reply_extra_input(const struct init_conn *c, const unsigned char **data)
{
    return c->reply->extra_input(c, data);
}

int init_reply_fd(const struct init_conn *c)
{
    return c->reply->fd(c);
}

void init_reply_handed_off(struct init_conn *c)
{
    c->reply->handed_off(c);
}
